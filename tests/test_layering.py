"""Package layering: arrows between the two sides point one way (DESIGN.md, "Two sides, one interface").

The experience side (``comprl.experience``) is a service the actor side calls; it imports nothing from the
actor side, and the shared layer (configs, models, objectives, environments) imports neither side.
Reproduce by hand with ``grep -rnE "^\\s*(from|import) comprl\\.(rollout|trainers)" comprl/experience``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "comprl"
ACTOR_SIDE = ("comprl.rollout", "comprl.trainers")
EXPERIENCE_SIDE = ("comprl.experience",)
ABOVE_BOTH = ("comprl.runs", "comprl.widgets", "comprl.cli", "comprl.parallel")
SHARED = ["config.py", "policy.py", "objectives.py", "chat.py", "console.py", "checkpoint.py", "llm", "envs"]


def imported_modules(path: Path) -> set[str]:
    """Every ``comprl`` module a file imports, at any depth in the file (lazy imports in functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name == "comprl" or name.startswith("comprl.")}


def files(*parts: str) -> list[Path]:
    out: list[Path] = []
    for part in parts:
        target = PACKAGE / part
        out += sorted(target.rglob("*.py")) if target.is_dir() else [target]
    return out


def offending(paths: list[Path], forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    bad = {}
    for path in paths:
        hits = sorted(m for m in imported_modules(path) if m.startswith(forbidden))
        if hits:
            bad[str(path.relative_to(PACKAGE.parent))] = hits
    return bad


def test_the_experience_side_imports_nothing_from_the_actor_side() -> None:
    paths = files("experience")
    assert len(paths) >= 6
    assert offending(paths, ACTOR_SIDE + ABOVE_BOTH) == {}


def test_the_shared_layer_imports_neither_side() -> None:
    assert offending(files(*SHARED), ACTOR_SIDE + EXPERIENCE_SIDE + ABOVE_BOTH) == {}


def test_config_imports_no_trainer_module() -> None:
    assert not any(m.startswith(("comprl.trainers", "comprl.experience")) for m in imported_modules(PACKAGE / "config.py"))


@pytest.mark.parametrize("module", ["comprl.experience", "comprl.experience.manager"])
def test_importing_the_experience_side_loads_no_actor_module(module: str) -> None:
    import subprocess
    import sys

    code = (
        f"import sys, {module}; "
        "print(sorted(m for m in sys.modules if m.startswith(('comprl.rollout', 'comprl.trainers'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_the_check_sees_a_violation() -> None:
    """The AST scan finds imports inside functions too (so the tests above could fail)."""
    source = PACKAGE.parent / "tests" / "test_layering.py"
    assert "comprl.experience.manager" not in imported_modules(source)  # a string, not an import
    assert imported_modules(PACKAGE / "trainers" / "loop.py") & {"comprl.rollout", "comprl.experience.track"}
