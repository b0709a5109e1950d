"""How long a checkpoint stops the training loop: a save that writes before it returns (what the loop did before
:class:`comprl.checkpoint.Writer`) against the Writer's save, which returns once the state is copied, side by side
in one run, on the profile's own actor trainer and experience manager.

    python benchmarks/checkpoint_blocking.py                       # cpu profile: SmolLM2-135M, LoRA
    python benchmarks/checkpoint_blocking.py --set actor.lora_rank=0 --set extractor.lora_rank=0   # full fine-tunes
    python benchmarks/checkpoint_blocking.py --profile smoke

Two hostings of the experience manager, each saved ``--saves`` times by both savers, alternately:

- ``sync``: in the training process, idle at the step boundary (``experience.mode="sync"``);
- ``async``: the manager with its background thread (what the Ray actor of ``experience.mode="async"`` runs,
  hosted here in-process), given ``--episodes`` episodes to distil just before each save, so that the extractor
  is at work when the checkpoint is taken, as after a training step.

Printed per hosting: the mean seconds the caller was blocked by each saver, the mean seconds the background write
took after the Writer's save returned (the loop trains meanwhile), and ``x_blocked`` = blocked (write first) /
blocked (Writer), measured in this run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd


def episodes(task: str, count: int, step: int) -> list[Any]:
    """Finished Room episodes of three turns, for the extractor to distil."""
    from comprl.experience.interface import Episode

    turns = [
        {"role": "system", "content": "You are in a room. Reach the stairs down (>) by moving one square a turn."},
        {"role": "user", "content": "The stairs are two squares to the east and one to the south."},
        {"role": "assistant", "content": "<answer>east</answer>"},
        {"role": "user", "content": "The stairs are one square to the east and one to the south."},
        {"role": "assistant", "content": "<answer>southeast</answer>"},
        {"role": "user", "content": "You are on the stairs. You descend."},
    ]
    return [
        Episode(task, seed=i, step=step, index=i, instruction="Go down the stairs.", messages=tuple(turns),
                success=i % 2 == 0)
        for i in range(count)
    ]


def measure(config: Any, hosting: str, saves: int, count: int, root: Path) -> dict[str, float]:
    import torch

    from comprl import checkpoint
    from comprl.actor.trainer import ActorTrainer
    from comprl.experience.manager import ExperienceManager
    from comprl.llm import load_model, resolve_dtype

    model, tokenizer = load_model(config.model, dtype=resolve_dtype(config.dtype, "cpu"), seed=config.seed)
    actor = ActorTrainer(model, tokenizer.pad_token_id, config.actor)
    manager = ExperienceManager(config, root / "bank.duckdb", background=hosting == "async")
    writer = checkpoint.Writer(root)
    blocked: dict[str, list[float]] = {"write_first": [], "writer": []}
    background = []
    try:
        for step in range(1, 2 * saves + 1):
            if hosting == "async":  # the extractor is at work when the step ends
                manager.submit(episodes(config.env_id, count, step))
                manager.flush(timeout=0.5)
            started = time.perf_counter()
            if step % 2:
                checkpoint.save(root, step, actor, manager)
                blocked["write_first"].append(time.perf_counter() - started)
            else:
                writer.save(step, actor, manager)
                blocked["writer"].append(time.perf_counter() - started)
                writer.wait()
                background.append(time.perf_counter() - started - blocked["writer"][-1])
            manager.flush()
        trainable = sum(p.numel() for p in actor.model.parameters() if p.requires_grad)
    finally:
        manager.close()
    size = sum(f.stat().st_size for f in (root / checkpoint.FOLDER).rglob("*") if f.is_file())
    result = {
        "blocked_write_first_s": sum(blocked["write_first"]) / saves,
        "blocked_writer_s": sum(blocked["writer"]) / saves,
        "write_after_return_s": sum(background) / saves,
        "checkpoint_mb": size / 2**20,
        "actor_trainable_m": trainable / 1e6,
        "threads": torch.get_num_threads(),
    }
    result["x_blocked"] = result["blocked_write_first_s"] / result["blocked_writer_s"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--saves", type=int, default=3, help="saves per saver and hosting")
    parser.add_argument("--episodes", type=int, default=4, help="episodes handed to the async extractor per save")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a config override")
    args = parser.parse_args()
    from comprl.config import make_config
    from comprl.kit.notebook_runner import parse_value

    overrides = {field: parse_value(value) for field, value in (item.split("=", 1) for item in args.set)}
    rows = {}
    for hosting in ("sync", "async"):
        config = make_config(args.profile, method="comp_rl", **overrides)
        with tempfile.TemporaryDirectory() as root:
            rows[hosting] = measure(config, hosting, args.saves, args.episodes, Path(root))
    pd.set_option("display.width", 200)
    print(pd.DataFrame(rows).T.round(3).to_string())


if __name__ == "__main__":
    main()
