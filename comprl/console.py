"""What a run shows while it trains: comprl's own log lines (one per step and evaluation) and progress bars.

In JupyterLab the progress bars are widgets. A headless run (``comprl run``, which sets ``COMPRL_HEADLESS=1``
for the notebook's kernel) gets text progress bars on stderr instead, which the command shows as they move,
and no widget output at all. Other libraries' INFO chatter (NLE's "Not saving any NLE data." per env,
sentence-transformers' loading lines) stays out: :func:`show_logs` routes only the ``comprl`` logger.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, TextIO

HEADLESS = "COMPRL_HEADLESS"
"""Environment variable: ``1`` when no one watches the kernel's rich output (papermill through ``comprl run``)."""


def headless() -> bool:
    return os.environ.get(HEADLESS) == "1"


def show_logs(stream: TextIO | None = None, level: int = logging.INFO) -> logging.Logger:
    """Print comprl's log lines (``level`` and up) to ``stream`` (default: stdout), message only; other
    libraries' loggers are left as they are (headless, their progress bars are turned off). Idempotent."""
    logger = logging.getLogger("comprl")
    logger.setLevel(level)
    logger.propagate = False
    for handler in [h for h in logger.handlers if getattr(h, "_comprl", False)]:
        logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler._comprl = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    if headless():
        quiet_libraries()
    return logger


def quiet_libraries() -> None:
    """Turn off the progress bars transformers shows while loading weights, in this process."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()


def progress(*args: Any, **kwargs: Any) -> Any:
    """A tqdm progress bar: text on stderr when headless, else whatever suits the front end (a widget in Jupyter)."""
    if headless():
        from tqdm import tqdm

        return tqdm(*args, file=sys.stderr, **kwargs)
    from tqdm.auto import tqdm

    return tqdm(*args, **kwargs)
