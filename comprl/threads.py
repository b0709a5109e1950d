"""How comprl's processes share the CPU with other work: OpenMP threads that wait passively, and a niceness that
counts. Both run at ``import comprl``.

**Passive waits.** How torch's OpenMP threads wait: passively, so that a busy neighbour on the same cores does not
starve them.

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

**Niceness of a new session.** On Linux with autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``),
CFS first shares the CPU fairly between sessions, then between the processes of each; a nice value only weighs a
process against others of its own session. papermill starts every notebook kernel in a session of its own
(jupyter_client's ``start_new_session``), so the kernel of ``nice -n 19 comprl reproduce`` and the runs it starts
took a core half and half with the user's other work instead of yielding it (measured: a pinned single-thread
forward pass beside the niced runs processed 189 tokens/s, 281 on the quiet core; 279-297 once the kernel's session
got the nice value). A process that leads its own session (a kernel) therefore gives that session its own nice
value when it is above 0. A process in a session it does not lead (a script run from a terminal, whose session is
the shell's) leaves the session alone.
"""

from __future__ import annotations

import os
from pathlib import Path

AUTOGROUP = Path("/proc/self/autogroup")
"""This process's scheduler autogroup and its nice value (``/autogroup-123 nice 0``); absent without autogroup."""


def wait_passively() -> None:
    """Default ``OMP_WAIT_POLICY`` to ``PASSIVE`` unless the user chose how OpenMP threads wait."""
    if "GOMP_SPINCOUNT" not in os.environ:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def nice_own_session() -> None:
    """Give this process's autogroup its own nice value, when it is above 0 and the process leads its session
    (see the module); nothing where the platform has no autogroup or refuses the write."""
    try:
        nice = os.nice(0)
        if nice <= 0 or os.getsid(0) != os.getpid():
            return
        if int(AUTOGROUP.read_text().split()[-1]) < nice:
            AUTOGROUP.write_text(str(nice))
    except (OSError, ValueError, IndexError, AttributeError):  # no autogroup, not Linux, or the write refused
        return
