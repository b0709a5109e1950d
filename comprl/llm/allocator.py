"""Two process-wide memory settings for CPU runs, applied once when :mod:`comprl.llm` is imported. A value the user
set in the environment wins over both.

- oneDNN, behind torch's CPU matrix products, keeps a compiled kernel per shape it meets, up to 1,024 by default. A
  rollout's shapes change every turn, and those kernels held ~0.35 GB of the cpu demo's 3.44 GB peak after 4 steps
  of two runs (notebook 01's code, in-process); 64 of them keep the step times, 16 made updates ~30% slower. oneDNN
  reads ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` once, at its first kernel.
- glibc's malloc gives a block above its mmap threshold (128 KiB) pages of its own and returns them on free, but it
  raises that threshold, up to 32 MiB, each time such a block is freed. After the first turns of a rollout, its KV
  caches, logits and activations come from the heap, whose freed holes the process keeps. One cpu comp_rl step in
  one process (RSS sampled at 20 Hz): resident memory grew from 1.15 to 2.33 GB and peaked at 2.36 GB; with the
  threshold pinned at 128 KiB (``mallopt(M_MMAP_THRESHOLD)``, what ``MALLOC_MMAP_THRESHOLD_=131072`` does) it grew
  to 1.60 GB and peaked at 1.90 GB. Steps took as long: 18.9 vs 19.2 s side by side in ``benchmarks/cpu_step.py``,
  whose variant ``malloc_threshold_32m`` pins the threshold where glibc's rule ends. glibc only (Linux); elsewhere,
  or with ``MALLOC_MMAP_THRESHOLD_`` set, nothing changes.
"""

from __future__ import annotations

import ctypes
import os
import sys

ONEDNN_CACHE_CAPACITY = 64
"""Kernels oneDNN keeps (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``; its default: 1,024)."""
MMAP_THRESHOLD = 128 * 1024
"""Bytes from which glibc's malloc gives a block pages of its own, pinned (glibc's starting value, then dynamic)."""
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number, from glibc's malloc.h


def apply() -> None:
    """Set both, unless the environment already chose."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(ONEDNN_CACHE_CAPACITY))
    if sys.platform.startswith("linux") and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        try:
            libc = ctypes.CDLL("libc.so.6")
            libc.gnu_get_libc_version  # glibc only: musl has a mallopt that ignores this parameter
        except (OSError, AttributeError):
            return
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
