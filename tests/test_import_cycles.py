"""The import graph inside each library package has no cycle (issue 23).

The graph is built from the source with ``ast``, not by importing: a node per module of the
package (``pkg/__init__.py`` is ``pkg``, subpackages included), an edge ``a -> b`` for every
import in ``a`` of a module ``b`` of the same package, wherever it is written: at the top,
inside a function (an import moved into a function to dodge a cycle is still a cycle), or
under ``if TYPE_CHECKING:`` (a type-only import still makes each module depend on the
other). ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to
``pkg``; ``import pkg.a.b`` to ``pkg.a.b``; relative imports are resolved. Importing a
submodule is not counted as importing its parent package's ``__init__``.

A package that still has cycles is marked ``xfail(strict=True)`` with its cycles as the
reason: once they are gone the test passes, which fails the run (XPASS), and the mark
must go.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

Graph = dict[str, dict[str, int]]  # module -> {imported module: line of the first import}


def package_modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (a directory under ``root``) by dotted name."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` or its longest prefix that is a module of the package."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def module_imports(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The modules of the package that module ``name`` (at ``path``) imports, anywhere in
    its source, with the line of the first such import."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: dict[str, int] = {}

    def add(target: str | None, line: int) -> None:
        if target is not None and target != name:
            out.setdefault(target, line)
            out[target] = min(out[target], line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(_known(alias.name, modules), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            for alias in node.names:
                sub = f"{src}.{alias.name}"
                add(sub if sub in modules else _known(src, modules), node.lineno)
    return out


def import_graph(root: Path, package: str) -> Graph:
    """The import graph of ``package``'s modules among themselves."""
    modules = package_modules(root, package)
    return {m: module_imports(m, p, modules) for m, p in modules.items()}


def strongly_connected(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (each sorted), in order
    of their first module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))
    return sorted(comps)


def shortest_cycle(graph: Graph, component: list[str]) -> list[str]:
    """A shortest cycle through the first module of a strongly connected component, as
    ``[a, b, ..., a]`` (breadth-first inside the component)."""
    start, inside = component[0], set(component)
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if w in inside and w not in parent:
                parent[w] = v
                queue.append(w)
    raise AssertionError(f"{component} is not strongly connected")


def describe_cycles(graph: Graph, root: Path = ROOT) -> list[str]:
    """One line per strongly connected component: its modules, and a shortest cycle with
    the file and line of each import on it."""
    lines = []
    for comp in strongly_connected(graph):
        cycle = shortest_cycle(graph, comp)
        steps = [cycle[0]]
        for a, b in zip(cycle, cycle[1:]):
            path = root / (a.replace(".", "/") + ".py")
            if not path.exists():
                path = root / a.replace(".", "/") / "__init__.py"
            steps.append(f"-> {b} ({path.relative_to(root)}:{graph[a][b]})")
        lines.append(f"{{{', '.join(comp)}}}: {' '.join(steps)}")
    return lines


# --------------------------------------------------------------------- the packages

def _xfail(package: str, cycles: str) -> object:
    """``package`` still has import cycles: an expected failure until they are gone."""
    return pytest.param(package, marks=pytest.mark.xfail(
        strict=True, raises=pytest.fail.Exception, reason=f"issue 23: {cycles}"))


PACKAGES = [
    "ir",
    "constraints",
    "codegen",
    "mapper",
]


@pytest.mark.parametrize("package", PACKAGES)
def test_package_import_graph_has_no_cycle(package: str) -> None:
    graph = import_graph(ROOT, package)
    assert len(graph) > 5 and sum(map(len, graph.values())) > 5, f"{package}: no graph"
    cycles = describe_cycles(graph)
    if cycles:
        pytest.fail(f"import cycles in {package}:\n" + "\n".join(cycles), pytrace=False)


