"""The ``dkernel`` command: ``python -m dkernel`` or the ``dkernel`` console script."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .._validation import DKernelError
from ._common import fail

#: Modules that add subcommands (each has ``register(subparsers)``).
COMMAND_MODULES = (
    "dkernel.cli._data",
    "dkernel.cli._demo",
    "dkernel.cli._kmeans",
    "dkernel.cli._svm",
    "dkernel.cli._coreset",
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line, ``dkernel: error: ...``, exit 2."""

    def error(self, message: str):
        self.exit(2, f"dkernel: error: {message} (see dkernel --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dkernel", description="Scalable kernel methods on Dask.")
    parser.add_argument(
        "--cluster",
        default=None,
        help="cluster config YAML (cluster-configs/*.yaml) or scheduler address "
        "(default: the embedded LocalCluster)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log progress (-v) or debug timings (-vv)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    # distributed logs cluster start/stop at INFO: only show it at -vv (its import
    # installs its own levels, so import it first)
    import distributed  # noqa: F401

    for name in ("distributed", "bokeh", "tornado"):
        logging.getLogger(name).setLevel(logging.DEBUG if args.verbose >= 2 else logging.WARNING)
    try:
        return int(args.func(args) or 0)
    except DKernelError as exc:
        return fail(str(exc))
    except OSError as exc:  # unreadable/unwritable paths, full disk ...
        return fail(str(exc))
    except KeyboardInterrupt:
        return fail("interrupted", 130)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
