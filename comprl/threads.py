"""How torch's OpenMP threads wait: passively, so that a busy neighbour on the same cores does not starve them.

torch's CPU build runs its intra-op threads on GNU OpenMP (libgomp; ``torch.__config__.parallel_info()``). Between
two parallel regions libgomp's threads spin for about 3 ms by default (``GOMP_SPINCOUNT`` 300,000) before they
sleep. On a quiet machine that saves a wake-up; beside a CPU-bound process on the same cores a spinning thread
burns the time slice its sibling needs, and a decode step (hundreds of tiny parallel regions) waits for threads
that are spinning or descheduled. With ``OMP_WAIT_POLICY=PASSIVE`` they sleep at once: on 2 cores beside two
CPU-bound processes a SmolLM2-135M generation ran 10x faster, and without them no slower
(``benchmarks/neighbour_load.py`` prints both).

libgomp reads its environment once, when torch first loads it, so this must run before ``import torch``:
``comprl/__init__.py`` calls it, and every process comprl starts (parallel runs, Ray workers, notebook kernels)
inherits the variable. A value the user set (``OMP_WAIT_POLICY=ACTIVE``, or ``GOMP_SPINCOUNT``, which libgomp
lets win over the policy) is kept.
"""

from __future__ import annotations

import os


def wait_passively() -> None:
    """Default ``OMP_WAIT_POLICY`` to ``PASSIVE`` unless the user chose how OpenMP threads wait."""
    if "GOMP_SPINCOUNT" not in os.environ:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
