"""The package version, in a module of its own: read by the build (pyproject.toml) and
imported by the modules that record it, without importing the package's __init__."""

__version__ = "0.1.0"
