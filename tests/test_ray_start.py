"""comprl.ray_start: a local Ray node that is slow to register (a busy machine) is started once more; what every
Ray process imports does not build parsers it never uses."""

from __future__ import annotations

import subprocess
import sys

import pytest

from comprl.ray_start import start_ray

ray = pytest.importorskip("ray")


def test_a_local_start_that_times_out_is_tried_again_and_other_failures_are_raised(monkeypatch):
    calls = []

    def init(address=None, **options):  # noqa: ANN001, ANN202 - ray.init's stand-in
        calls.append(address)
        if len(calls) == 1:
            raise Exception("The current node timed out during startup. This could happen because ...")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    with pytest.warns(UserWarning, match=r"starting it again \(2 of 2\)"):
        start_ray(num_cpus=1)
    assert calls == [None, "shutdown", None]
    calls.clear()
    with pytest.raises(Exception, match="timed out during startup"):  # joining a cluster: not retried
        start_ray("10.0.0.1:6379")
    assert calls == ["10.0.0.1:6379"]
    calls.clear()
    monkeypatch.setattr(ray, "init", lambda **_: (_ for _ in ()).throw(Exception("timed out during startup")))
    with pytest.raises(Exception, match="timed out"), pytest.warns(UserWarning):
        start_ray(attempts=2)  # the second timeout is raised


def test_importing_ray_does_not_build_jsonschema_s_iri_parsers():
    """Each of a local node's Python processes imports ray, hence jsonschema's format checkers: with rfc3987-syntax
    among them (jsonschema 4.24+) that alone took 2.9 s of CPU per process on a slow core (pyproject.toml's cap)."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, ray; print('rfc3987_syntax' in sys.modules)"],
        capture_output=True, text=True, check=True,
    ).stdout.split()[-1]
    assert loaded == "False", "ray's import loaded rfc3987_syntax: is jsonschema >= 4.24 installed?"
