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


def autogroup_nice_after(code: str, nice: int, own_session: bool) -> str:
    """The nice value of the autogroup of a fresh interpreter started with ``nice``, in a new session (as papermill
    starts a kernel) or in this one, after running ``code``; ``root`` for a process in the root group (a session older
    than autogroups, as CI's may be), whose ``/proc/self/autogroup`` reads empty."""
    read = "words = open('/proc/self/autogroup').read().split(); print(words[-1] if words else 'root')"
    done = subprocess.run(
        ["nice", "-n", str(nice), sys.executable, "-c", code + read],
        capture_output=True,
        text=True,
        check=True,
        start_new_session=own_session,
    )
    return done.stdout.strip()


def autogroup_writable() -> bool:
    if not os.path.exists("/proc/self/autogroup"):
        return False
    try:
        return autogroup_nice_after("open('/proc/self/autogroup', 'w').write('19'); ", 0, own_session=True) == "19"
    except subprocess.CalledProcessError:
        return False


@pytest.mark.skipif(not autogroup_writable(), reason="no scheduler autogroup here, or its nice value is read-only")
def test_a_niced_process_that_leads_its_session_gives_the_session_its_nice_value():
    here = os.nice(0)  # `nice -n 7` adds to the nice value the suite runs at (CI beside a neighbour may run niced)
    assert autogroup_nice_after("import comprl; ", 7, own_session=True) == str(min(here + 7, 19))
    # not niced further: the session gets the suite's own nice value; a niced process in a session it does not
    # lead leaves it alone
    assert autogroup_nice_after("import comprl; ", 0, own_session=True) == str(here)
    mine = autogroup_nice_after("", 0, own_session=False)
    assert autogroup_nice_after("import comprl; ", 7, own_session=False) == mine
