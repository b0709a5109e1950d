"""A script that calls ``run_experiment`` without configuring logging sees the run's per-step lines; one that
routes the ``comprl`` logger itself keeps them where it sent them."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import logging, sys
import comprl
if sys.argv[1] == "configured":
    logging.getLogger("comprl").addHandler(logging.FileHandler(sys.argv[3]))
    logging.getLogger("comprl").setLevel(logging.INFO)
config = comprl.make_config("smoke", steps=1, eval_episodes=1)
comprl.run_experiment(config, output_dir=sys.argv[2], name="run")
"""


def _run(tmp_path, mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, str(tmp_path), str(tmp_path / "log.txt")],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_script_sees_the_per_step_log_by_default(tmp_path):
    shown = _run(tmp_path, "default")
    assert "run: step 1/1: success" in shown, shown[-2000:]


def test_a_configured_comprl_logger_keeps_the_lines(tmp_path):
    shown = _run(tmp_path, "configured")
    assert "step 1/1" not in shown
    assert "run: step 1/1: success" in (tmp_path / "log.txt").read_text()
