"""Rollout throughput: lockstep batched generation vs one environment at a time, measured side by side; with
``--json``, also the device's prefill, decode and training tokens/s, written for ``comprl reproduce --dry-run``.

    python benchmarks/rollout_throughput.py                      # SmolLM2-135M, 8 Room episodes
    python benchmarks/rollout_throughput.py --model tiny-random  # quick check of the script itself
    taskset -c 1 python benchmarks/rollout_throughput.py --json auto --note "one core"   # -> results/throughput/cpu-...json
    python benchmarks/rollout_throughput.py --model Qwen/Qwen2.5-7B-Instruct --train-model Qwen/Qwen2.5-1.5B-Instruct \\
        --batch 128 --json auto                                  # on a GPU: what the paper profile's planner needs

Both arms play the same seeds with the same sampling settings; the script prints each arm's generated tokens,
wall time and tokens/s, and the ratio batched / sequential (machines are noisy: read the ratio).

``--json`` adds three measurements on random token ids, each in plain transformers forward passes (no vLLM, so a
GPU engine that batches and pages its KV cache will do better, decode most of all):

- prefill: ``--batch`` sequences of ``--prompt-tokens`` tokens, one forward pass, no cache; best of 3;
- decode: ``--decode-tokens`` single-token steps of ``--batch`` sequences on a KV cache of ``--prompt-tokens``;
- train: one update of comprl's GRPO trainer (full fine-tune: forward, backward, AdamW on fp32 master weights) on
  ``--train-batch`` sequences of ``--train-tokens`` tokens, half of them the model's own, after a warm-up update
  (``--train-model`` picks a smaller model where the actor's full fine-tune does not fit one GPU; ``--no-train``
  skips it). It runs last because it changes the weights.

The file records the device, both models with their parameter counts (the planner scales the rates to other models
by parameters), dtype, batch sizes and the rates; ``auto`` names it ``results/throughput/<device>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
import transformers

from comprl.config import ActorConfig
from comprl.envs import make
from comprl.llm import HFEngine, load_model, resolve_dtype
from comprl.planner import THROUGHPUT_DIR, THROUGHPUT_FORMAT
from comprl.rollout import RolloutConfig, Trajectory, run_episodes
from comprl.trainers.actor import ActorTrainer


def measure(engine: HFEngine, env_id: str, seeds: list[int], rollout: RolloutConfig, max_turns: int, batched: bool) -> dict[str, float]:
    envs = [make(env_id, max_turns=max_turns) for _ in seeds]
    torch.manual_seed(0)
    started = time.perf_counter()
    if batched:
        trajectories = run_episodes(engine, envs, seeds, rollout)
    else:
        trajectories = [t for env, seed in zip(envs, seeds) for t in run_episodes(engine, [env], [seed], rollout)]
    seconds = time.perf_counter() - started
    tokens = sum(t.num_action_tokens for t in trajectories)
    turns = sum(t.turns for t in trajectories)
    return {"tokens": tokens, "turns": turns, "seconds": seconds, "tokens_per_s": tokens / seconds}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _random_ids(vocab: int, batch: int, length: int, device: torch.device) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(vocab, (batch, length), generator=generator).to(device)


@torch.inference_mode()
def prefill_rate(model: transformers.PreTrainedModel, vocab: int, batch: int, length: int) -> float:
    """Prompt tokens/s of one forward pass over ``batch`` x ``length`` tokens (no cache kept), best of 3."""
    device = next(model.parameters()).device
    ids = _random_ids(vocab, batch, length, device)
    model(input_ids=ids[:, :16], use_cache=False, logits_to_keep=1)  # warm-up
    best = float("inf")
    for _ in range(3):
        _sync(device)
        started = time.perf_counter()
        model(input_ids=ids, use_cache=False, logits_to_keep=1)
        _sync(device)
        best = min(best, time.perf_counter() - started)
    return batch * length / best


@torch.inference_mode()
def decode_rate(model: transformers.PreTrainedModel, vocab: int, batch: int, context: int, steps: int) -> float:
    """Generated tokens/s of ``steps`` greedy single-token steps of ``batch`` sequences on a KV cache that starts
    at ``context`` tokens (the prefill that builds it is not timed)."""
    device = next(model.parameters()).device
    out = model(input_ids=_random_ids(vocab, batch, context, device), use_cache=True, logits_to_keep=1)
    cache, token = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    for _ in range(2):  # warm-up steps
        out = model(input_ids=token, past_key_values=cache, use_cache=True)
        cache, token = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    _sync(device)
    started = time.perf_counter()
    for _ in range(steps):
        out = model(input_ids=token, past_key_values=cache, use_cache=True)
        cache, token = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    _sync(device)
    return batch * steps / (time.perf_counter() - started)


def train_rate(model: transformers.PreTrainedModel, pad_id: int, vocab: int, batch: int, length: int) -> float:
    """Tokens/s through one GRPO update (forward, backward, AdamW step) of a full fine-tune: ``batch`` sequences
    of ``length`` tokens in one micro-batch, the second half of each the model's own tokens, advantages +-1."""
    device = next(model.parameters()).device
    trainer = ActorTrainer(model, pad_id, ActorConfig(micro_batch_size=batch))
    ids = _random_ids(vocab, batch, length, device).cpu().tolist()

    def sequences(count: int, size: int) -> list[Trajectory]:
        out = []
        for row in range(count):
            sequence = Trajectory(env_id="benchmark", seed=row, group=row)
            sequence.extend(ids[row][: size // 2])
            sequence.extend(ids[row][size // 2 : size], [-1.0] * (size - size // 2))
            out.append(sequence)
        return out

    advantages = torch.tensor([1.0 if row % 2 else -1.0 for row in range(batch)])
    trainer.update(sequences(batch, 16), advantages)  # warm-up: builds the AdamW state
    _sync(device)
    started = time.perf_counter()
    trainer.update(sequences(batch, length), advantages)
    _sync(device)
    return batch * length / (time.perf_counter() - started)


def device_name(device: torch.device) -> tuple[str, str]:
    """(a description of the device, a file-name slug of it)."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return f"GPU: {name}", _slug(name)
    model = platform.processor() or "unknown"
    try:
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
        model = found.group(1).strip() if found else model
    except OSError:
        pass
    threads = torch.get_num_threads()
    unit = "thread" if threads == 1 else "threads"
    return f"CPU: {model}, {threads} torch {unit}", _slug(f"cpu {model} {threads} {unit}")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", re.sub(r"\([^)]*\)", "", text.lower())).strip("-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--env", default="comprl/Room-Ultimate-5x5-v0")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=12)
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--dtype", default="auto", help="float32, bfloat16, float16 or auto (comprl.llm.resolve_dtype)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads on CPU (default: the cores this process may use)")
    parser.add_argument("--no-compare", action="store_true", help="skip the batched vs sequential rollout arms")
    parser.add_argument(
        "--json", nargs="?", const="auto", default=None, metavar="FILE",
        help=f"also measure prefill/decode/train tokens/s and write them to FILE ('auto': {THROUGHPUT_DIR.name}/<device>.json "
        "under results/)",
    )
    parser.add_argument("--batch", type=int, default=8, help="sequences per prefill and decode pass (--json)")
    parser.add_argument("--prompt-tokens", type=int, default=512, help="prefill length and decode context (--json)")
    parser.add_argument("--decode-tokens", type=int, default=32, help="timed decode steps (--json)")
    parser.add_argument("--train-model", default=None, help="model of the update measurement (default: --model)")
    parser.add_argument("--train-batch", type=int, default=4, help="sequences in the measured update (--json)")
    parser.add_argument("--train-tokens", type=int, default=512, help="tokens per sequence of the measured update (--json)")
    parser.add_argument("--no-train", action="store_true", help="skip the update measurement (--json)")
    parser.add_argument("--note", default="", help="free text stored in the file (e.g. what else ran on the machine)")
    args = parser.parse_args()

    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else "cpu" if args.device == "auto" else args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads or len(os.sched_getaffinity(0)))
    dtype = resolve_dtype(args.dtype, device)
    model, tokenizer = load_model(args.model, dtype=dtype, device=device)
    engine = HFEngine(model, tokenizer)
    rollout = RolloutConfig(max_new_tokens=args.max_new_tokens, temperature=0.7, response_prefix="<answer>")
    seeds = list(range(args.episodes))
    results = {}
    if not args.no_compare:
        measure(engine, args.env, seeds[:1], rollout, 1, batched=True)  # warm-up
        results = {
            "batched": measure(engine, args.env, seeds, rollout, args.turns, batched=True),
            "sequential": measure(engine, args.env, seeds, rollout, args.turns, batched=False),
        }
        print(f"{args.model} on {args.env}: {args.episodes} episodes x up to {args.turns} turns, torch threads={torch.get_num_threads()}")
        for name, r in results.items():
            print(f"  {name:10s} tokens={r['tokens']:5.0f} turns={r['turns']:3.0f} wall={r['seconds']:7.1f}s  tokens/s={r['tokens_per_s']:6.1f}")
        ratio = results["batched"]["tokens_per_s"] / results["sequential"]["tokens_per_s"]
        print(f"  ratio batched/sequential tokens/s = {ratio:.2f}x")
    if args.json is None:
        return

    described, slug = device_name(device)
    vocab = len(tokenizer)
    record = {
        "format": THROUGHPUT_FORMAT,
        "device": described,
        "device_kind": device.type,
        "model": args.model,
        "parameters_b": round(sum(p.numel() for p in model.parameters()) / 1e9, 4),
        "dtype": str(dtype).removeprefix("torch."),
        "engine": "transformers forward passes (no vLLM)",
        "batch_size": args.batch,
        "prompt_tokens": args.prompt_tokens,
        "decode_tokens": args.decode_tokens,
    }
    record["prefill_tokens_per_s"] = round(prefill_rate(model, vocab, args.batch, args.prompt_tokens), 2)
    print(f"  prefill: {record['prefill_tokens_per_s']:,.1f} tokens/s ({args.batch} x {args.prompt_tokens} tokens)", flush=True)
    record["decode_tokens_per_s"] = round(decode_rate(model, vocab, args.batch, args.prompt_tokens, args.decode_tokens), 2)
    print(f"  decode:  {record['decode_tokens_per_s']:,.1f} tokens/s (batch {args.batch}, context {args.prompt_tokens})", flush=True)
    if not args.no_train:
        if args.train_model and args.train_model != args.model:
            del engine, model
            model, tokenizer = load_model(args.train_model, dtype=dtype, device=device)
        record["train_model"] = args.train_model or args.model
        record["train_parameters_b"] = round(sum(p.numel() for p in model.parameters()) / 1e9, 4)
        record["train_batch_size"] = args.train_batch
        record["train_tokens"] = args.train_tokens
        record["train_tokens_per_s"] = round(
            train_rate(model, tokenizer.pad_token_id, len(tokenizer), args.train_batch, args.train_tokens), 2
        )
        record["train"] = "full fine-tune: forward, backward and AdamW step with fp32 master weights (comprl ActorTrainer)"
        print(f"  train:   {record['train_tokens_per_s']:,.1f} tokens/s ({args.train_batch} x {args.train_tokens} tokens, "
              f"{record['train_model']})", flush=True)
    if results:
        record["rollout"] = {
            "env": args.env, "episodes": args.episodes, "turns": args.turns, "max_new_tokens": args.max_new_tokens,
            "batched_tokens_per_s": round(results["batched"]["tokens_per_s"], 2),
            "sequential_tokens_per_s": round(results["sequential"]["tokens_per_s"], 2),
        }
    record |= {
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(["python", "benchmarks/rollout_throughput.py", *sys.argv[1:]]),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "note": args.note,
    }
    path = THROUGHPUT_DIR / f"{slug}.json" if args.json == "auto" else Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