def test_codegen_layering() -> None:
    """The splits of issue 23 stay: the statement tree, the buffer record and the device
    description sit below the modules that use them."""
    graph = import_graph(ROOT, "codegen")
    assert {"codegen.stmt", "codegen.buffers", "codegen.device_description"} <= graph.keys()
    assert "codegen.emit" not in graph["codegen.private_arrays"]
    assert "codegen.memory" not in graph["codegen.views"]
    assert "codegen.target" not in graph["codegen.device"]
    for m in ("accumulate", "barriers", "builder", "launch", "lower", "private_arrays",
              "resources"):
        assert "codegen.stmt" in graph[f"codegen.{m}"], m
    for m in ("launch", "lower", "resources"):  # the lowering needs no live device
        assert "codegen.device" not in graph[f"codegen.{m}"], m


# --------------------------------------------------------------------- the graph itself


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_graph_counts_every_kind_of_import(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "X = 1\n",
        "pkg/a.py": "import os\nfrom pkg import b\nfrom pkg import helper_name\nA = 1\n",
        "pkg/b.py": "def f():\n    from pkg.c import C\n    return C\n",
        "pkg/c.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from pkg.sub.d import D\nC = 1\n"),
        "pkg/sub/__init__.py": "",
        "pkg/sub/d.py": "from .. import e\nfrom . import f as ff\nimport pkg.sub\nD = 1\n",
        "pkg/e.py": "import pkg.sub.f as alias\n",
        "pkg/sub/f.py": "from ..a import A\nfrom other_pkg import a\n",
    })
    graph = import_graph(tmp_path, "pkg")
    assert {m: set(d) for m, d in graph.items()} == {
        "pkg": set(),
        "pkg.a": {"pkg.b", "pkg"},  # helper_name is no module: an edge to pkg itself
        "pkg.b": {"pkg.c"},  # inside a function
        "pkg.c": {"pkg.sub.d"},  # for type checking only
        "pkg.sub": set(),
        "pkg.sub.d": {"pkg.e", "pkg.sub.f", "pkg.sub"},  # relative, and a package
        "pkg.e": {"pkg.sub.f"},
        "pkg.sub.f": {"pkg.a"},  # other packages' modules are not nodes
    }
    assert graph["pkg.b"]["pkg.c"] == 2
    assert strongly_connected(graph) == [
        ["pkg.a", "pkg.b", "pkg.c", "pkg.e", "pkg.sub.d", "pkg.sub.f"]]
    (line,) = describe_cycles(graph, tmp_path)
    assert line == (
        "{pkg.a, pkg.b, pkg.c, pkg.e, pkg.sub.d, pkg.sub.f}: "
        "pkg.a -> pkg.b (pkg/a.py:2) -> pkg.c (pkg/b.py:2) -> pkg.sub.d (pkg/c.py:3) "
        "-> pkg.sub.f (pkg/sub/d.py:2) -> pkg.a (pkg/sub/f.py:1)")


def test_graph_without_cycles_is_clean(tmp_path: Path) -> None:
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from pkg import b\n",
                      "pkg/b.py": "def f():\n    import pkg.c\n", "pkg/c.py": "X = 1\n"})
    graph = import_graph(tmp_path, "pkg")
    assert set(graph["pkg.a"]) == {"pkg.b"} and set(graph["pkg.b"]) == {"pkg.c"}
    assert strongly_connected(graph) == [] and describe_cycles(graph, tmp_path) == []


def test_nothing_in_the_library_imports_the_command_line() -> None:
    """The command line parses and prints; the library never reaches back into it."""
    def is_cli(module: str) -> bool:
        return module == "mapper.cli" or module.startswith("mapper.cli.")

    users = sorted(m for pkg in ("ir", "constraints", "codegen", "mapper")
                   for m, deps in import_graph(ROOT, pkg).items()
                   if not is_cli(m) and any(is_cli(d) for d in deps))
    assert not users, f"library modules import mapper.cli: {users}"


