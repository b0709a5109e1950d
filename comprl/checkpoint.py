"""Checkpoints of a run folder, from which a killed run continues exactly where it was.

A checkpoint is the folder ``<run>/checkpoint/``, written after a training step's metrics row:

- ``step``: the last training step it covers, as text;
- ``state.pt``: the step, the random states (python, numpy, torch) and the actor trainer's state (its trainable
  weights in fp32 and AdamW's moments; :meth:`comprl.policy_gradient.PolicyGradientTrainer.state_dict`);
- ``experience/``: the experience side's (:meth:`comprl.experience.manager.ExperienceManager.save_checkpoint`: a
  snapshot of the bank, the queue of episodes, the extractor and its samples);
- ``manifest.json``: the step and every other file's size and sha256, written last.

A :class:`Writer` takes the state at the step boundary, in memory, and writes it while training goes on (the
experience side likewise in a thread of the manager's). It is written whole into ``checkpoint.tmp/`` and then
renamed, so a kill at any moment leaves one complete checkpoint: the previous one, or the new one (a kill between
the two renames leaves it as ``checkpoint.old/``). A write that runs out of disk space removes ``checkpoint.tmp/``,
leaving the previous checkpoint as it was, and the next save (or wait) raises :class:`OutOfSpace`.

:func:`latest` checks every file against the manifest and :class:`Checkpoint` loads tensors and plain data only
(``torch.load(weights_only=True)``), so a damaged or altered checkpoint is refused with a
:class:`CheckpointError` naming the file, instead of resuming from a wrong state or running code it holds.
"""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import pickle
import random
import shutil
import stat
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

FOLDER = "checkpoint"
ACTOR_ADAPTERS = "actor_adapters.safetensors"
"""A finished LoRA run's trained actor adapters, in float16 (:func:`export_adapters`)."""
MANIFEST = "manifest.json"
_RECOVER = "delete the checkpoint folder to start the run over from step 1 (or run without resume)"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be resumed from: a file differs from the manifest, or holds more than tensors and
    plain data."""


class OutOfSpace(OSError):
    """A checkpoint file could not be written for lack of disk space (errno ENOSPC)."""


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint in a run folder."""

    path: Path
    step: int
    """The last training step it covers."""

    @property
    def experience(self) -> Path:
        """The experience side's folder."""
        return self.path / "experience"

    def state(self) -> dict[str, Any]:
        """``state.pt``: the step, the random states and the actor trainer's state."""
        state = load_torch(self.path / "state.pt")
        if not isinstance(state, dict) or state.get("step") != self.step:
            found = state.get("step") if isinstance(state, dict) else type(state).__name__
            raise CheckpointError(
                f"checkpoint {self.path}: state.pt is of step {found!r}, its step file and manifest say {self.step};"
                f" {_RECOVER}"
            )
        return state


def load_torch(path: Path, classes: Sequence[type] = ()) -> Any:
    """A checkpoint's torch file, loaded weights-only: tensors and plain data, and instances of ``classes`` (rebuilt
    from their fields; no code of theirs runs). Anything else is refused with a CheckpointError naming the file."""
    try:
        with torch.serialization.safe_globals(list(classes)):
            return torch.load(path, weights_only=True)
    except pickle.UnpicklingError as error:
        paragraphs = str(error).split("\n\n")
        reason = next((p.strip() for p in paragraphs if "GLOBAL" in p), "refused by the weights-only loader")
        raise CheckpointError(
            f"{path} holds more than tensors and plain data ({reason}); it is not loaded, since loading it could run"
            f" code; {_RECOVER}"
        ) from error
    except (RuntimeError, EOFError, OSError) as error:
        raise CheckpointError(f"{path} cannot be read ({error}); {_RECOVER}") from error


