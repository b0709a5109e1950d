"""Starting Ray (or joining a cluster) for the runs that use it: the async experience manager, rollout workers,
notebook 05's pinned runs.

With no address, :func:`start_ray` starts a node of this process's own, whatever the machine holds. Ray's own
choice (``ray.init()``) joins the cluster ``RAY_ADDRESS`` names, else the one the world-writable
``/tmp/ray/ray_current_cluster`` names: on a shared machine, another user's job. The node comprl starts

- listens on loopback alone: Ray's single-machine mode (its default on macOS, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``),
  where on Linux its servers would listen on every interface;
- keeps its sockets, logs and session files in a folder of this process's (mode 0700, removed at exit), not in
  ``/tmp/ray``, which Ray makes writable by everyone;
- accepts only callers holding a token of its own (Ray's token authentication, ``RAY_AUTH_MODE=token``), passed
  to its processes in their environment, which other users cannot read (Ray's default token,
  ``~/.ray/auth_token``, is written readable by all and shared by every cluster of the user).

These settings are made for the start alone: the process's environment is as it was once ``ray.init`` returns.

Ray waits a fixed 30 s for a freshly started local node to register itself, and gives up with "The current node
timed out during startup". On a laptop whose cores are busy with other work (a training run beside it, CI beside a
CPU-bound neighbour) that wait can run out although nothing is wrong. :func:`start_ray` then shuts the half-started
node down and starts it once more, saying so; a second timeout, or any failure to join ``address``, is raised.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import secrets
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STARTUP_TIMEOUT = "timed out during startup"
"""Part of the message of the exception Ray raises when a local node does not register in time."""

PRIVATE_NODE = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token"}
"""The environment of a private node's processes, its token aside: loopback only, token authentication."""


def start_ray(address: str | None = None, attempts: int = 2, **options: Any) -> None:
    """Joins the cluster at ``address`` (``ray.init(address=address, **options)``), or with None starts a node of
    this process's own (see the module), unless Ray is initialised already; a local start that times out is tried
    again, up to ``attempts`` starts in all."""
    import ray  # a core dependency, loaded only by runs that use it

    if ray.is_initialized():
        return
    if address is not None:
        _reload_auth()  # the token of the cluster joined, not a private node's of an earlier start
        ray.init(address=address, **options)
        return
    for attempt in range(1, attempts + 1):
        try:
            with _private_node():
                ray.init(address="local", _temp_dir=str(_private_folder()), **options)
            return
        except Exception as error:  # Ray raises a bare Exception for this timeout
            if STARTUP_TIMEOUT not in str(error) or attempt == attempts:
                raise
            ray.shutdown()
            warnings.warn(
                f"Ray's local node did not register within Ray's 30 s (a busy machine?); starting it again "
                f"({attempt + 1} of {attempts})",
                stacklevel=2,
            )


@contextlib.contextmanager
def _private_node() -> Iterator[None]:
    """The environment a private node's processes inherit (loopback only, token authentication with a new token),
    and the driver's copy of the loopback switch (Ray reads it from the environment once, on import)."""
    from ray._private import ray_constants

    settings = {**PRIVATE_NODE, "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    saved = {name: os.environ.get(name) for name in settings}
    clusters = ray_constants.ENABLE_RAY_CLUSTER
    os.environ.update(settings)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        _reload_auth()
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = clusters
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _reload_auth() -> None:
    """Makes Ray read its authentication mode and token from the environment afresh: it keeps the first it read in
    the process, an earlier start's."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


@functools.cache
def _private_folder() -> Path:
    """Ray's temp dir for this process's nodes, inside a folder only this user can enter (Ray makes the temp dir
    itself writable by all); removed when the process exits. In the system's temp dir as Ray's default is: on macOS
    /tmp, not the long $TMPDIR, as the path of a Unix socket (the node's lie in there) holds at most 104 bytes."""
    folder = tempfile.mkdtemp(prefix="comprl-ray-", dir="/tmp" if sys.platform == "darwin" else None)
    atexit.register(_remove, folder)
    return Path(folder) / "ray"


def _remove(folder: str) -> None:
    """Stops this process's node (its processes write into ``folder`` until they end), then removes ``folder``."""
    import ray

    ray.shutdown()
    shutil.rmtree(folder, ignore_errors=True)
