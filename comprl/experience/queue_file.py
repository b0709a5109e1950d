"""Episodes as JSON lines: the queue a manager persists on close (``experience.shutdown="persist"``) and the
queue a checkpoint keeps, read back with every line checked."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from comprl.experience.interface import Episode


def queue_path(bank_path: str | Path) -> Path:
    """Where ``close`` persists undistilled episodes (``shutdown="persist"``) for a resumed run."""
    return Path(f"{bank_path}.queue.jsonl")


def write_episodes(path: Path, episodes: Sequence[Episode]) -> None:
    """Episodes as JSON lines (a persisted queue, a checkpoint's queue)."""
    path.write_text("".join(json.dumps(asdict(e)) + "\n" for e in episodes))


_EPISODE_FIELDS = {
    "task": str, "seed": int, "step": int, "index": int, "instruction": str, "messages": list, "success": bool,
    "guided": bool, "experience_ids": list,
}


def read_episodes(path: Path) -> list[Episode]:
    """The episodes :func:`write_episodes` wrote; a line that is not one is refused, naming the file and line."""
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError as error:
        raise ValueError(f"queue file {path} is not UTF-8 text ({error}); it holds one JSON episode per line") from None
    episodes = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            problem = f"is not JSON ({error})"
        else:
            problem = _not_an_episode(data)
        if problem:
            fields = ", ".join(f"{name} ({kind.__name__})" for name, kind in _EPISODE_FIELDS.items())
            raise ValueError(
                f"queue file {path}, line {number}: {problem}; accepted: one JSON object per line with {fields}"
            )
        data.update(messages=tuple(data["messages"]), experience_ids=tuple(data["experience_ids"]))
        episodes.append(Episode(**data))
    return episodes


def _not_an_episode(data: Any) -> str | None:
    """What keeps one parsed line of a queue file from being an :class:`Episode`; None when nothing does."""
    if not isinstance(data, dict):
        return f"is a JSON {type(data).__name__}, not an object"
    if missing := sorted(set(_EPISODE_FIELDS) - set(data)):
        return f"lacks {', '.join(missing)}"
    if unknown := sorted(set(data) - set(_EPISODE_FIELDS)):
        return f"has unknown fields {', '.join(unknown)}"
    for name, kind in _EPISODE_FIELDS.items():
        if not isinstance(data[name], kind) or (kind is int and isinstance(data[name], bool)):
            return f"has {name}={data[name]!r}, not a {kind.__name__}"
    if not all(isinstance(m, dict) and {"role", "content"} <= set(m) and all(isinstance(v, str) for v in m.values())
               for m in data["messages"]):
        return "has a message that is not an object of strings with a role and a content"
    if not all(type(i) is int for i in data["experience_ids"]):
        return "has experience_ids that are not all ints"
    return None
