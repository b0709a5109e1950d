"""Generation beside CPU-bound neighbours: how much slower it gets when torch's OpenMP threads spin-wait (libgomp's
default) and when they sleep at once (``OMP_WAIT_POLICY=PASSIVE``, comprl's default, :mod:`comprl.threads`).

    python benchmarks/neighbour_load.py                                  # SmolLM2-135M, one neighbour per core
    python benchmarks/neighbour_load.py --model tiny-random --rounds 2   # quick check of the script itself

Each arm runs in a fresh process, since libgomp reads its settings once, when torch loads it. ``spin`` arms set
``GOMP_SPINCOUNT=300000``, libgomp's own default spin (about 3 ms), which comprl's default leaves alone; ``passive``
arms set nothing, so comprl's default applies. An arm loads the model, then times one batched greedy generation
(``--batch`` prompts of 64 random token ids, ``--tokens`` new tokens; a decode step is many small parallel
regions) ``--rounds`` times quiet and as often loaded, alternating: its ``--neighbours`` processes of
``while True: pass`` are started once and paused (SIGSTOP) for a quiet round, resumed (SIGCONT) for a loaded one, so
whatever else the shared machine runs weighs on both alike. Times are medians over the rounds. Printed per arm:
``quiet_s``, ``loaded_s``, ``slowdown`` = loaded / quiet, and each time relative to the spinning arm with torch's
default thread count (``x_spin_quiet``, ``x_spin_loaded``; below 1 is faster). KMP_BLOCKTIME is not an arm: it is
read by Intel's and LLVM's OpenMP, not by libgomp, which torch's CPU wheel uses
(``python -c "import torch; print(torch.__config__.parallel_info())"``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import pandas as pd

SPIN = {"GOMP_SPINCOUNT": "300000"}
"""libgomp's default spin count written out: it wins over the ``OMP_WAIT_POLICY`` comprl defaults to."""


def arms(cores: int) -> dict[str, tuple[dict[str, str], int]]:
    """Arm name -> (environment variables, torch threads)."""
    return {
        f"spin, {cores} threads": (SPIN, cores),
        f"passive, {cores} threads (comprl)": ({}, cores),
        "spin, 1 thread": (SPIN, 1),
        "passive, 1 thread": ({}, 1),
    }


def worker(model_name: str, threads: int, batch: int, tokens: int, rounds: int, neighbours: int) -> dict:
    """Time the generation quiet and loaded in this process (comprl, and so its OpenMP default, before torch)."""
    from comprl.llm import load_model
    import torch

    torch.set_num_threads(threads)
    model, _ = load_model(model_name)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 1000, (batch, 64), generator=generator)

    def generate() -> float:
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=tokens,
                min_new_tokens=tokens, pad_token_id=0,
            )
        return time.perf_counter() - start

    generate()  # warm-up: kernel selection, allocator
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(neighbours)]
    quiet, loaded = [], []
    try:
        for _ in range(rounds):
            for process in busy:
                process.send_signal(signal.SIGSTOP)
            quiet.append(generate())
            for process in busy:
                process.send_signal(signal.SIGCONT)
            loaded.append(generate())
    finally:
        for process in busy:
            process.kill()
            process.wait()
    return {
        "threads": torch.get_num_threads(),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", ""),
        "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT", ""),
        "quiet_s": statistics.median(quiet),
        "loaded_s": statistics.median(loaded),
    }


def main() -> None:
    cores = len(os.sched_getaffinity(0))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=8, help="new tokens per generation")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--neighbours", type=int, default=cores, help="CPU-bound processes (default: one per core)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # an arm's settings, in its own process
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.model, json.loads(args.worker), args.batch, args.tokens, args.rounds,
                                args.neighbours)))
        return

    rows = {}
    for name, (env, threads) in arms(cores).items():
        command = [sys.executable, __file__, "--worker", str(threads), *sys.argv[1:]]
        clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        done = subprocess.run(command, env={**clean, **env}, capture_output=True, text=True, check=True)
        rows[name] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{name}: {rows[name]}", flush=True)
    table = pd.DataFrame.from_dict(rows, orient="index")
    table["slowdown"] = table["loaded_s"] / table["quiet_s"]
    first = table.iloc[0]
    table["x_spin_quiet"] = table["quiet_s"] / first["quiet_s"]
    table["x_spin_loaded"] = table["loaded_s"] / first["loaded_s"]
    print(f"\n{args.model}: greedy generation of {args.tokens} tokens for {args.batch} prompts, {cores} cores, "
          f"{args.neighbours} CPU-bound neighbour(s), medians of {args.rounds} rounds; "
          f"load average at the end {os.getloadavg()[0]:.1f}")
    print(table.round(3).to_string())


if __name__ == "__main__":
    main()
