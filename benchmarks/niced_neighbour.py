"""Work beside a niced comprl run: does ``nice`` make the run yield? Measured side by side, on one core.

    python benchmarks/niced_neighbour.py                 # core 0, 3 rounds
    python benchmarks/niced_neighbour.py --core 1 --rounds 5

papermill starts a notebook kernel in a session of its own; on Linux with autogroup scheduling a nice value only
weighs a process against others of its session, so a niced kernel used to take half of a core from the user's
other work. ``import comprl`` now gives a niced process that leads its session that nice value
(:func:`comprl.threads.nice_own_session`). This script pins itself and one CPU-bound neighbour to ``--core`` and
times a fixed piece of work (single-thread float32 matrix products) in four arms, alternating, ``--rounds`` each:

- ``alone``: no neighbour;
- ``not niced``: the neighbour at nice 0 (the fair share: about half);
- ``niced, own session``: the neighbour started as papermill starts a kernel (``nice -n 19``, a new session),
  busy without importing comprl: what a niced run did before;
- ``niced, own session, import comprl``: the same neighbour after ``import comprl``: what a niced run does now.

Printed per arm: the median seconds and the speed relative to ``alone`` (1.0 = the neighbour takes nothing).
Without autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled`` 0, or not Linux) the last two arms
should both be near 1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

BUSY = "while True: pass"
ARMS = {
    "alone": None,
    "not niced": (0, False, BUSY),
    "niced, own session": (19, True, BUSY),
    "niced, own session, import comprl": (19, True, "import comprl\n" + BUSY),
}


def work(size: int, repeats: int) -> float:
    """Seconds for ``repeats`` products of two ``size`` x ``size`` float32 matrices on one thread."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    started = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--core", type=int, default=0, help="the core this script and the neighbour share")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per arm, alternating")
    parser.add_argument("--size", type=int, default=1024, help="matrix size of the timed work")
    parser.add_argument("--repeats", type=int, default=60, help="products per timed piece of work")
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)
    work(args.size, 5)  # warm-up
    autogroup = "/proc/sys/kernel/sched_autogroup_enabled"
    enabled = open(autogroup).read().strip() if os.path.exists(autogroup) else "absent"
    print(f"core {args.core}; autogroup scheduling: {enabled}", flush=True)
    times: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for _ in range(args.rounds):
        for arm, neighbour in ARMS.items():
            busy = None
            if neighbour is not None:
                nice, own_session, code = neighbour
                busy = subprocess.Popen(
                    ["nice", "-n", str(nice), "taskset", "-c", str(args.core), sys.executable, "-c", code],
                    start_new_session=own_session,
                )
                time.sleep(3)  # the neighbour imports comprl (when asked) and is busy before the timing starts
            try:
                times[arm].append(work(args.size, args.repeats))
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
    alone = statistics.median(times["alone"])
    for arm, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{arm:36s} {median:7.2f} s   speed x{alone / median:.2f} of alone", flush=True)


if __name__ == "__main__":
    main()
