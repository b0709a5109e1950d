"""comprl.ray_start: a local start is a node of the process's own, private on a shared machine; one slow to register
(a busy machine) is started once more; what every Ray process imports does not build parsers it never uses."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from conftest import LOOPBACK_ONLY, ray_head_node
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
    assert calls == ["local", "shutdown", "local"]
    calls.clear()
    with pytest.raises(Exception, match="timed out during startup"):  # joining a cluster: not retried
        start_ray("10.0.0.1:6379")
    assert calls == ["10.0.0.1:6379"]
    calls.clear()
    monkeypatch.setattr(ray, "init", lambda **_: (_ for _ in ()).throw(Exception("timed out during startup")))
    with pytest.raises(Exception, match="timed out"), pytest.warns(UserWarning):
        start_ray(attempts=2)  # the second timeout is raised


@pytest.fixture(scope="module")
def beside_another_node() -> tuple[str, str, bool]:
    """A local start with another user's Ray node on the machine, reachable, without a token, and named where
    ``ray.init()`` looks for one: ``RAY_ADDRESS``, and the ``ray_current_cluster`` file of Ray's default temp dir
    (``RAY_TMPDIR``). Returns the other node's GCS address, the GCS address of the cluster the start connected the
    process to, and whether the other node still accepted connections once the start's node was shut down."""
    from ray._private import ray_constants

    ray.shutdown()  # a Ray another test started in this process
    with ray_head_node() as foreign, pytest.MonkeyPatch.context() as patch:
        assert (foreign.temp_dir / "ray_current_cluster").read_text().strip() == foreign.address
        patch.setenv("RAY_ADDRESS", foreign.address)
        patch.setenv("RAY_TMPDIR", str(foreign.temp_dir.parent))
        patch.setenv(LOOPBACK_ONLY, "0")  # the process reaches the other node, on loopback here
        patch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
        start_ray(include_dashboard=False, logging_level="ERROR")
        try:
            joined = ray.get_runtime_context().gcs_address
        finally:
            ray.shutdown()
        try:
            socket.create_connection(foreign.address.split(":"), timeout=10).close()
            serves = True
        except OSError:
            serves = False
    return foreign.address, joined, serves


def test_a_local_start_joins_no_cluster_ray_would_find(beside_another_node):
    foreign, joined, _ = beside_another_node
    assert joined != foreign, "it joined the other user's node"


def test_shutting_a_local_node_down_leaves_another_node_running(beside_another_node):
    assert beside_another_node[2]


def test_importing_ray_does_not_build_jsonschema_s_iri_parsers():
    """Each of a local node's Python processes imports ray, hence jsonschema's format checkers: with rfc3987-syntax
    among them (jsonschema 4.24+) that alone took 2.9 s of CPU per process on a slow core (pyproject.toml's cap)."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, ray; print('rfc3987_syntax' in sys.modules)"],
        capture_output=True, text=True, check=True,
    ).stdout.split()[-1]
    assert loaded == "False", "ray's import loaded rfc3987_syntax: is jsonschema >= 4.24 installed?"
