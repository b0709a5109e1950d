"""The repository passes ruff (pyflakes and pycodestyle's errors, lines of at most 120 characters), as
``pyproject.toml`` configures it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_line_length_rule_is_on_at_120_characters() -> None:
    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    assert ruff["line-length"] == 120
    assert "E501" not in ruff["lint"].get("ignore", []) and "E" in ruff["lint"]["select"]


def test_the_code_passes_ruff() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--quiet", "--output-format", "concise", str(ROOT)],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
