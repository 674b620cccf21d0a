"""Rooms stay rooms: no module reaches into another module's private names or another package's private modules,
no module grows past the size a reader can hold, and the import contracts hold (issue 35).

Walks the source of the packages with `ast`: `from pkg.mod import _name`, `from pkg._mod import name` and
`mod._name` on an imported module (not on self/cls or a local object) are refused (inside a package, its modules
import each other relatively). `lint-imports` checks the contracts in pyproject.toml: the layers harness <
evaluators < mutators < experiments, and experiments' and harness's packages along the data flow, with no cycle
between them.
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


def private_reaches(source: str) -> list[str]:
    """Each cross-module use of a private name in source, as 'line: what'."""
    tree = ast.parse(source)
    modules: set[str] = set()  # local names bound to imported modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if any(_private(part) for part in node.module.split(".")):
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


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_reaches_into_another_modules_private_names(path: Path):
    assert private_reaches(path.read_text()) == []


def test_no_module_is_over_the_size_a_reader_holds():
    sized = [p for d in SIZED for p in (ROOT / d).rglob("*.py")]
    big = {str(p.relative_to(ROOT)): n for p in sized if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert big == {}


def test_the_import_contracts_hold():
    """pyproject.toml's [tool.importlinter] contracts, checked by import-linter's own command."""
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in done.stdout
