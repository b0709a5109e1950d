"""Checkpoints of a run folder, from which a killed run continues exactly where it was.

A checkpoint is the folder ``<run>/checkpoint/``, written after a training step's metrics row:

- ``step``: the last training step it covers, as text;
- ``state.pt``: the step, the random states (python, numpy, torch) and the actor trainer's state (its trainable
  weights in fp32 and AdamW's moments; :meth:`comprl.policy.PolicyTrainer.state_dict`);
- ``experience/``: the experience side's (:meth:`comprl.experience.manager.ExperienceManager.save_checkpoint`: a
  snapshot of the bank, the queue of episodes, the extractor and its samples).

It is written whole into ``checkpoint.tmp/`` and then renamed, so a kill at any moment leaves one complete
checkpoint: the previous one, or the new one (a kill between the two renames leaves it as ``checkpoint.old/``).
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

FOLDER = "checkpoint"
ACTOR_ADAPTERS = "actor_adapters.safetensors"
"""A finished LoRA run's trained actor adapters, in float16 (:func:`export_adapters`)."""


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
        return torch.load(self.path / "state.pt", weights_only=False)


def rng_state() -> dict[str, Any]:
    """The states of the random generators the loop draws from (python, numpy's global one, torch's CPU one)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(run_path: Path, step: int, actor: Any | None, manager: Any | None) -> Checkpoint:
    """Write the checkpoint of ``step`` (``actor``: the actor trainer or None when the method freezes it;
    ``manager``: the experience manager or None)."""
    final, temporary, previous = _paths(run_path)
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    if manager is not None:
        manager.save_checkpoint(temporary / "experience")
    state = {"step": step, "rng": rng_state(), "actor": None if actor is None else actor.state_dict()}
    torch.save(state, temporary / "state.pt")
    (temporary / "step").write_text(str(step))
    if final.exists():
        shutil.rmtree(previous, ignore_errors=True)
        final.rename(previous)
    temporary.rename(final)
    shutil.rmtree(previous, ignore_errors=True)
    return Checkpoint(final, step)


def latest(run_path: Path) -> Checkpoint | None:
    """The run's complete checkpoint, or None; an unfinished ``checkpoint.tmp/`` is removed."""
    final, temporary, previous = _paths(run_path)
    shutil.rmtree(temporary, ignore_errors=True)
    if not final.exists() and previous.exists():  # killed between the renames
        previous.rename(final)
    if not (final / "step").exists():
        return None
    return Checkpoint(final, int((final / "step").read_text()))


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
        shutil.rmtree(path, ignore_errors=True)


def _paths(run_path: Path) -> tuple[Path, Path, Path]:
    return run_path / FOLDER, run_path / f"{FOLDER}.tmp", run_path / f"{FOLDER}.old"


def export_adapters(run_path: Path, trainer: Any) -> Path | None:
    """Write a LoRA-trained actor's adapters as ``<run>/actor_adapters.safetensors`` in float16 (SmolLM2-135M at
    rank 16: about 10 MB), small enough to keep beside the run's metrics; None for a full fine-tune, whose
    weights only the checkpoint holds."""
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
