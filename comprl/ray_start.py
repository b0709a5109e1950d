"""Starting Ray (or joining a cluster) for the runs that use it: the async experience manager, rollout workers,
notebook 05's pinned runs.

Ray waits a fixed 30 s for a freshly started local node to register itself, and gives up with "The current node
timed out during startup". On a laptop whose cores are busy with other work (a training run beside it, CI beside a
CPU-bound neighbour) that wait can run out although nothing is wrong. :func:`start_ray` then shuts the half-started
node down and starts it once more, saying so; a second timeout, or any failure to join ``address``, is raised.
"""

from __future__ import annotations

import warnings
from typing import Any

STARTUP_TIMEOUT = "timed out during startup"
"""Part of the message of the exception Ray raises when a local node does not register in time."""


def start_ray(address: str | None = None, attempts: int = 2, **options: Any) -> None:
    """``ray.init(address=address, **options)`` unless Ray is initialised already; a local start (``address``
    None) that times out is tried again, up to ``attempts`` starts in all."""
    import ray  # a core dependency, loaded only by runs that use it

    if ray.is_initialized():
        return
    for attempt in range(1, attempts + 1):
        try:
            ray.init(address=address, **options)
            return
        except Exception as error:  # Ray raises a bare Exception for this timeout
            if address is not None or STARTUP_TIMEOUT not in str(error) or attempt == attempts:
                raise
            ray.shutdown()
            warnings.warn(
                f"Ray's local node did not register within Ray's 30 s (a busy machine?); starting it again "
                f"({attempt + 1} of {attempts})",
                stacklevel=2,
            )
