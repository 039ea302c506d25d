"""The package's shape rules (issue 23): short functions, checked on the source."""

from __future__ import annotations

import ast
import functools
import pathlib
import re

import dkernel

#: The package's source folder.
ROOT = pathlib.Path(dkernel.__file__).parent

#: Lines of a function body after its docstring; numba loops may reach NUMBA_MAX.
MAX_LINES, NUMBA_MAX = 60, 100


@functools.cache
def _trees() -> tuple[tuple[pathlib.Path, ast.Module], ...]:
    """Every module of the package, parsed once: (path, tree), in path order."""
    return tuple(
        (path, ast.parse(path.read_text(), str(path))) for path in sorted(ROOT.rglob("*.py"))
    )


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
    long = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                limit = NUMBA_MAX if _is_numba(node) else MAX_LINES
                if _body_lines(node) > limit:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not long, f"functions over {MAX_LINES} lines (numba {NUMBA_MAX}): {long}"


# ----------------------------------------------------------------- the import graph
def _unit(module: str) -> str:
    """The part of the package a module belongs to: its subpackage (``data``), a floor
    module (``_base``), or ``dkernel`` for the package's ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "dkernel"


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Nodes under ``if TYPE_CHECKING:`` (imports for annotations only, never run)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def _imported(node: ast.AST, package: str) -> list[str]:
    """The dkernel modules an import statement reads (``from . import name``: the module
    ``name`` if there is one, else the package whose attribute it is)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if not node.level:
        return [node.module or ""]
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    if node.module:
        return [".".join([*base, node.module])]
    out = []
    for a in node.names:
        where = ROOT.parent.joinpath(*base, a.name)
        is_module = where.is_dir() or where.with_suffix(".py").is_file()
        out.append(".".join([*base, a.name] if is_module else base))
    return out


def import_graph() -> dict[str, set[str]]:
    """Which part of the package imports which, from every import statement: at module
    level and inside functions alike (a function-level import is a dependency deferred,
    not removed)."""
    edges: dict[str, set[str]] = {}
    for path, tree in _trees():
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_pkg else parts)
        package = module if is_pkg else module.rsplit(".", 1)[0]
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            for target in _imported(node, package):
                if target.split(".")[0] != "dkernel":
                    continue
                a, b = _unit(module), _unit(target)
                if a != b:
                    edges.setdefault(a, set()).add(b)
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle of the graph, as a path, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, ())):
            if state.get(v) == 1:
                return [*stack[stack.index(v) :], v]
            if v not in state and (found := visit(v)):
                return found
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(edges):
        if u not in state and (found := visit(u)):
            return found
    return None


def test_no_import_circle_even_through_function_level_imports():
    """The parts of the package form a layering: runtime below data, data below kernels,
    the estimator floor and the estimators above; no part imports one that imports it,
    at module level or inside a function."""
    edges = import_graph()
    assert "data" in edges["_base"] and "runtime" in edges["data"]  # the graph sees them
    assert _cycle(edges) is None, f"import circle: {' -> '.join(_cycle(edges) or [])}"


def test_the_circle_finder_finds_a_circle():
    assert _cycle({"data": {"runtime"}, "runtime": {"data"}}) == ["data", "runtime", "data"]
    assert _cycle({"data": {"runtime"}, "runtime": set()}) is None


#: The layers of the package, lowest first: a part imports only parts of lower layers
#: (the floor modules are the top-level private modules, declared here one by one).
LAYERS = (
    ("_version", "_validation", "_defaults", "_secrets"),  # no dkernel imports
    ("runtime",),  # clusters, clients, progress, the tree-reduce
    ("data",),  # stores, readers, sampling, checkpoint files
    ("kernels",),
    ("_params", "_base", "_model_io"),  # the estimator floor
    ("dkernel",),  # the package's __init__ (dkernel.load_model)
    ("cluster", "svm"),
    ("coreset",),
    ("cli",),
    ("__main__",),
)


def test_every_import_goes_down_the_layers():
    layer = {part: i for i, parts in enumerate(LAYERS) for part in parts}
    edges = import_graph()
    undeclared = sorted(({*edges} | {b for bs in edges.values() for b in bs}) - {*layer})
    assert not undeclared, f"parts not in LAYERS (a floor module must be declared): {undeclared}"
    upward = [f"{a} -> {b}" for a, bs in edges.items() for b in bs if layer[b] >= layer[a]]
    assert not upward, f"imports that do not go down the layers: {upward}"


