"""Rollout throughput: lockstep batched generation vs one environment at a time, measured side by side; with
``--json``, also the device's prefill, decode and training tokens/s, written for ``comprl reproduce --dry-run``.

    python benchmarks/rollout_throughput.py                      # SmolLM2-135M, 8 Room episodes
    python benchmarks/rollout_throughput.py --model tiny-random  # quick check of the script itself
    taskset -c 1 python benchmarks/rollout_throughput.py --json auto --note "one core"   # ->
    results/throughput/cpu-...json
    python benchmarks/rollout_throughput.py --model Qwen/Qwen2.5-7B-Instruct --train-model Qwen/Qwen2.5-1.5B-Instruct \\
        --batch 128 --json auto                                  # on a GPU: what the paper profile's planner needs
    python benchmarks/rollout_throughput.py --model Qwen/Qwen2.5-7B-Instruct --train-model Qwen/Qwen2.5-1.5B-Instruct \\
        --random-weights --batch 128 --json auto                 # the same on a GPU that cannot download weights

Both arms play the same seeds with the same sampling settings; the script prints each arm's generated tokens,
wall time and tokens/s, and the ratio batched / sequential (machines are noisy: read the ratio).

``--json`` adds three measurements on random token ids, each in plain transformers forward passes (no vLLM, so a
GPU engine that batches and pages its KV cache will do better, decode most of all):

- prefill: ``--batch`` sequences of ``--prompt-tokens`` tokens, one forward pass, no cache; best of 3;
- decode: ``--decode-tokens`` single-token steps of ``--batch`` sequences on a KV cache of ``--prompt-tokens``;
- train: one update of comprl's GRPO trainer (full fine-tune: forward, backward, AdamW on fp32 master weights) on
  ``--train-batch`` sequences of ``--train-tokens`` tokens, half of them the model's own, best of 2 after a warm-up
  update of the same shape (``--train-model`` picks a smaller model where the actor's full fine-tune does not fit
  one GPU; ``--no-train`` skips it). It runs last because it changes the weights.

``--random-weights`` builds both models from their configs with random weights instead of loading them: a forward
pass, a decode step and an update cost the same whatever the weights hold, so a machine without the weights (or
without a network) still measures the model's own architecture. A config comes from ``benchmarks/model_configs/``
(the model card's ``config.json``, its ``/`` written ``--``), from ``--model`` itself where that names a ``.json``
file, or, for other models, from the hub. It implies ``--no-compare``: a random model's replies mean nothing to an
environment.

The file records the device, both models with their parameter counts (the planner scales the rates to other models
by parameters), dtype, batch sizes and the rates; ``auto`` names it ``results/throughput/<device>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

from comprl.config import ActorConfig
from comprl.envs import make
from comprl.llm import HFEngine, load_model, resolve_dtype
from comprl.llm.loading import cpu_model
from comprl.kit.planner import THROUGHPUT_DIR, THROUGHPUT_FORMAT
from comprl.actor.rollout import RolloutConfig, Trajectory, run_episodes
from comprl.actor.trainer import ActorTrainer


MODEL_CONFIGS = Path(__file__).resolve().parent / "model_configs"
"""Model cards' ``config.json`` files for ``--random-weights``, named by model id with ``/`` written ``--``."""


def model_config(name: str) -> transformers.PretrainedConfig:
    """The config of model ``name``: ``name`` itself if it is a ``config.json`` file, else the shipped one in
    :data:`MODEL_CONFIGS` if there is one, else the hub's."""
    shipped = Path(name) if name.endswith(".json") else MODEL_CONFIGS / f"{name.replace('/', '--')}.json"
    if not shipped.is_file():
        return AutoConfig.from_pretrained(name)
    fields = json.loads(shipped.read_text())
    return AutoConfig.for_model(fields.pop("model_type"), **fields)


def random_model(name: str, dtype: torch.dtype, device: torch.device) -> transformers.PreTrainedModel:
    """Model ``name`` with random weights, built in ``dtype`` directly on ``device`` from :func:`model_config`."""
    config = model_config(name)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()


def model_for_rates(name: str, dtype: torch.dtype, device: torch.device, random_weights: bool):
    """``(model, tokenizer or None, vocabulary size, pad id)`` for the rate measurements."""
    if random_weights:
        model = random_model(name, dtype, device)
        config = model.config
        pad = config.pad_token_id if config.pad_token_id is not None else config.eos_token_id
        return model, None, config.vocab_size, pad
    model, tokenizer = load_model(name, dtype=dtype, device=device)
    return model, tokenizer, len(tokenizer), tokenizer.pad_token_id


def measure(
    engine: HFEngine, env_id: str, seeds: list[int], rollout: RolloutConfig, max_turns: int, batched: bool
) -> dict[str, float]:
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
    # warm-up at the measured shape: builds the AdamW state, and on a GPU the allocator's pool and the kernels'
    # choices for these shapes (a warm-up on short sequences left the first timed update 5x slower on an H200)
    trainer.update(sequences(batch, length), advantages)
    best = float("inf")
    for _ in range(2):
        _sync(device)
        started = time.perf_counter()
        trainer.update(sequences(batch, length), advantages)
        _sync(device)
        best = min(best, time.perf_counter() - started)
    return batch * length / best


