"""``import comprl`` makes OpenMP threads wait passively, unless the user chose how they wait (comprl/threads.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHOICES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def policy_after_import(**env: str) -> str:
    """``OMP_WAIT_POLICY`` in a fresh interpreter after ``import comprl``, started with ``env`` set."""
    clean = {k: v for k, v in os.environ.items() if k not in CHOICES}
    code = "import os, comprl; print(os.environ.get('OMP_WAIT_POLICY', 'unset'))"
    done = subprocess.run([sys.executable, "-c", code], env=clean | env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("env", "policy"),
    [({}, "PASSIVE"), ({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE"), ({"GOMP_SPINCOUNT": "300000"}, "unset")],
)
def test_import_defaults_openmp_to_passive_waits_and_keeps_the_users_choice(env, policy):
    assert policy_after_import(**env) == policy


def test_the_test_suite_runs_with_passive_waits():
    # conftest imports comprl before torch; a GOMP_SPINCOUNT set from outside (libgomp's own spin) is kept
    assert os.environ.get("OMP_WAIT_POLICY") == "PASSIVE" or "GOMP_SPINCOUNT" in os.environ