# ----------------------------------------------------------------- class shape (issue 35)
#: Estimators hold parameters and orchestration; the algorithm's steps are module-level
#: functions of an explicit state, so no class grows past these.
MAX_CLASS_LINES, MAX_METHODS = 500, 20


@functools.cache
def _class_shapes() -> dict[str, tuple[int, int]]:
    """``path:Class`` -> (lines, methods defined in its body) of every class in dkernel
    (computed once: callers read it, never change it)."""
    shapes = {}
    for path, tree in _trees():
        where = path.relative_to(ROOT).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = [
                    n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                ]
                lines = node.end_lineno - node.lineno + 1
                shapes[f"{where}:{node.name}"] = (lines, len(methods))
    return shapes


def _too_big(shape: tuple[int, int]) -> bool:
    return shape[0] > MAX_CLASS_LINES or shape[1] > MAX_METHODS


def test_no_large_classes():
    shapes = _class_shapes()
    big = [f"{k} ({n} lines, {m} methods)" for k, (n, m) in shapes.items() if _too_big((n, m))]
    assert not big, f"classes over {MAX_CLASS_LINES} lines or {MAX_METHODS} methods: {big}"


def test_the_class_measure_sees_a_large_class():
    assert _too_big((501, 3)) and _too_big((40, 21)) and not _too_big((500, 20))
    shapes = _class_shapes()
    assert shapes["svm/_bsgd.py:BudgetedSVC"][1] >= 10  # the public methods are counted


def test_bsgd_module_is_short():
    """The estimator's module holds the class and its thin delegations; the steps live in
    their own modules (``_fit``, ``_partial``, ``_state``, ``_predict``, ``_io``)."""
    path = ROOT / "svm" / "_bsgd.py"
    assert len(path.read_text().splitlines()) < 900


def _self_calls(fn: ast.AST) -> list[str]:
    return [
        c.func.attr
        for c in ast.walk(fn)
        if isinstance(c, ast.Call)
        and isinstance(c.func, ast.Attribute)
        and isinstance(c.func.value, ast.Name)
        and c.func.value.id == "self"
    ]


def test_budgeted_svc_fit_reads_as_one_story():
    """``BudgetedSVC.fit`` and the methods of ``self`` it calls call at most 10 methods of
    ``self``: the fit's steps take an explicit plan and state, not the estimator."""
    path = ROOT / "svm" / "_bsgd.py"
    tree = ast.parse(path.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "BudgetedSVC")
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    calls = _self_calls(methods["fit"])
    calls += [c for name in list(calls) if name in methods for c in _self_calls(methods[name])]
    assert len(calls) <= 10, calls


def test_minibatch_fit_reads_as_its_phases():
    """``MiniBatchKernelKMeans.fit`` calls few methods of ``self``: the steps are functions."""
    path = ROOT / "cluster" / "_minibatch.py"
    tree = ast.parse(path.read_text())
    cls = next(n for n in tree.body if getattr(n, "name", "") == "MiniBatchKernelKMeans")
    fit = next(n for n in cls.body if getattr(n, "name", "") == "fit")
    calls = set(_self_calls(fit))
    assert "_start_fit" in calls and len(calls) <= 10, sorted(calls)


# ----------------------------------------------------------------- tests on the public surface
TESTS = pathlib.Path(__file__).parent


