"""Checkpoints that cannot be silently wrong: a damaged or altered checkpoint is refused, naming the file, and a
save that runs out of disk space leaves the previous checkpoint to resume from.

Every checkpoint here is a real one, written by a smoke run of the tiny models (the runs of ``test_resume``).
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import subprocess

import pytest
import torch

from test_resume import run_experiment, smoke

from comprl import checkpoint
from comprl.config import make_config
from comprl.experience.manager import ExperienceManager, queue_path
from comprl.runs import Run


class Crash(Exception):
    """Stops a run after a step's row is logged and before that step's checkpoint (a crash at that moment)."""


def crash_at(step: int):
    def callback(at: int, metrics: dict, phase: str) -> None:
        if phase == "train" and at == step:
            raise Crash(step)

    return callback


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A run stopped after step 1's checkpoint, to be resumed."""
    root = tmp_path_factory.mktemp("stopped")
    with pytest.raises(Crash):
        run_experiment(smoke(eval_episodes=0), root, name="run", progress=False, callback=crash_at(2))
    return root / "run"


@pytest.fixture()
def run_copy(stopped, tmp_path):
    """A copy of the stopped run, to damage."""
    shutil.copytree(stopped, tmp_path / "run")
    return tmp_path / "run"


def resume(run_path):
    return run_experiment(smoke(eval_episodes=0), run_path.parent, name=run_path.name, progress=False, resume=True)


def flip(path, count: int) -> None:
    """Overwrite ``count`` bytes in the middle of the file with different random ones."""
    data = bytearray(path.read_bytes())
    start = len(data) // 2
    for i in range(start, start + count):
        data[i] ^= random.Random(i).randrange(1, 256)
    path.write_bytes(bytes(data))


class Marker:
    """A pickled object that, unpickled by a loader that runs code, creates the file ``path``."""

    def __init__(self, path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_a_checkpoint_is_committed_with_a_manifest_of_every_file(run_copy):
    manifest = json.loads((run_copy / "checkpoint" / checkpoint.MANIFEST).read_text())
    files = {"state.pt", "step", "experience/manager.pt", "experience/bank.duckdb", "experience/queue.jsonl"}
    assert manifest["step"] == 1 and set(manifest["files"]) == files
    state = run_copy / "checkpoint" / "state.pt"
    assert manifest["files"]["state.pt"]["size"] == state.stat().st_size
    last = checkpoint.latest(run_copy)
    assert last.step == 1 and last.state()["step"] == 1  # state.pt loads weights-only


@pytest.mark.parametrize(
    ("name", "damage", "problem"),
    [
        pytest.param(
            "experience/manager.pt", lambda p: flip(p, 64), "differs from the manifest's sha256", id="manager"
        ),
        pytest.param("state.pt", lambda p: flip(p, 16), "differs from the manifest's sha256", id="state-16"),
        pytest.param("state.pt", lambda p: flip(p, 4096), "differs from the manifest's sha256", id="state-4096"),
        pytest.param("step", lambda p: p.write_text("2"), "differs from the manifest's sha256", id="step"),
        pytest.param(
            "experience/queue.jsonl",
            lambda p: p.write_text('{"task": "x"}\n'),
            "has 14 bytes, the manifest says 0",
            id="queue",
        ),
        pytest.param("experience/manager.pt", lambda p: p.unlink(), "is missing", id="missing-file"),
        pytest.param(checkpoint.MANIFEST, lambda p: p.unlink(), "is missing", id="missing-manifest"),
        pytest.param("experience/extra.pt", lambda p: p.write_bytes(b"0"), "is not in the manifest", id="extra-file"),
    ],
)
def test_a_damaged_checkpoint_is_refused_naming_the_file(run_copy, name, damage, problem):
    damage(run_copy / "checkpoint" / name)
    with pytest.raises(checkpoint.CheckpointError, match=f"{name} {problem}.*delete the checkpoint folder"):
        resume(run_copy)
    assert (run_copy / "checkpoint").is_dir() and not Run(run_copy).finished  # nothing resumed, nothing removed


def test_a_step_file_and_manifest_that_disagree_with_state_pt_are_refused(run_copy):
    folder = run_copy / "checkpoint"
    (folder / "step").write_text("2")
    checkpoint._write_manifest(folder, 2)  # a manifest rewritten to match: state.pt still holds step 1
    with pytest.raises(checkpoint.CheckpointError, match="state.pt is of step 1, its step file and manifest say 2"):
        checkpoint.latest(run_copy).state()


def test_a_pickle_that_would_run_code_in_state_pt_is_refused_without_running_it(run_copy, tmp_path):
    folder, marker = run_copy / "checkpoint", tmp_path / "ran"
    state = checkpoint.latest(run_copy).state()
    torch.save({**state, "payload": Marker(marker)}, folder / "state.pt")
    checkpoint._write_manifest(folder, 1)
    with pytest.raises(checkpoint.CheckpointError, match="state.pt holds more than tensors and plain data"):
        checkpoint.latest(run_copy).state()
    assert not marker.exists()


def test_a_pickle_that_would_run_code_in_manager_pt_is_refused_without_running_it(run_copy, tmp_path):
    folder, marker = run_copy / "checkpoint", tmp_path / "ran"
    torch.save({"trainer": Marker(marker)}, folder / "experience" / "manager.pt")
    checkpoint._write_manifest(folder, 1)
    with pytest.raises(checkpoint.CheckpointError, match="manager.pt holds more than tensors and plain data"):
        resume(run_copy)
    assert not marker.exists()


def test_a_bad_queue_file_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "bank.duckdb"
    good = {"task": "t", "seed": 0, "step": 1, "index": 0, "instruction": "go", "messages": [], "success": False,
            "guided": False, "experience_ids": []}
    bad = {key: value for key, value in good.items() if key != "messages"}
    queue_path(path).write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=r"queue file .*bank.duckdb.queue.jsonl, line 2: lacks messages; accepted"):
        ExperienceManager(make_config("smoke", method="comp_rl"), path)
    assert queue_path(path).is_file()  # kept for the user to mend


