"""Package layering: the paper's figure as import rules, checked on every import in every file (lazy ones too).

- ``comprl.actor`` and ``comprl.experience`` are the two sides. The actor side sees the experience side only
  through ``comprl.experience.interface`` (the episode record, the search tags, the ``ExperienceService``
  protocol); the experience side imports nothing of the actor side.
- The loop (``comprl.loop``, with ``comprl.evaluation``) sits above both and reaches the experience side through
  its package (``comprl.experience``: ``connect``) and its interface.
- The shared layer (configs, models, objectives, environments, run storage, checkpoints) imports neither side.
- The reproduction kit (``comprl.kit``) is imported by nothing in the library: only ``comprl/__init__.py`` names
  its public functions (as strings, imported on first use) and ``comprl/widgets.py`` keeps the widgets' old path.
- No module reaches itself through its imports.

Reproduce one rule by hand with e.g. ``grep -rnE "^\\s*(from|import) comprl\\.kit" comprl --exclude-dir=kit``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "comprl"
ACTOR = ("comprl.actor",)
EXPERIENCE = ("comprl.experience",)
EXPERIENCE_INTERFACE = {"comprl.experience.interface"}
LOOP = ("comprl.loop", "comprl.evaluation")
KIT = ("comprl.kit",)
KIT_PATH_KEPT = "widgets.py"
"""The one library file allowed to import the kit: the widgets' old import path, ``comprl.widgets``."""
SHARED = [
    "config.py", "policy_gradient.py", "objectives.py", "chat.py", "console.py", "checkpoint.py", "runs.py", "llm",
    "envs",
]


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


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p) for p in PACKAGE.rglob("*.py")}


def offending(paths: list[Path], forbidden: tuple[str, ...], allowed: set[str] = frozenset()) -> dict[str, list[str]]:
    """Per file, the modules it imports that start with a ``forbidden`` prefix and are not ``allowed``; a name
    imported from a module (``from comprl.experience import connect``) counts as that module."""
    bad = {}
    for path in paths:
        imported = {m if m in MODULES else m.rpartition(".")[0] for m in imported_modules(path)}
        hits = sorted(m for m in imported if m.startswith(forbidden) and m not in allowed)
        if hits:
            bad[str(path.relative_to(PACKAGE.parent))] = hits
    return bad


def test_the_experience_side_imports_nothing_from_the_actor_side_the_loop_or_the_kit() -> None:
    paths = files("experience")
    assert len(paths) >= 8
    assert offending(paths, ACTOR + LOOP + KIT) == {}


def test_the_actor_side_sees_the_experience_side_only_through_its_interface() -> None:
    paths = files("actor")
    assert len(paths) >= 4
    assert offending(paths, EXPERIENCE + LOOP + KIT, allowed=EXPERIENCE_INTERFACE) == {}
    assert any("comprl.experience.interface" in imported_modules(p) for p in paths)  # the rule is exercised


def test_the_loop_reaches_the_experience_side_through_its_package_and_interface() -> None:
    allowed = EXPERIENCE_INTERFACE | {"comprl.experience"}
    assert offending(files("loop.py"), EXPERIENCE + KIT, allowed=allowed) == {}


def test_the_shared_layer_imports_neither_side_nor_the_loop_nor_the_kit() -> None:
    assert offending(files(*SHARED), ACTOR + EXPERIENCE + LOOP + KIT) == {}


def test_nothing_in_the_library_imports_the_kit() -> None:
    kit = PACKAGE / "kit"
    assert len(files("kit")) >= 9
    library = [p for p in PACKAGE.rglob("*.py") if kit not in p.parents and p != PACKAGE / KIT_PATH_KEPT]
    assert offending(library, KIT) == {}
    kept = imported_modules(PACKAGE / KIT_PATH_KEPT)
    assert kept and all(m == "comprl.kit" or m.startswith("comprl.kit.widgets") for m in kept)


def test_config_imports_no_trainer_module_and_no_torch() -> None:
    assert not any(m.startswith(ACTOR + EXPERIENCE + LOOP) for m in imported_modules(PACKAGE / "config.py"))
    code = "import sys, comprl.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


@pytest.mark.parametrize("module", ["comprl.experience", "comprl.experience.manager"])
def test_importing_the_experience_side_loads_no_actor_module(module: str) -> None:
    code = (
        f"import sys, {module}; "
        "print(sorted(m for m in sys.modules if m.startswith(('comprl.actor', 'comprl.loop', 'comprl.kit'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_the_check_sees_a_violation() -> None:
    """The AST scan finds imports inside functions too, and the rules reject what they should (so the tests above
    could fail)."""
    source = PACKAGE.parent / "tests" / "test_layering.py"
    assert "comprl.experience.manager" not in imported_modules(source)  # a string, not an import
    assert "comprl.actor.rollout" in imported_modules(PACKAGE / "loop.py")
    loop = files("loop.py")
    assert offending(loop, EXPERIENCE) != {}  # the loop does import the experience side...
    assert offending(loop, ACTOR, allowed={"comprl.actor.rollout"}) != {}  # ...and more of the actor than rollout


def modules_and_imports() -> dict[str, set[str]]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        modules[name] = {m for m in imported_modules(path) if m != name}
    return modules


def circles(modules: dict[str, set[str]]) -> list[str]:
    """The modules that reach themselves through their imports (a package's ``__init__`` naming its own
    submodules, e.g. ``comprl`` itself, is not a circle)."""

    def reaches(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for target in modules.get(todo.pop(), ()):
                # an import of a.b.c also runs a and a.b; only real modules count
                if target in modules and target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    return sorted(name for name in modules if name in reaches(name) and name != "comprl")


def test_no_module_of_the_package_imports_itself_in_a_circle() -> None:
    assert circles(modules_and_imports()) == []
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c"]  # the check finds one
