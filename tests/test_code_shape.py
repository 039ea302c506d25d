"""The package's shape rules (issue 23): short functions, checked on the source."""

from __future__ import annotations

import ast
import pathlib

import dkernel

#: Lines of a function body after its docstring; numba loops may reach NUMBA_MAX.
MAX_LINES, NUMBA_MAX = 60, 100


def _is_numba(fn: ast.AST) -> bool:
    for dec in getattr(fn, "decorator_list", []):
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("njit", "jit", "overload", "generated_jit"):
            return True
    return False


def _body_lines(fn) -> int:
    body = fn.body
    first = body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    if docstring and isinstance(first.value.value, str):
        if len(body) == 1:
            return 0
        first = body[1]
    return fn.end_lineno - first.lineno + 1


def test_no_long_functions():
    root = pathlib.Path(dkernel.__file__).parent
    long = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                limit = NUMBA_MAX if _is_numba(node) else MAX_LINES
                if _body_lines(node) > limit:
                    long.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    assert not long, f"functions over {MAX_LINES} lines (numba {NUMBA_MAX}): {long}"
