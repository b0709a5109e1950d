"""The experience manager as a Ray actor in its own process (``experience.mode="async"``), Ray started locally:
a node of the process's own (comprl.ray_start), which listens on loopback alone and lets in only its token's holders.
"""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import torch

from conftest import LOOPBACK_ONLY
from comprl import make_config, run_experiment
from comprl.experience.bank import ExperienceBank
from comprl.experience.interface import Episode, Outcome
from comprl.experience.manager import ExperienceManager
from comprl.experience.ray_host import RayExperienceManager, connect
from comprl.ray_start import start_ray

ray = pytest.importorskip("ray")

ROOM = "comprl/Room-Ultimate-5x5-v0"


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    start_ray(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield
    ray.shutdown()


def test_the_local_node_listens_on_loopback_alone():
    """Every server of the node (GCS, raylet, agents, workers, the driver's own) on loopback: by default Ray's
    servers listen on every interface of a Linux machine."""
    driver = psutil.Process()  # the node's processes are its children
    listening = [c.laddr for p in (driver, *driver.children(recursive=True)) for c in _listening(p)]
    assert listening and [a for a in listening if not _loopback(a.ip)] == []


def test_the_local_node_lets_in_no_process_without_its_own_token():
    """Another process of the user's reaching the node where it listens, with Ray's default token if there is one
    (``~/.ray/auth_token``, which Ray writes readable by all and which a plain ``ray.init()`` node requires): it is
    refused for want of the node's token."""
    address = ray.get_runtime_context().gcs_address
    intruder = subprocess.run(
        [sys.executable, "-c", f"import ray; ray.init(address={address!r}, logging_level='ERROR')"],
        env={
            **os.environ, "RAY_AUTH_MODE": "token", "RAY_NUM_REDIS_GET_RETRIES": "1",  # one try, not 20
            LOOPBACK_ONLY: "0" if _loopback(address.rsplit(":", 1)[0]) else "1",
        },
        capture_output=True, text=True, timeout=120,
    )
    assert intruder.returncode != 0, "another process joined the run's cluster"
    assert re.search("authentication token", intruder.stderr, re.I), intruder.stderr[-2000:]


def test_the_local_node_keeps_its_files_where_only_its_user_enters():
    """Its sockets, logs and session files lie in a folder closed to other users: Ray makes its own temp dir,
    ``/tmp/ray`` by default, and each session's folder in it writable by all."""
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    assert any(p.stat().st_uid == os.getuid() and p.stat().st_mode & 0o077 == 0 for p in session.parents), session


def _listening(process: psutil.Process) -> list:
    """The TCP sockets ``process`` listens on."""
    try:
        return [c for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
    except psutil.NoSuchProcess:  # a worker that ended meanwhile
        return []


def _loopback(ip: str) -> bool:
    """Whether ``ip`` is a loopback address (``::ffff:127.0.0.1`` too: IPv4 loopback on a dual-stack socket)."""
    address = ipaddress.ip_address(ip)
    return (getattr(address, "ipv4_mapped", None) or address).is_loopback


def seeded_inputs(step: int) -> list[Episode]:
    return [
        Episode(
            ROOM, 10 * step + i, step, i, "Reach the stairs down.",
            (
                {"role": "system", "content": "Reach the stairs down, shown as >."},
                {"role": "user", "content": f"The stairs are {i + step} squares to the east."},
                {"role": "assistant", "content": "<answer>east</answer>"},
            ),
            success=i % 2 == 0,
        )
        for i in range(3)
    ]


def drive(manager, steps: int = 4) -> None:
    """The actor side's calls for ``steps`` steps, crediting the entries of the previous step."""
    shown: list[int] = []
    for step in range(1, steps + 1):
        manager.credit([Outcome(e, k % 2 == 0) for k, e in enumerate(shown)], step)
        manager.submit(seeded_inputs(step))
        found = manager.search(["reach the stairs", "find the way down"], [ROOM] * 2, seeds=[1, 2])
        shown = [e.id for e in found if e is not None]
        manager.fence()
        manager.step_done(step)


def snapshot(path) -> tuple[list, list]:
    with ExperienceBank(path, _embedder()) as bank:
        entries = bank.entries()[["id", "task", "title", "content", "uses", "successes", "parents"]]
        ops = bank.operations()
        writes = ops.loc[ops["op"] != "use", ["op", "targets", "entry_id", "title", "content", "raw", "result"]]
        return entries.values.tolist(), writes.values.tolist()


_EMBEDDER = []


def _embedder():
    from comprl.experience.bank import Embedder

    if not _EMBEDDER:
        _EMBEDDER.append(Embedder())
    return _EMBEDDER[0]


def test_the_ray_manager_and_the_in_process_manager_write_identical_banks(tmp_path):
    config = make_config(
        "smoke", method="comp_rl",
        **{
            "extractor.temperature": 1.0, "extractor.merge_every": 2, "extractor.buffer_size": 2,
            "experience.mode": "async", "experience.fence": "flush", "experience.warmup": 0,
            "bank.dropout": 0.0,
        },
    )
    remote = connect(config, tmp_path / "ray.duckdb")
    assert isinstance(remote, RayExperienceManager)
    drive(remote)
    assert remote.flush(timeout=120)
    remote_stats = remote.stats()

    @ray.remote
    def elsewhere(client: RayExperienceManager) -> tuple[list, dict[str, float]]:
        client.search_and_ask("where are the stairs?", ROOM)
        return client.search(["reach the stairs"], [ROOM], record=False), client.stats()

    # the client travels to other Ray processes as its actor's handle (rollout workers ask search_and_ask so)
    found, asked = ray.get(elsewhere.remote(remote))
    assert found[0] is not None and asked["manager_asks"] == 1 and asked["manager_search_queries"] == 2
    report = remote.close()
    assert report["error"] is None and report["drained"] == 0

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the Ray worker (one CPU, OMP_NUM_THREADS=1), so the arithmetic is the same
    try:
        local = ExperienceManager(config, tmp_path / "local.duckdb")
        drive(local)
        local_stats = local.stats()
        local.close()
    finally:
        torch.set_num_threads(threads)

    remote_entries, remote_ops = snapshot(tmp_path / "ray.duckdb")
    local_entries, local_ops = snapshot(tmp_path / "local.duckdb")
    assert len(local_ops) >= 12 and local_entries, "the run wrote and merged entries"
    assert remote_ops == local_ops
    assert remote_entries == local_entries
    for key in ("manager_distilled", "manager_merges", "extractor_outputs", "extractor_valid"):
        assert remote_stats.get(key) == local_stats.get(key), key


def test_a_smoke_run_with_the_async_manager(tmp_path):
    config = make_config(
        "smoke", method="comp_rl", steps=2, **{"experience.mode": "async", "experience.fence": "flush"}
    )
    run = run_experiment(config, output_dir=tmp_path, name="async", progress=False)
    train = run.metrics().query("phase == 'train'")
    assert len(train) == 2
    assert {"manager_search_queries", "manager_queue", "experience_seconds", "bank_size"} <= set(train.columns)
    assert train["manager_submitted"].sum() == 2 * config.batch_instances * config.group_size
    assert os.path.exists(run.bank_path)
    evals = run.metrics().query("phase == 'eval'")
    assert "guided_success_rate" in evals.columns
