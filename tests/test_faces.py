"""A package's face (its __init__.py's __all__) exports what product code outside the package calls, nothing more:
tests and bench import the rest from its private module by path.

Checked for the experiments' packages and the top-level evaluators and mutators faces, whose callers are the
experiments. A name product code does not import stays on a face only as a declared seam: a type that code of
one's own implements or returns (SEAMS, each with its reason).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("harness", "experiments", "evaluators", "mutators")

# face -> {name: why it stays though no product module imports it}
SEAMS = {
    "experiments.runs": {
        "TaskOutcome": "what a Runner's finish returns: a runner of one's own builds it",
        "Usage": "a TaskOutcome's token and call counts, built with it",
    },
}


def _faces() -> list[str]:
    found = [p.parent for p in sorted((ROOT / "experiments").glob("*/__init__.py"))]
    found += [ROOT / "evaluators", ROOT / "mutators"]
    return [".".join(p.relative_to(ROOT).parts) for p in found]


def imported_from(face: str, sources: dict[str, str]) -> set[str]:
    """The names product modules outside `face` take from it: `from face import name` at any depth, and `short.name`
    where the module binds the face itself (`from experiments import ab` or `import evaluators`)."""
    names: set[str] = set()
    short = face.rsplit(".", 1)[-1]
    for mod, src in sources.items():
        if mod == face or mod.startswith(face + "."):
            continue
        tree = ast.parse(src)
        binds = False
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == face:
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and f"{node.module}.{short}" == face:
                binds = binds or any(a.name == short and a.asname is None for a in node.names)
            elif isinstance(node, ast.Import):
                binds = binds or any(a.name == face and "." not in face for a in node.names)
        if binds:
            names.update(n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                         and isinstance(n.value, ast.Name) and n.value.id == short)
    return names


def _product_sources() -> dict[str, str]:
    out = {}
    for pkg in PRODUCT:
        for p in (ROOT / pkg).rglob("*.py"):
            if "__pycache__" in p.parts:
                continue
            parts = p.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p.read_text()
    return out


SOURCES = _product_sources()


def test_the_check_sees_both_ways_of_taking_a_name():
    sources = {"experiments.run": "from experiments.ab import run_ab_test\n",
               "experiments.other": "from experiments import ab\nab.check_ab_design()\n",
               "experiments.ab._entry": "from experiments.ab import inner\n"}
    assert imported_from("experiments.ab", sources) == {"run_ab_test", "check_ab_design"}


@pytest.mark.parametrize("face", _faces())
def test_a_face_exports_what_product_code_calls(face: str):
    exported = set(getattr(importlib.import_module(face), "__all__", ()))
    seams = SEAMS.get(face, {})
    assert sorted(exported - imported_from(face, SOURCES) - set(seams)) == []
    assert sorted(set(seams) - exported) == []