def _library_files() -> list[Path]:
    """Every source file of the library: its four packages without the command line."""
    return [path for pkg in ("ir", "constraints", "codegen", "mapper")
            for path in sorted((ROOT / pkg).rglob("*.py"))
            if (ROOT / "mapper" / "cli") not in path.parents]


def test_the_library_never_imports_the_experiments() -> None:
    """experiments/ reproduces the papers with the library's public API; no module of the
    library reaches into it (an import anywhere in a module, not only at its top), and
    experiments/ never imports the command line."""
    pattern = re.compile(r"^\s*(from|import)\s+experiments\b", re.MULTILINE)
    users = sorted(str(path.relative_to(ROOT)) for path in _library_files()
                   if pattern.search(path.read_text(encoding="utf-8")))
    assert not users, f"library modules import experiments: {users}"
    cli = re.compile(r"^\s*(from|import)\s+mapper\.cli\b|^\s*from\s+mapper\s+import\s+cli\b",
                     re.MULTILINE)
    users = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "experiments").rglob("*.py")
                   if cli.search(path.read_text(encoding="utf-8")))
    assert not users, f"experiments import the command line: {users}"


def _experiments_imports(source: str, name: str) -> list[str]:
    """Where the module ``source`` imports ``experiments`` (an import statement anywhere in
    it, or a call of ``importlib.import_module``/``__import__`` with a literal name under
    it), as ``name:line: module``."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        found += [f"{name}:{node.lineno}: {n}" for n in names
                  if n == "experiments" or n.startswith("experiments.")]
    return found


def test_the_command_line_never_imports_the_experiments() -> None:
    """The command line only parses and prints over the library: no module of mapper/cli/
    imports experiments/, which is not installed with the package (the demo is
    ``python -m experiments.demo``; the layer presets are ``ir.conv_layer``'s)."""
    files = sorted((ROOT / "mapper" / "cli").rglob("*.py"))
    assert len(files) > 5
    users = [hit for path in files for hit in _experiments_imports(
        path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]
    assert not users, f"the command line imports experiments: {users}"


@pytest.mark.parametrize("source, found", [
    ("import experiments.demo", True),
    ("from experiments import vgg16", True),
    ("def f():\n    from experiments.vgg16 import x", True),
    ("import importlib\nimportlib.import_module('experiments.demo')", True),
    ("__import__('experiments')", True),
    ("import experimental\nfrom mapper.experiments_x import y\nfrom . import experiments", False),
])
def test_the_experiments_scan_sees_every_form_of_import(source: str, found: bool) -> None:
    """The scan above finds each way a module can name experiments, and nothing else (a
    witness that it can fail)."""
    assert bool(_experiments_imports(source + "\n", "probe.py")) == found


def test_nothing_paper_specific_in_the_library() -> None:
    """The papers' hand mapping and tuning, the hand-written kernels and argument parsing
    live in experiments/ and the command line, not in the library. VGG-16's layer shapes are
    library data, in the presets next to ``ConvLayer`` (``ir/conv_layer.py``) only."""
    pattern = re.compile(r"vgg|hand[ -_]?mapping|paper_like|PAPER_|handwritten|argparse",
                         re.IGNORECASE)
    presets = re.compile(r"hand[ -_]?mapping|paper_like|PAPER_|handwritten|argparse",
                         re.IGNORECASE)
    hits = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}" for path in _library_files()
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if (presets if path == ROOT / "ir" / "conv_layer.py" else pattern).search(line)]
    assert not hits, "paper-specific names in the library:\n" + "\n".join(hits)


def test_the_mapping_rules_do_not_depend_on_the_lowering() -> None:
    """The rules read the IR (address spaces come from ``ir.memory_space``); the lowering
    is one of their independent witnesses, so they must not be built from it."""
    pattern = re.compile(r"^\s*(from|import)\s+codegen\b", re.MULTILINE)
    users = [name for name in ("nesting.py", "rules.py")
             if pattern.search((ROOT / "mapper" / name).read_text(encoding="utf-8"))]
    assert not users, f"mapper/{users} import codegen"
