"""The ``dkernel`` command line."""

# The internal surface: argument checks the tests call one by one (not part of the public API).
from ._common import check_output_store as check_output_store
from ._common import local_path as local_path
from .main import build_parser, main

__all__ = ["build_parser", "main"]