def _private_module(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "dkernel" and any(p.startswith("_") for p in parts)


def private_imports(tree: ast.AST) -> list[int]:
    """Lines of the imports from dkernel that reach past the subpackages' surface: a module
    with a path component starting with ``_`` (``dkernel.data._verify``) or a name starting
    with ``_`` (``from dkernel.data import _verify``)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "dkernel":
                continue
            if _private_module(node.module) or any(a.name.startswith("_") for a in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.Import) and any(_private_module(a.name) for a in node.names):
            lines.append(node.lineno)
    return lines


def _private_aliases(tree: ast.AST) -> set[str]:
    """Names a file binds to a private dkernel module (``from dkernel.svm import _bsgd as
    nb``: ``nb``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                if node.module.startswith("dkernel") and (
                    a.name.startswith("_") or _private_module(node.module)
                ):
                    out.add(a.asname or a.name)
    return out


def private_patches(tree: ast.AST) -> list[int]:
    """Lines of ``monkeypatch.setattr`` calls aimed at private names: an attribute name
    starting with ``_``, an object reached through one (``_progress.in_notebook``,
    ``_atomic.os``) or through a private module's alias, or a dotted string naming one."""
    aliases = _private_aliases(tree)
    lines = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "setattr"
            and ast.unparse(node.func.value).endswith("monkeypatch")
            and node.args
        ):
            continue
        target, *rest = node.args
        if isinstance(target, ast.Constant) and isinstance(target.value, str):
            names = target.value.split(".")
        else:
            names = [n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(target)
                     if isinstance(n, (ast.Name, ast.Attribute))]  # fmt: skip
            if rest and isinstance(rest[0], ast.Constant) and isinstance(rest[0].value, str):
                names.append(rest[0].value)
        if any(n.startswith("_") or n in aliases for n in names):
            lines.append(node.lineno)
    return lines


def _per_file(find) -> dict[str, int]:
    counts = {}
    for path in sorted(TESTS.glob("*.py")):
        found = find(ast.parse(path.read_text(), str(path)))
        if found:
            counts[path.name] = len(found)
    return counts


#: Private imports in the tests (issue 35 asks for at most 10; 8 today): the numba kernels
#: checked against NumPy references (``dkernel.svm._budget`` in three files,
#: ``dkernel.cluster._numba``), the exact refit's solver (``_refit``), the fit's config and
#: checkpoint files (``_fit`` through the builders of tests/_bsgd.py, ``_io``) and the kernel
#: registry's identity checks. The state
#: and steps are tested through their named modules (``dkernel.svm.state``, ``.stream``,
#: ``.rounds``).
MAX_PRIVATE_IMPORTS = 10


def test_tests_import_the_subpackages_surface():
    counts = _per_file(private_imports)
    total = sum(counts.values())
    assert total <= MAX_PRIVATE_IMPORTS, f"{total} private imports in tests/: {counts}"


def test_tests_patch_no_private_name():
    counts = _per_file(private_patches)
    assert not counts, f"monkeypatch.setattr of private names: {counts}"


def test_the_finders_see_private_imports_and_patches():
    tree = ast.parse(
        "from dkernel.data import _verify, ingest\n"
        "from dkernel.svm._bsgd import fit\n"
        "from dkernel.svm import _budget as nb\n"
        "from dkernel.data import ingest\n"
        "import dkernel.data._store\n"
        "def test(monkeypatch):\n"
        "    monkeypatch.setattr(_verify, 'read', f)\n"
        "    monkeypatch.setattr(Model, '_step', f)\n"
        "    monkeypatch.setattr(nb, 'sgd', f)\n"
        "    monkeypatch.setattr('dkernel.data._store.write', f)\n"
        "    monkeypatch.setattr(os, 'rename', f)\n"
        "    monkeypatch.setattr(fs, 'rm', f)\n"
    )
    assert private_imports(tree) == [1, 2, 3, 5]
    assert private_patches(tree) == [7, 8, 9, 10]


# ------------------------------------------------------- one way to find the client (34)
#: How code finds a Dask client other than by ``dkernel.runtime.distributed_client``.
_CLIENT_FINDERS = {
    "Client.current(": r"Client\.current\(",
    "default_client(": r"\bdefault_client\(",
    "distributed's get_client": r"\bdistributed[\w.]* import .*\bget_client\b",
    "get_worker().client": r"get_worker\(\)\.client",
    "].client": r"\]\.client\b",
    "__self__": r"__self__",
}
#: The two places that may: ``distributed_client`` itself, and ``get_client``'s reuse of a
#: running client, which asks "is there one to reuse?", not "where would Dask compute?"
_CLIENT_FOUND_HERE = {
    "runtime/_progress.py": ("].client", "__self__"),
    "runtime/_client.py": ("Client.current(",),
}


def client_finders(source: str) -> list[str]:
    """The client-finding idioms of ``_CLIENT_FINDERS`` in ``source`` (code lines only)."""
    code = [line.split("#", 1)[0] for line in source.splitlines()]
    return [name for name, pat in _CLIENT_FINDERS.items() if any(re.search(pat, ln) for ln in code)]


def test_one_function_finds_the_client():
    found = {}
    for path, _ in _trees():
        where = path.relative_to(ROOT).as_posix()
        extra = set(client_finders(path.read_text())) - set(_CLIENT_FOUND_HERE.get(where, ()))
        if extra:
            found[where] = sorted(extra)
    assert not found, f"a client found outside runtime.distributed_client: {found}"


def test_the_client_finder_finds_them():
    src = (
        "client = futs[0].client\nc = Client.current()  \nx = 1  # default_client()\n"
        "from distributed.worker import get_client\nfrom ._client import get_client\n"
    )
    assert client_finders(src) == ["Client.current(", "distributed's get_client", "].client"]