def device_name(device: torch.device, dtype: torch.dtype) -> tuple[str, str]:
    """(a description of the device, a file-name slug of it). A CPU's slug names the dtype too: CPUs sold under one
    name differ in what they compute fast (an AMD EPYC with avx512_bf16 runs bfloat16, one with AVX2 only float32),
    so that their files do not overwrite each other."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return f"GPU: {name}", _slug(name)
    model = cpu_model()
    threads = torch.get_num_threads()
    unit = "thread" if threads == 1 else "threads"
    dtype_name = str(dtype).removeprefix("torch.")
    return f"CPU: {model}, {threads} torch {unit}", _slug(f"cpu {model} {dtype_name} {threads} {unit}")


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
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads on CPU (default: the cores this process may use)"
    )
    parser.add_argument("--no-compare", action="store_true", help="skip the batched vs sequential rollout arms")
    parser.add_argument(
        "--json",
        nargs="?",
        const="auto",
        default=None,
        metavar="FILE",
        help="also measure prefill/decode/train tokens/s and write them to FILE "
        f"('auto': {THROUGHPUT_DIR.name}/<device>.json under results/)",
    )
    parser.add_argument("--batch", type=int, default=8, help="sequences per prefill and decode pass (--json)")
    parser.add_argument("--prompt-tokens", type=int, default=512, help="prefill length and decode context (--json)")
    parser.add_argument("--decode-tokens", type=int, default=32, help="timed decode steps (--json)")
    parser.add_argument("--train-model", default=None, help="model of the update measurement (default: --model)")
    parser.add_argument("--train-batch", type=int, default=4, help="sequences in the measured update (--json)")
    parser.add_argument(
        "--train-tokens", type=int, default=512, help="tokens per sequence of the measured update (--json)"
    )
    parser.add_argument("--no-train", action="store_true", help="skip the update measurement (--json)")
    parser.add_argument(
        "--random-weights",
        action="store_true",
        help=f"build the models from their configs ({MODEL_CONFIGS.parent.name}/{MODEL_CONFIGS.name}/ or the hub) "
        "with random weights instead of loading them: same cost per token, no weights needed; implies --no-compare",
    )
    parser.add_argument("--note", default="", help="free text stored in the file (e.g. what else ran on the machine)")
    args = parser.parse_args()

    device = torch.device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else "cpu"
        if args.device == "auto"
        else args.device
    )
    if device.type == "cpu":
        torch.set_num_threads(args.threads or len(os.sched_getaffinity(0)))
    dtype = resolve_dtype(args.dtype, device)
    model, tokenizer, vocab, pad_id = model_for_rates(args.model, dtype, device, args.random_weights)
    results = {}
    if not (args.no_compare or args.random_weights):
        engine = HFEngine(model, tokenizer)
        rollout = RolloutConfig(max_new_tokens=args.max_new_tokens, temperature=0.7, response_prefix="<answer>")
        seeds = list(range(args.episodes))
        measure(engine, args.env, seeds[:1], rollout, 1, batched=True)  # warm-up
        results = {
            "batched": measure(engine, args.env, seeds, rollout, args.turns, batched=True),
            "sequential": measure(engine, args.env, seeds, rollout, args.turns, batched=False),
        }
        print(
            f"{args.model} on {args.env}: {args.episodes} episodes x up to {args.turns} turns, "
            f"torch threads={torch.get_num_threads()}"
        )
        for name, r in results.items():
            print(
                f"  {name:10s} tokens={r['tokens']:5.0f} turns={r['turns']:3.0f} wall={r['seconds']:7.1f}s  "
                f"tokens/s={r['tokens_per_s']:6.1f}"
            )
        ratio = results["batched"]["tokens_per_s"] / results["sequential"]["tokens_per_s"]
        print(f"  ratio batched/sequential tokens/s = {ratio:.2f}x")
        del engine  # it holds the model, which the update measurement may swap for another
    if args.json is None:
        return

    described, slug = device_name(device, dtype)
    record = {
        "format": THROUGHPUT_FORMAT,
        "device": described,
        "device_kind": device.type,
        "model": args.model,
        "parameters_b": round(sum(p.numel() for p in model.parameters()) / 1e9, 4),
        "dtype": str(dtype).removeprefix("torch."),
        "weights": "random, from the model's config (--random-weights)" if args.random_weights else "the model's own",
        "engine": "transformers forward passes (no vLLM)",
        "batch_size": args.batch,
        "prompt_tokens": args.prompt_tokens,
        "decode_tokens": args.decode_tokens,
    }
    record["prefill_tokens_per_s"] = round(prefill_rate(model, vocab, args.batch, args.prompt_tokens), 2)
    print(
        f"  prefill: {record['prefill_tokens_per_s']:,.1f} tokens/s ({args.batch} x {args.prompt_tokens} tokens)",
        flush=True,
    )
    record["decode_tokens_per_s"] = round(
        decode_rate(model, vocab, args.batch, args.prompt_tokens, args.decode_tokens), 2
    )
    print(
        f"  decode:  {record['decode_tokens_per_s']:,.1f} tokens/s (batch {args.batch}, context {args.prompt_tokens})",
        flush=True,
    )
    if not args.no_train:
        if args.train_model and args.train_model != args.model:
            del model
            if device.type == "cuda":
                torch.cuda.empty_cache()
            model, tokenizer, vocab, pad_id = model_for_rates(args.train_model, dtype, device, args.random_weights)
        record["train_model"] = args.train_model or args.model
        record["train_parameters_b"] = round(sum(p.numel() for p in model.parameters()) / 1e9, 4)
        record["train_batch_size"] = args.train_batch
        record["train_tokens"] = args.train_tokens
        record["train_tokens_per_s"] = round(
            train_rate(model, pad_id, vocab, args.train_batch, args.train_tokens), 2
        )
        record["train"] = (
            "full fine-tune: forward, backward and AdamW step with fp32 master weights (comprl ActorTrainer)"
        )
        print(
            f"  train:   {record['train_tokens_per_s']:,.1f} tokens/s "
            f"({args.train_batch} x {args.train_tokens} tokens, {record['train_model']})",
            flush=True,
        )
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
