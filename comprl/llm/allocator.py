"""Keeping a CPU run's resident memory near what it uses: glibc's free heap pages handed back after each
generation batch and each update (oneDNN's kernel cache, the other lever, is capped in :mod:`comprl.llm`).

- glibc's malloc gives a block above its mmap threshold pages of its own, returned on free, but it raises that
  threshold (from 128 KiB up to 32 MiB) each time such a block is freed. After a rollout's first turns, its KV
  caches, logits and activations come from the heap, whose freed pages the process keeps, so resident memory
  grows. ``malloc_trim`` after each generation batch and each update (:func:`release_free_memory`) hands those
  pages back. Pinning the threshold at 128 KiB instead (``MALLOC_MMAP_THRESHOLD_=131072``) keeps memory lower
  still but makes evaluations much slower, their time spent in the kernel mapping and zeroing fresh pages.
- ``COMPRL_MALLOC_TRIM=0`` turns the trims off.
"""

from __future__ import annotations

import ctypes
import os
import sys


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc and trimming is on (``COMPRL_MALLOC_TRIM`` is not ``0``), else None."""
    if not sys.platform.startswith("linux") or os.environ.get("COMPRL_MALLOC_TRIM", "1") == "0":
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim  # noqa: B018 - glibc's, absent from musl
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _glibc()


def release_free_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``; nothing elsewhere or when off)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
