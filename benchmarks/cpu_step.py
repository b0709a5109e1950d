"""The cpu profile's training step: seconds per step, peak memory, and how close the rollout is to the CPU's
forward throughput, for variants of the settings that trade one for the other, side by side in one run.

    python benchmarks/cpu_step.py                                   # the default variants, 3 steps each
    python benchmarks/cpu_step.py --threads 1 --variant plain \
        --variant gc actor.gradient_checkpointing=True extractor.gradient_checkpointing=True

Every variant is a real ``comp_rl`` run of the ``cpu`` profile (SmolLM2-135M actor and extractor, 8 episodes of
up to 6 turns per step, the experience manager in-process) in a fresh process, so its peak resident memory
(``ru_maxrss``) is its own. The first step is dropped from the means (it finds the bank empty). Then, in the same
process, the actor model's raw forward throughput: a batch of 8 sequences of 512 tokens, no gradient, best of 3.
An update is skipped when every episode of a group ends alike (no advantage), so how many updates a short run
takes is luck. Each variant therefore also times, in another fresh process, one *full* actor update: as many
sequences as a step rolls out, of the run's mean length and reply tokens, every one with a non-zero advantage.
Printed per variant:

- ``step_s``, ``rollout_s``, ``update_s``, ``experience_s``: means over the measured steps;
- ``full_update_s``: the full update; ``rollout_update_s`` = ``rollout_s`` + ``full_update_s``, the issue's
  "8 episodes x 6 turns plus the actor update";
- ``peak_rss_gb``: peak resident memory of the run's process (models, environments, the updates it took);
  ``update_rss_gb``: how much the full update grows a process that holds only the actor;
  ``peak_bound_gb`` = their sum, an upper bound on a step with a full update;
- ``rollout_tok_s``: tokens the rollout's forward passes processed per second (prompt tokens not served from the
  prefix cache, plus generated ones), ``forward_tok_s`` the raw batched forward's, and their ratio;
- ``x_first``: each variant's ``step_s`` relative to the first variant's, measured in this run.

Targets (issue: a lean, fast cpu step): ``rollout_update_s`` <= 30 and ``peak_bound_gb`` <= 3 in one variant.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pandas as pd

DEFAULT_VARIANTS: dict[str, dict[str, Any]] = {
    "profile": {},
    "float32": {"dtype": "float32"},
    "checkpointing": {"actor.gradient_checkpointing": True, "extractor.gradient_checkpointing": True},
    "micro_batch_2": {"actor.micro_batch_size": 2, "extractor.micro_batch_size": 2},
    "micro_batch_4": {"actor.micro_batch_size": 4, "extractor.micro_batch_size": 4},
    "float32_adapters": {"actor.generation_adapter_dtype": "float32", "extractor.generation_adapter_dtype": "float32"},
    "onednn_cache_1024": {"env.ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024"},
    "no_malloc_trim": {"env.COMPRL_MALLOC_TRIM": "0"},
    "no_share_base": {"extractor.share_base": False},
}
"""Name -> config overrides: the cpu profile as it is (``dtype="auto"``: bfloat16 on CPUs that multiply it in hardware,
float32 elsewhere; activations kept for the backward pass, not recomputed; micro-batches of 1; LoRA adapters
computed in the model's dtype when generating; the extractor over the actor's frozen base weights; oneDNN's kernel
cache at 64 shapes and free heap pages handed back after each generation batch and update,
:mod:`comprl.llm.allocator`), and its levers.
``env.NAME`` sets an environment variable in the variant's process before comprl and torch start (too late for
those a C library reads at process start, such as glibc's ``MALLOC_*``)."""


def measure(overrides: dict[str, Any], steps: int, threads: int | None) -> dict[str, float]:
    """One variant, in this (fresh) process."""
    overrides = _set_environment(overrides)
    import torch

    from comprl.config import make_config
    from comprl.llm import resolve_dtype
    from comprl.loop import run_experiment

    if threads:
        torch.set_num_threads(threads)
    config = make_config("cpu", method="comp_rl", steps=steps, eval_episodes=0, **overrides)
    dtype = resolve_dtype(config.dtype, "cpu")
    with tempfile.TemporaryDirectory() as root:
        rows = run_experiment(config, root, name="bench", progress=False).metrics()
    train = rows[(rows["phase"] == "train") & (rows["step"] > 1)]
    result = {
        "step_s": train["step_seconds"].mean(),
        "rollout_s": train["rollout_seconds"].mean(),
        "update_s": train["update_seconds"].mean(),
        "experience_s": train["experience_seconds"].mean(),
        "rollout_tok_s": (train["processed_tokens"] / train["rollout_seconds"]).mean(),
        "success": train["success_rate"].mean(),
        "sequence_tokens": train["mean_sequence_tokens"].mean(),
        "action_tokens": train["mean_action_tokens"].mean(),
        "peak_rss_gb": _peak_gb(),
        "threads": torch.get_num_threads(),
        "dtype": str(dtype).removeprefix("torch."),
    }
    result["forward_tok_s"] = forward_throughput(config.model, dtype)
    return result


