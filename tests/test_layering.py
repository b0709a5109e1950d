"""Package layering: arrows between the two sides point one way (DESIGN.md, "Two sides, one interface").

The experience side (``comprl.experience``) is a service the actor side calls; it imports nothing from the
actor side, and the shared layer (configs, models, objectives, environments) imports neither side.
The actor side (``comprl.actor``) and the experience loop (``comprl.loop``) sit above both. Reproduce by hand with
``grep -rnE "^\\s*(from|import) comprl\\.(actor|loop)" comprl/experience``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "comprl"
ACTOR_SIDE = ("comprl.actor", "comprl.loop")
EXPERIENCE_SIDE = ("comprl.experience",)
ABOVE_BOTH = ("comprl.runs", "comprl.widgets", "comprl.cli", "comprl.parallel")
SHARED = ["config.py", "policy_gradient.py", "objectives.py", "chat.py", "console.py", "checkpoint.py", "llm", "envs"]


def imported_modules(path: Path) -> set[str]:
    """Every ``comprl`` module a file imports, at any depth in the file (lazy imports in functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)  # and each imported name, which may be a module (``from comprl import cli``)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
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
    assert not any(m.startswith(ACTOR_SIDE + EXPERIENCE_SIDE) for m in imported_modules(PACKAGE / "config.py"))


@pytest.mark.parametrize("module", ["comprl.experience", "comprl.experience.manager"])
def test_importing_the_experience_side_loads_no_actor_module(module: str) -> None:
    import subprocess
    import sys

    code = (
        f"import sys, {module}; "
        "print(sorted(m for m in sys.modules if m.startswith(('comprl.actor', 'comprl.loop'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_the_check_sees_a_violation() -> None:
    """The AST scan finds imports inside functions too (so the tests above could fail)."""
    source = PACKAGE.parent / "tests" / "test_layering.py"
    assert "comprl.experience.manager" not in imported_modules(source)  # a string, not an import
    assert imported_modules(PACKAGE / "loop.py") & {"comprl.actor.rollout", "comprl.experience.extractor.track"}


def test_no_module_of_the_package_imports_itself_in_a_circle() -> None:
    """Following every import (lazy ones too), no module of ``comprl`` reaches itself again."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = {m for m in imported_modules(path) if m != name}

    def reaches(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for target in modules.get(todo.pop(), ()):
                # an import of a.b.c also runs a and a.b; only real modules count
                if target in modules and target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    circles = sorted(name for name in modules if name in reaches(name) and not name.endswith("comprl"))
    assert circles == []
