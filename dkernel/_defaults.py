"""dkernel's library defaults in Dask's config, loaded once when the package is imported.

The defaults live in one packaged YAML file (``runtime/dkernel.yaml``, loaded with
``dask.config.update_defaults`` as dask-jobqueue does), overridable by
``~/.config/dask``, ``DASK_CONFIG`` and ``DASK_DKERNEL__...`` environment variables, and
for a block of code by ``dask.config.set``. Loaded by the package's ``__init__`` so every
subpackage (and every worker process that imports one) sees them. Tuning knobs are read
with :func:`setting` at call time, never copied into a module constant at import.
"""

from __future__ import annotations

import os
from typing import Any

import dask.config
import yaml

PATH = os.path.join(os.path.dirname(__file__), "runtime", "dkernel.yaml")
with open(PATH, encoding="utf-8") as _fh:
    dask.config.update_defaults(yaml.safe_load(_fh))


def setting(key: str) -> Any:
    """The value of ``dkernel.<key>`` in Dask's config now (``"kernels.tile-bytes"``)."""
    return dask.config.get(f"dkernel.{key}")