def full_update(
    overrides: dict[str, Any], sequence_tokens: float, action_tokens: float, threads: int | None
) -> dict[str, float]:
    """One actor update on a step's worth of synthetic sequences, all with a non-zero advantage, in this (fresh)
    process: its seconds and how much it grows the resident memory of a process holding the actor."""
    overrides = _set_environment(overrides)
    import torch

    from comprl.config import make_config
    from comprl.llm import load_model, resolve_dtype
    from comprl.actor.rollout import Trajectory
    from comprl.actor.trainer import ActorTrainer

    if threads:
        torch.set_num_threads(threads)
    config = make_config("cpu", **overrides)
    model, tokenizer = load_model(config.model, dtype=resolve_dtype(config.dtype, "cpu"), seed=config.seed)
    trainer = ActorTrainer(model, tokenizer.pad_token_id, config.actor)
    episodes = config.batch_instances * config.group_size
    reply = max(1, round(action_tokens / config.max_turns))
    context = max(1, round((sequence_tokens - reply * config.max_turns) / config.max_turns))
    generator = torch.Generator().manual_seed(0)
    sequences = []
    for index in range(episodes):
        sequence = Trajectory(env_id=config.env_id, seed=index, group=index, temperature=config.rollout.temperature)
        for _ in range(config.max_turns):
            sequence.extend(torch.randint(len(tokenizer), (context,), generator=generator).tolist())
            sequence.extend(torch.randint(len(tokenizer), (reply,), generator=generator).tolist(), [-1.0] * reply)
        sequences.append(sequence)
    advantages = torch.tensor([1.0, -1.0] * (episodes // 2) + [1.0] * (episodes % 2))
    before = _resident_gb()
    started = time.perf_counter()
    trainer.update(sequences, advantages)
    return {
        "full_update_s": time.perf_counter() - started,
        "update_rss_gb": _peak_gb() - before,
    }


def _set_environment(overrides: dict[str, Any]) -> dict[str, Any]:
    """Put a variant's ``env.NAME`` entries into this (fresh) process's environment; return the config overrides."""
    import os

    for key, value in overrides.items():
        if key.startswith("env."):
            os.environ[key.removeprefix("env.")] = str(value)
    return {key: value for key, value in overrides.items() if not key.startswith("env.")}


def _peak_gb() -> float:
    """This process's peak resident memory so far (``ru_maxrss``, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _resident_gb() -> float:
    """This process's resident memory now (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**30


def forward_throughput(model_name: str, dtype: Any, batch: int = 8, length: int = 512) -> float:
    """Tokens per second of the model's plain batched forward pass in ``dtype`` (no gradient, no cache), best of 3."""
    import torch

    from comprl.llm import load_model

    model, tokenizer = load_model(model_name, dtype=dtype)
    ids = torch.randint(0, len(tokenizer), (batch, length))
    best = float("inf")
    with torch.inference_mode():
        model(input_ids=ids[:, :16])  # warm-up
        for _ in range(3):
            started = time.perf_counter()
            model(input_ids=ids, use_cache=False, logits_to_keep=1)
            best = min(best, time.perf_counter() - started)
    return batch * length / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3, help="training steps per variant (the first is dropped)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument(
        "--variant", nargs="+", action="append", metavar=("NAME", "FIELD=VALUE"),
        help="a variant of your own: a name and config overrides (repeatable); replaces the default variants",
    )
    args = parser.parse_args()
    variants = DEFAULT_VARIANTS
    if args.variant:
        from comprl.kit.notebook_runner import parse_value

        variants = {v[0]: {k: parse_value(x) for k, x in (item.split("=", 1) for item in v[1:])} for v in args.variant}

    rows = []
    for name, overrides in variants.items():
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            row = {"variant": name, **pool.submit(measure, overrides, args.steps, args.threads).result()}
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            row |= pool.submit(
                full_update, overrides, row["sequence_tokens"], row["action_tokens"], args.threads
            ).result()
        rows.append(row)
        print(
            f"{name}: {row['step_s']:.1f} s/step, full update {row['full_update_s']:.1f} s, "
            f"peak {row['peak_rss_gb']:.2f} GB",
            flush=True,
        )
    table = pd.DataFrame(rows)
    table["rollout_vs_forward"] = table["rollout_tok_s"] / table["forward_tok_s"]
    table["rollout_update_s"] = table["rollout_s"] + table["full_update_s"]
    table["peak_bound_gb"] = table["peak_rss_gb"] + table["update_rss_gb"]
    table["x_first"] = table["rollout_update_s"] / table["rollout_update_s"].iloc[0]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.round(3).to_string(index=False))
    meets = table[(table["rollout_update_s"] <= 30) & (table["peak_bound_gb"] <= 3)]
    print(
        "targets (rollout + full update <= 30 s and peak bound <= 3 GB at once): "
        f"met by {', '.join(meets['variant']) or 'none'}"
    )


if __name__ == "__main__":
    main()