def rng_state() -> dict[str, Any]:
    """The states of the random generators the loop draws from (python, numpy's global one, torch's CPU one), as
    tensors and plain data (numpy's key as a list of ints), which a weights-only load reads back."""
    name, key, position, has_gauss, gauss = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": (name, key.tolist(), position, has_gauss, gauss),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, key, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.asarray(key, dtype=np.uint32), position, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class BackgroundWrite:
    """One write at a time in a thread of its own: :meth:`wait` joins it and raises what stopped it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, write: Callable[[], None]) -> None:
        """Run ``write`` in the thread, after the write in progress (whose error is raised here)."""
        self.wait()

        def run() -> None:
            try:
                write()
            except BaseException as error:  # for the waiter
                self._error = error

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Wait for the write in progress; raise the error that stopped the last write, once."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error


class Writer:
    """Writes a run's checkpoints while training goes on: :meth:`save` takes the state at the step boundary, in
    memory, and returns; a thread writes it, syncs it and commits it with its manifest. The next :meth:`save` and
    :meth:`wait` wait for the write in progress, so at most one checkpoint is being written, and until its manifest
    is committed and its folder renamed, the previous checkpoint is the run's: a kill at any moment of the write
    leaves that one to resume from. While written, the state is held twice in memory (the live one and a CPU copy).
    """

    def __init__(self, run_path: Path) -> None:
        self.run_path = run_path
        self._write = BackgroundWrite("comprl-checkpoint")
        self._written: Checkpoint | None = None

    def save(self, step: int, actor: Any | None, manager: Any | None) -> None:
        """Start the checkpoint of ``step`` (``actor``: the actor trainer or None when the method freezes it;
        ``manager``: the experience service or None): the random states and a CPU copy of the actor trainer's state
        are taken now, the experience side's state by its ``save_checkpoint`` (which writes it in a thread of its
        own; ``wait_checkpoint`` waits for it). Raises what stopped the previous write (:meth:`wait`)."""
        self._write.wait()
        _, temporary, _ = _paths(self.run_path)
        remove(temporary)
        temporary.mkdir(parents=True)
        try:
            state = copied({"step": step, "rng": rng_state(), "actor": None if actor is None else actor.state_dict()})
            if manager is not None:
                with writing(temporary / "experience"):
                    manager.save_checkpoint(temporary / "experience")
        except BaseException:
            remove(temporary)
            raise
        self._write.start(lambda: self._commit(step, state, manager))

    def wait(self) -> Checkpoint | None:
        """The last checkpoint written, once the write in progress is done (None before the first). A write that
        failed removed ``checkpoint.tmp/`` and left the previous checkpoint as it was; its error is raised here
        (lack of disk space as :class:`OutOfSpace`, naming the file), once."""
        self._write.wait()
        return self._written

    def _commit(self, step: int, state: dict[str, Any], manager: Any | None) -> None:
        final, temporary, previous = _paths(self.run_path)
        try:
            try:
                with writing(temporary / "state.pt"):
                    torch.save(state, temporary / "state.pt")
                with writing(temporary / "step"):
                    (temporary / "step").write_text(str(step))
            finally:  # the experience side's files are complete, or their write stopped, before the folder goes
                if manager is not None:
                    with writing(temporary / "experience"):
                        manager.wait_checkpoint()
            with writing(temporary / MANIFEST):
                _write_manifest(temporary, step)
        except BaseException:  # raised to the training loop by the next save() or wait()
            remove(temporary)
            raise
        if final.exists():
            remove(previous)
            final.rename(previous)
        temporary.rename(final)
        remove(previous)
        self._written = Checkpoint(final, step)


def save(run_path: Path, step: int, actor: Any | None, manager: Any | None) -> Checkpoint:
    """Write the checkpoint of ``step`` and return once it is committed (:meth:`Writer.save`, then its wait)."""
    writer = Writer(run_path)
    writer.save(step, actor, manager)
    return writer.wait()


def copied(state: Any) -> Any:
    """A copy of ``state`` that training after this call cannot change: every tensor in its dicts, lists and tuples
    copied into CPU memory, and the rest deep-copied (an object it holds twice stays one object)."""
    memo: dict[int, Any] = {}

    def copy_tensors(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            memo.setdefault(id(value), value.detach().to("cpu", copy=True))
        elif isinstance(value, dict):
            for item in value.values():
                copy_tensors(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                copy_tensors(item)

    copy_tensors(state)
    return copy.deepcopy(state, memo)


def latest(run_path: Path) -> Checkpoint | None:
    """The run's checkpoint, None before its first; an unfinished ``checkpoint.tmp/`` is removed. A checkpoint
    whose files do not all match its manifest is refused (:func:`verify`)."""
    final, temporary, previous = _paths(run_path)
    remove(temporary)
    for path in (final, previous):
        if path.is_symlink():
            raise CheckpointError(
                f"checkpoint {path} is a link (to {path.resolve()}), not a folder of the run's: a run resumes only "
                f"from the checkpoint it wrote itself; {_RECOVER}"
            )
    if not final.exists() and previous.exists():  # killed between the renames
        previous.rename(final)
    if not final.exists():
        return None
    return Checkpoint(final, verify(final))


def verify(folder: Path) -> int:
    """The step the checkpoint ``folder`` covers, after checking that its files are exactly those of its manifest,
    each of the recorded size and sha256, and that its ``step`` file says the manifest's step; a CheckpointError
    names the first file that disagrees."""
    def refuse(name: str, problem: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {folder} cannot be resumed from: {name} {problem}; {_RECOVER}")

    present = set(_files(folder))
    for name in [MANIFEST, *sorted(present)]:
        if os.path.lexists(folder / name) and not stat.S_ISREG(os.lstat(folder / name).st_mode):
            raise refuse(name, "is a link or a special file, not a file of the checkpoint's own")
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        step, files = manifest["step"], manifest["files"]
        expected = {name: (int(entry["size"]), str(entry["sha256"])) for name, entry in files.items()}
    except FileNotFoundError:
        raise refuse(MANIFEST, "is missing (every checkpoint is written with one, after its other files)") from None
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise refuse(MANIFEST, f"is unreadable ({error!r})") from error
    if type(step) is not int:
        raise refuse(MANIFEST, f"gives the step {step!r}, not an int")
    if extra := sorted(present - set(expected)):
        raise refuse(extra[0], "is not in the manifest (remove it if you put it there)")
    for name, (size, digest) in sorted(expected.items()):
        if name not in present:
            raise refuse(name, "is missing")
        found_size, found_digest = _fingerprint(folder / name)
        if found_size != size:
            raise refuse(name, f"has {found_size} bytes, the manifest says {size}")
        if found_digest != digest:
            raise refuse(name, "differs from the manifest's sha256 (its bytes changed after it was written)")
    said = (folder / "step").read_text() if (folder / "step").is_file() else None
    if said is None or said.strip() != str(step):
        raise refuse("step", f"says {said!r}, the manifest says {step}")
    return step


def _files(folder: Path) -> list[str]:
    """The checkpoint's files but the manifest, by path relative to ``folder``: every entry but its folders, links
    (to files or folders, which are not entered) and special files included, for :func:`verify` to refuse."""
    names = (p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_symlink() or not p.is_dir())
    return sorted(name for name in names if name != MANIFEST)


def _fingerprint(path: Path, sync: bool = False) -> tuple[int, str]:
    """Size and sha256 of a file; with ``sync``, its bytes are flushed to the disk first."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as file:
        if sync:
            os.fsync(file.fileno())
        while chunk := file.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _write_manifest(folder: Path, step: int) -> None:
    """Commit the checkpoint in ``folder``: its manifest, written to a temporary name, synced and renamed, after
    every file it lists is on the disk."""
    files = {name: dict(zip(("size", "sha256"), _fingerprint(folder / name, sync=True))) for name in _files(folder)}
    temporary = folder / f"{MANIFEST}.tmp"
    with open(temporary, "w") as file:
        json.dump({"step": step, "files": files}, file, indent=1)
        file.flush()
        os.fsync(file.fileno())
    temporary.rename(folder / MANIFEST)


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Raise a failed write of ``path`` for lack of disk space (errno ENOSPC or EDQUOT, DuckDB's "No space left on
    device", or torch's short write, "unexpected pos") as :class:`OutOfSpace`, naming ``path``."""
    try:
        yield
    except OutOfSpace:
        raise
    except Exception as error:
        message = str(error)
        if (
            (isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT))
            or "no space left on device" in message.lower()
            or "unexpected pos" in message
        ):
            raise OutOfSpace(errno.ENOSPC, f"no space left on device while writing checkpoint {path}") from error
        raise