def disk_full_at_step_2(tmp_path, fill) -> Run:
    """A two-step run whose step-2 checkpoint runs out of space (``fill()``, called once step 2's row is logged,
    leaves too little): it stops naming the file, and step 1's checkpoint is there, whole, to resume from."""
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    restore = []

    def callback(at: int, metrics: dict, phase: str) -> None:
        if phase == "train" and at == 2:
            restore.append(fill(root))

    try:
        with pytest.raises(OSError, match=r"no space left on device while writing checkpoint .*checkpoint\.tmp/"):
            run_experiment(smoke(eval_episodes=0), root, name="run", progress=False, callback=callback)
    finally:
        for undo in restore:
            undo()
    run = Run(root / "run")
    assert not (run.path / "checkpoint.tmp").exists() and not run.finished
    assert checkpoint.latest(run.path).state()["step"] == 1
    return run


def test_a_save_cut_short_by_a_file_size_limit_keeps_the_previous_checkpoint(tmp_path):
    # state.pt stops at 20 MB, short of its size: torch's writer reports "unexpected pos", a short write
    def fill(root):
        previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        limits = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20 << 20, limits[1]))

        def undo():
            resource.setrlimit(resource.RLIMIT_FSIZE, limits)
            signal.signal(signal.SIGXFSZ, previous)

        return undo

    run = disk_full_at_step_2(tmp_path, fill)
    assert resume(run.path).finished


def test_a_full_disk_during_a_save_keeps_the_previous_checkpoint(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=512m", "tmpfs", str(root)]
    if os.geteuid() != 0 or not shutil.which("mount") or subprocess.run(mount, capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root")
    try:
        def fill(root):  # the disk is full 8 MB from now, far less than step 2's checkpoint needs
            used = int(subprocess.run(["du", "-sb", str(root)], capture_output=True, text=True).stdout.split()[0])
            subprocess.run(["mount", "-o", f"remount,size={used + (8 << 20)}", str(root)], check=True)
            return lambda: subprocess.run(["mount", "-o", "remount,size=512m", str(root)], check=True)

        disk_full_at_step_2(tmp_path, fill)
    finally:
        subprocess.run(["umount", "-l", str(root)])


@pytest.mark.parametrize("name", ["state.pt", "experience", "checkpoint", "checkpoint.old"])
def test_a_checkpoint_file_or_folder_that_is_a_link_out_of_the_run_is_refused(run_copy, tmp_path, name):
    """A state.pt or checkpoint/ that was a link out of the run folder (its manifest matching what the link names)
    was loaded from there."""
    place = run_copy / name if name.startswith("checkpoint") else run_copy / "checkpoint" / name
    if name == "checkpoint.old":  # as a kill between the renames leaves it, with no checkpoint/ beside it
        (run_copy / "checkpoint").rename(place)
    outside = tmp_path / "elsewhere" / name
    outside.parent.mkdir()
    place.rename(outside)
    place.symlink_to(outside, target_is_directory=outside.is_dir())
    with pytest.raises(checkpoint.CheckpointError, match=f"{name}.* (is )?a link"):
        checkpoint.latest(run_copy)
    assert outside.exists()  # refused, not removed
