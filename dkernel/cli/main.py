"""The ``dkernel`` command: ``python -m dkernel`` or the ``dkernel`` console script."""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import sys
from collections.abc import Sequence

from .._secrets import RedactingFilter, redact
from .._validation import DKernelError
from .._version import __version__
from ..runtime import show_progress
from ._common import check_cluster_option, fail, parse_storage_options

#: Modules that add subcommands (each has ``register(subparsers)``).
COMMAND_MODULES = (
    "dkernel.cli._data",
    "dkernel.cli._demo",
    "dkernel.cli._kmeans",
    "dkernel.cli._svm",
    "dkernel.cli._coreset",
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line, ``dkernel: error: ...``, exit 2.

    An option no parser knows is named in the error even when argparse would first
    complain about a missing argument, with the closest known option as a suggestion.
    """

    _seen_args: list[str] | None = None

    def parse_known_args(self, args=None, namespace=None):
        self._seen_args = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        unknown = self._unknown_options(self._seen_args or [])
        misplaced = self._misplaced_options(self._seen_args or [])
        if misplaced and not unknown:
            message = (
                f"{misplaced[0]} is an option of a command: put it after the command "
                f"(dkernel COMMAND ... {misplaced[0]})"
            )
        elif unknown and not message.startswith("unrecognized arguments"):
            message = "unrecognized arguments: " + " ".join(unknown)
        if message.startswith("unrecognized arguments"):
            message += self._suggestion(unknown or message.split(":", 1)[1].split())
        self.exit(2, f"dkernel: error: {redact(message)} (see dkernel --help)\n")

    def _known(self) -> list[str]:
        known = list(self._option_string_actions)
        for action in self._actions:  # a main parser also knows its subcommands' options
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    if isinstance(sub, _Parser):
                        known += sub._known()
        return known

    def _unknown_options(self, args: Sequence[str]) -> list[str]:
        known = self._known()
        out = []
        for tok in args:
            if tok == "--":
                break
            if not tok.startswith("-") or tok == "-" or _is_number(tok):
                continue
            opt = tok.split("=", 1)[0]
            if opt in known or (
                opt.startswith("--") and any(k.startswith(opt) for k in known if len(opt) > 2)
            ):
                continue
            if not opt.startswith("--") and opt[:2] in known:  # -vv, -n5: short flags
                continue
            out.append(tok)
        return out

    def _misplaced_options(self, args: Sequence[str]) -> list[str]:
        """Options of a subcommand given before it (``dkernel --n-clusters 3 kmeans``)."""
        commands = {
            name
            for action in self._actions
            if isinstance(action, argparse._SubParsersAction)
            for name in action.choices
        }
        if not commands:
            return []
        own = set(self._option_string_actions)
        known = set(self._known())
        out = []
        for tok in args:
            if tok in commands or tok == "--":
                break
            opt = tok.split("=", 1)[0]
            if tok.startswith("-") and opt not in own and opt in known:
                out.append(opt)
        return out

    def _suggestion(self, unknown: Sequence[str]) -> str:
        known = [k for k in self._known() if k.startswith("--")]
        for tok in unknown:
            if tok.startswith("-"):
                close = difflib.get_close_matches(tok.split("=", 1)[0], known, n=1, cutoff=0.75)
                if close:
                    return f"; did you mean {close[0]}?"
        return ""


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _add_global_options(
    parser: argparse.ArgumentParser, *, here: bool, cluster: bool = True
) -> None:
    """``--cluster``, ``-v`` and ``--progress``: before the command, or (``here=False``)
    repeated after it, where they override the ones before it. A command that runs in
    this process (``cluster=False``) does not list ``--cluster``."""
    kw = {} if here else {"default": argparse.SUPPRESS}
    have = parser._option_string_actions
    if cluster and "--cluster" not in have:
        parser.add_argument(
            "--cluster",
            help="cluster config YAML (cluster-configs/*.yaml) or scheduler address "
            "(default: $DASK_SCHEDULER_ADDRESS if set, else the embedded LocalCluster)",
            **({"default": None} if here else kw),
        )
    if "-v" not in have and "--verbose" not in have:
        parser.add_argument(
            "-v",
            "--verbose",
            action="count",
            help="log progress (-v) or debug timings (-vv)",
            **({"default": 0} if here else kw),
        )
    if "--storage-option" not in have:
        parser.add_argument(
            "--storage-option",
            action="append",
            metavar="KEY=VALUE",
            help="option of the object-storage client for s3:// gs:// az:// stores and "
            "model files (repeat it: endpoint_url=http://host:9000, key=..., "
            "client_kwargs.region_name=eu-west-1); by default the usual AWS_*/GOOGLE_*/"
            "AZURE_* variables and profiles",
            **({"default": None} if here else kw),
        )
    if "--progress" not in have:
        parser.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            help="progress bars on stderr (default: on when stderr is a terminal)",
            **({"default": None} if here else kw),
        )


def _leaf_parsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    yield from _leaf_parsers(sub)
                else:
                    yield sub


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dkernel",
        description="Scalable kernel methods on Dask. Stores and model files are named by "
        "a local path or a URL: file://, s3://BUCKET/KEY, gs://, az:// or abfs://.",
    )
    parser.add_argument("--version", action="version", version=f"dkernel {__version__}")
    _add_global_options(parser, here=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for leaf in _leaf_parsers(parser):
        leaf.formatter_class = _HelpFormatter
        for action in leaf._actions:  # an option without help text still shows its default
            if action.help is None and action.option_strings and action.nargs != 0:
                if not _no_default(action.default):
                    action.help = "(default: %(default)s)"
        _add_global_options(leaf, here=False, cluster=leaf.get_default("uses_cluster") is not False)
    return parser


def _no_default(default) -> bool:
    return default is None or default is False or default == argparse.SUPPRESS


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the text already names it or
    there is none to name (a flag, or a default computed from the data)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or "default" in text.lower()
            or "%(default)" in text
            or _no_default(default)
            or action.nargs == 0
        ):
            return action.help
        return f"{text} (default: %(default)s)".lstrip()


def _cli_message(msg: str, args: argparse.Namespace) -> str:
    """Speak of the CLI's flags where the library's error names a keyword argument."""
    if hasattr(args, "overwrite"):
        msg = msg.replace("pass overwrite=True", "pass --overwrite")
    if hasattr(args, "zero_based"):
        msg = msg.replace("zero_based=True (--zero-based in the CLI)", "--zero-based")
    return msg


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help/--version (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # every log line: no secret shown
        handler.addFilter(RedactingFilter())
    # distributed logs cluster start/stop at INFO: only show it at -vv (its import
    # installs its own levels, so import it first)
    import dask
    import distributed  # noqa: F401

    for name in ("distributed", "bokeh", "tornado"):
        logging.getLogger(name).setLevel(logging.DEBUG if args.verbose >= 2 else logging.WARNING)
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    try:
        check_cluster_option(args.cluster)  # every subcommand, before any work
        storage = parse_storage_options(args.storage_option)
        with show_progress(bool(show)), dask.config.set({"dkernel.storage.options": storage}):
            return int(args.func(args) or 0)
    except DKernelError as exc:
        return fail(_cli_message(str(exc), args))
    except OSError as exc:  # unreadable/unwritable paths, full disk ...
        return fail(str(exc))
    except KeyboardInterrupt:
        return fail("interrupted", 130)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