def covered_step(run_path: Path) -> int | None:
    """The last training step the run's checkpoint covers, None before its first; unlike :func:`latest` it
    changes nothing, so it may look at the folder of a run that is writing it."""
    final, _, previous = _paths(run_path)
    for path in (final, previous):
        try:
            return int((path / "step").read_text())
        except (OSError, ValueError):  # absent, or renamed away as it was read
            continue
    return None


def discard(run_path: Path) -> None:
    """Remove every checkpoint of the run."""
    for path in _paths(run_path):
        remove(path)


def remove(path: Path) -> None:
    """Delete the folder or file ``path`` if there; a link is deleted itself, never what it names."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _paths(run_path: Path) -> tuple[Path, Path, Path]:
    return run_path / FOLDER, run_path / f"{FOLDER}.tmp", run_path / f"{FOLDER}.old"


def export_adapters(run_path: Path, trainer: Any) -> Path | None:
    """Write a LoRA-trained actor's adapters as ``<run>/actor_adapters.safetensors`` in float16, small enough to
    keep beside the run's metrics; None for a full fine-tune, whose weights only the checkpoint holds."""
    if trainer is None or trainer.config.lora_rank == 0:
        return None
    from safetensors.torch import save_file

    path = run_path / ACTOR_ADAPTERS
    save_file({name: weight.half().contiguous() for name, weight in trainer.state_dict()["weights"].items()}, str(path))
    return path


def load_adapters(run_path: Path) -> dict[str, torch.Tensor]:
    """The adapters :func:`export_adapters` wrote, in float32."""
    from safetensors.torch import load_file

    path = run_path / ACTOR_ADAPTERS
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no exported actor adapters (a LoRA run writes them when it finishes)")
    return {name: weight.float() for name, weight in load_file(str(path)).items()}
