"""Rooms stay rooms: no module reaches into another module's private names or another package's private modules,
no module grows past the size a reader can hold, and the import contracts hold (issue 35).

Walks the source of the packages with `ast`: `from pkg.mod import _name`, `from pkg._mod import name` and
`mod._name` on an imported module (not on self/cls or a local object) are refused (inside a package, its modules
import each other relatively). bench/ measures the project from outside, as tests do: it may import a private module
by its path (`from pkg._mod import name`), never a private name. `lint-imports` checks the contracts in
pyproject.toml: the layers harness < evaluators < mutators < experiments, experiments' and harness's packages along
the data flow, with no cycle between them, and no project module importing bench.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "experiments", "mutators", "evaluators", "bench")
MAX_LINES = 450
SIZED = ("harness", "evaluators", "mutators", "experiments")


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


# Standard-library names spelled with a leading underscore that are documented public API, not private reaches:
# os._exit is the documented way to end a process at once (no cleanup handlers), e.g. after a second signal.
ALLOWED = {("os", "_exit")}


def private_reaches(source: str, private_modules: bool = False) -> list[str]:
    """Each cross-module use of a private name in source, as 'line: what'. private_modules: a private module imported
    by its path (`from pkg._mod import name`) is allowed, as bench/ does; its private names are not."""
    tree = ast.parse(source)
    modules: set[str] = set()  # local names bound to imported modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if any(_private(part) for part in node.module.split(".")) and not private_modules:
                found.append(f"{node.lineno}: from {node.module} import ...")
                continue
            for a in node.names:
                if _private(a.name):
                    found.append(f"{node.lineno}: from {node.module} import {a.name}")
                else:
                    modules.add(a.asname or a.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
            if node.value.id in modules and (node.value.id, node.attr) not in ALLOWED:
                found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_check_finds_what_it_is_for():
    src = ("from harness.search import _x\nimport optuna\nfrom experiments import sweep\n"
           "a = optuna._internal\nb = sweep._helper\nc = self._ok\nfrom harness.text import STOPWORDS\n"
           "from experiments.sweep._study import open_study\nfrom ._study import open_study\n")
    assert private_reaches(src) == ["1: from harness.search import _x", "8: from experiments.sweep._study import ...",
                                    "4: optuna._internal", "5: sweep._helper"]
    assert private_reaches("import os\nos._exit(1)\nos._other()\n") == ["3: os._other"]
    # bench may import a private module by its path, as tests do, but never a private name; product code neither
    bench = ("from experiments.sweep._study import open_study\nfrom experiments.stats._power import _normals\n"
             "from experiments.sweep import _study\nimport optuna\na = optuna._internal\nb = open_study._cache\n")
    assert private_reaches(bench, private_modules=True) == [
        "2: from experiments.stats._power import _normals", "3: from experiments.sweep import _study",
        "5: optuna._internal", "6: open_study._cache"]
    assert private_reaches(bench) == [
        "1: from experiments.sweep._study import ...", "2: from experiments.stats._power import ...",
        "3: from experiments.sweep import _study", "5: optuna._internal"]


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_reaches_into_another_modules_private_names(path: Path):
    bench = path.relative_to(ROOT).parts[0] == "bench"  # bench may import a private module by its path
    assert private_reaches(path.read_text(), private_modules=bench) == []


def test_no_module_is_over_the_size_a_reader_holds():
    sized = [p for d in SIZED for p in (ROOT / d).rglob("*.py")]
    big = {str(p.relative_to(ROOT)): n for p in sized if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert big == {}


def test_the_import_contracts_hold():
    """pyproject.toml's [tool.importlinter] contracts, checked by import-linter's own command."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 4 kept, 0 broken." in done.stdout


def module_imports(sources: dict[str, Path]) -> dict[str, set[str]]:
    """{module: the project modules it imports}, imports inside functions included, annotation-only imports (under
    `if TYPE_CHECKING:`, never run) left out; `from pkg import name` counts pkg.name when that is a module."""
    graph: dict[str, set[str]] = {m: set() for m in sources}
    for mod, path in sources.items():
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in typing_only or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                graph[mod].update(a.name for a in node.names if a.name in sources)
                continue
            base = node.module or ""
            if node.level:
                pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                pkg = pkg[:len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([node.module] if node.module else []))
            for a in node.names:
                target = f"{base}.{a.name}" if f"{base}.{a.name}" in sources else base
                if target in sources and target != mod:
                    graph[mod].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_module_cycle_even_through_imports_inside_functions():
    """Issue 43: no import cycle between modules, imports inside functions included (they only hide a cycle);
    annotation-only imports under TYPE_CHECKING never run and are left out (each says why it is there)."""
    sources = {}
    for top in SIZED:
        for p in (ROOT / top).rglob("*.py"):
            parts = p.relative_to(ROOT).with_suffix("").parts
            sources[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    assert cycles(module_imports(sources)) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check finds one
