"""The package's imports: the library's modules import each other at the top of the file, where
a reader (and ``farm-studio look``) sees them, with no import circle; an import inside a function
is kept only where it saves a command's start-up a heavy library or a part it may not need, and
each such place is listed here with why. A new one fails until it is hoisted or listed."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "batsched_ml"

#: (module, function, imported module) -> why it is imported there, not at the top. The command
#: line (``batsched_ml/cli/``) imports each command's modules when that command runs: not listed.
DEFERRED: dict[tuple[str, str, str], str] = {
    ("batsched_ml", "__getattr__", "batsched_ml.api"): (
        "the package's face: `import batsched_ml` (every command's start) does not load the run "
        "pipeline until the API is used"
    ),
    ("batsched_ml.sim", "__getattr__", "batsched_ml.sim.simulator"): (
        "the package's face: the Python simulator loads when it is named"
    ),
    ("batsched_ml.predict.forest", "train_forest", "batsched_ml.predict.bootstrap_rows"): (
        "scikit-learn (1.5 s with SciPy), only where the compiled grower does not grow the forest"
    ),
    ("batsched_ml.trainer.server", "_import_training_libraries", "batsched_ml.predict.grow"): (
        "the side trainer answers its first request before it loads its training libraries"
    ),
    ("batsched_ml.results.outputs", "write_replay", "batsched_ml.results.classified_files"): (
        "pandas (0.3 s and 110 MiB with pyarrow), only for a classifying scheduler's tables"
    ),
    ("batsched_ml.runs.replaying", "_run_over_zmq", "batsched_ml.transport.v4"): (
        "ZeroMQ, only for a replay over a socket"
    ),
    ("batsched_ml.runs.replaying", "_run_over_zmq", "batsched_ml.transport.v5"): (
        "ZeroMQ, only for a replay over a socket"
    ),
}


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str, root: Path = ROOT) -> bool:
    path = root.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imported(
    module: str, path: Path, node: ast.Import | ast.ImportFrom, root: Path = ROOT
) -> list[str]:
    """The modules ``node`` (in ``module``, at ``path``) imports: ``from X import y`` names
    ``X.y`` when that is a module, else ``X``; relative imports resolved."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        target = ".".join([*package, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    named = [f"{target}.{alias.name}" for alias in node.names]
    return [name for name in named if _is_module(name, root)] or [target]


def _deferred_imports(root: Path = ROOT) -> dict[tuple[str, str, str], list[str]]:
    """Every import of the package's modules inside a function, outside the command line:
    (module, function, imported module) -> the places (file:line)."""
    found: dict[tuple[str, str, str], list[str]] = {}
    package = root / "batsched_ml"
    for path in sorted(package.rglob("*.py")):
        if "cli" in path.relative_to(package).parts:
            continue
        module = _module_name(path, root)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                for target in _imported(module, path, node, root):
                    if target == "batsched_ml" or target.startswith("batsched_ml."):
                        key = (module, function.name, target)
                        where = f"{path.relative_to(root)}:{node.lineno}"
                        found.setdefault(key, []).append(where)
    return found


def test_the_library_imports_its_modules_at_the_top_but_where_listed() -> None:
    found = _deferred_imports()
    unlisted = {key: where for key, where in found.items() if key not in DEFERRED}
    assert not unlisted, (
        "imports inside functions: hoist them to the top of the file, or list them in "
        f"DEFERRED with why: {unlisted}"
    )
    stale = sorted(key for key in DEFERRED if key not in found)
    assert not stale, f"listed in DEFERRED but no longer there: {stale}"


def test_the_check_finds_an_import_inside_a_function(tmp_path: Path) -> None:
    results = tmp_path / "batsched_ml" / "results"
    (tmp_path / "batsched_ml" / "runs").mkdir(parents=True)
    results.mkdir()
    for name in ("__init__.py", "runs/pipeline.py", "results/y.py"):
        (tmp_path / "batsched_ml" / name).touch()
    (results / "x.py").write_text(
        "import json\nfrom batsched_ml.results import y\n\n"
        "def f():\n    from batsched_ml.runs import pipeline\n    from . import y\n"
        "    import numpy\n"
    )
    assert _deferred_imports(tmp_path) == {
        ("batsched_ml.results.x", "f", "batsched_ml.runs.pipeline"): ["batsched_ml/results/x.py:5"],
        ("batsched_ml.results.x", "f", "batsched_ml.results.y"): ["batsched_ml/results/x.py:6"],
    }


def _module_level_imports() -> dict[str, set[str]]:
    """Each library module -> the package's modules it imports when it is imported (its
    top-level imports, not those only for type checkers)."""
    modules = {
        _module_name(path): path
        for path in PACKAGE.rglob("*.py")
        if "cli" not in path.relative_to(PACKAGE).parts and path.name != "__main__.py"
    }
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges: set[str] = set()
        body = list(ast.parse(path.read_text(encoding="utf-8")).body)
        while body:
            node = body.pop(0)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.If | ast.Try | ast.With):
                body.extend(ast.iter_child_nodes(node))
                continue
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            edges.update(name for name in _imported(module, path, node) if name in modules)
        graph[module] = edges - {module}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_library_has_no_import_circle() -> None:
    graph = _module_level_imports()
    assert graph["batsched_ml.runs.pipeline"] >= {
        "batsched_ml.runs.replaying",
        "batsched_ml.results.outputs",
    }  # the graph is read: a run's pipeline imports its replay and its writers
    assert _circles(graph) == []


def test_the_circle_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
