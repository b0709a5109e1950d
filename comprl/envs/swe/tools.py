"""SWE-lite's tools: parsing the actor's tool call, and the ``str_replace_editor`` file editor.

The actor answers with one tool call as JSON inside answer tags, in the usual function-calling shape::

    <answer>{"name": "bash", "arguments": {"command": "pytest -q tests"}}</answer>
    <answer>{"name": "str_replace_editor", "arguments": {"command": "str_replace", "path": "/repo/pkg/mod.py",
             "old_str": "return a < b", "new_str": "return a <= b"}}</answer>
    <answer>{"name": "submit", "arguments": {}}</answer>

`parse_tool_call` turns the answer into a `ToolCall` or raises `ToolCallError` with a message meant for the
actor (what exactly was wrong). `Editor` runs the editor's commands on the host side of the workspace;
every path must resolve (symbolic links followed) inside the workspace, so ``../`` and absolute paths
elsewhere are refused. Editor mistakes (an ``old_str`` that is not unique, a missing file) are answered as
tool output, like a real tool would, not as invalid actions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from comprl.envs.swe.sandbox import WORKSPACE_MOUNT

TOOLS: Mapping[str, str] = {
    "bash": '{"command": "<shell command>"}: run it in the repository folder (no network; output and time are limited)',
    "str_replace_editor": (
        '{"command": "view", "path": ...} (optional "view_range": [first, last]); '
        '{"command": "create", "path": ..., "file_text": ...}; '
        '{"command": "str_replace", "path": ..., "old_str": ..., "new_str": ...} (old_str must occur exactly once); '
        '{"command": "insert", "path": ..., "insert_line": N, "new_str": ...} (inserted after line N, 0 = top)'
    ),
    "submit": "{}: end the episode; your changes to the repository are graded by the hidden tests",
}
"""Each tool's arguments, as the actor is told about them."""

_EDITOR_ARGUMENTS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    # command: (required, optional) argument names besides "command" and "path"
    "view": (frozenset(), frozenset({"view_range"})),
    "create": (frozenset({"file_text"}), frozenset()),
    "str_replace": (frozenset({"old_str"}), frozenset({"new_str"})),
    "insert": (frozenset({"insert_line", "new_str"}), frozenset()),
}
MAX_VIEW_CHARS = 12_000
"""A file view longer than this is cut, with a hint to use ``view_range``."""
MAX_FILE_CHARS = 200_000
"""Largest file the editor creates or edits."""
_SNIPPET_CONTEXT = 4
_LINES_NAMED = 10
"""Lines named when an ``old_str`` is not unique (the first ones)."""
_HIDDEN_NAMES = frozenset({"__pycache__", ".pytest_cache", ".git"})


class ToolCallError(ValueError):
    """The actor's answer is not a well-formed tool call; the message says why."""


@dataclass(frozen=True)
class ToolCall:
    """One validated tool call."""

    name: str
    arguments: Mapping[str, Any]

    def canonical(self) -> str:
        """The call as compact JSON with sorted keys (the env's canonical action text)."""
        return json.dumps({"name": self.name, "arguments": dict(self.arguments)}, sort_keys=True)


def _strip_fence(text: str) -> str:
    """Drop a surrounding Markdown code fence (```json ... ```), which models often add."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and len(stripped) >= 6:
        stripped = stripped[3:-3]
        first_line, _, rest = stripped.partition("\n")
        stripped = rest if first_line.strip().isalpha() or not first_line.strip() else stripped
    return stripped.strip()


def _check_types(arguments: Mapping[str, Any]) -> None:
    for name in ("command", "path", "file_text", "old_str", "new_str"):
        if name in arguments and not isinstance(arguments[name], str):
            raise ToolCallError(f'"{name}" must be a string')
    if "insert_line" in arguments and (
        isinstance(arguments["insert_line"], bool) or not isinstance(arguments["insert_line"], int)
    ):
        raise ToolCallError('"insert_line" must be an integer')
    view_range = arguments.get("view_range")
    if view_range is not None and not (
        isinstance(view_range, list)
        and len(view_range) == 2
        and all(isinstance(item, int) and not isinstance(item, bool) for item in view_range)
    ):
        raise ToolCallError('"view_range" must be a list of two integers [first, last] (last -1 = end of file)')


def _check_editor(arguments: Mapping[str, Any]) -> None:
    command = arguments.get("command")
    if command not in _EDITOR_ARGUMENTS:
        raise ToolCallError(f'str_replace_editor "command" must be one of {", ".join(_EDITOR_ARGUMENTS)}')
    required, optional = _EDITOR_ARGUMENTS[command]
    missing = sorted(({"path"} | required) - arguments.keys())
    if missing:
        raise ToolCallError(f"str_replace_editor {command} needs {', '.join(missing)}")
    unknown = sorted(arguments.keys() - {"command", "path"} - required - optional)
    if unknown:
        raise ToolCallError(f"str_replace_editor {command} does not take {', '.join(unknown)}")
    if command == "str_replace" and not arguments["old_str"]:
        raise ToolCallError('"old_str" must not be empty')


def parse_tool_call(text: str) -> ToolCall:
    """Validate one answer as a tool call (see the module docstring); `ToolCallError` says what is wrong."""
    body = _strip_fence(text)
    if not body:
        raise ToolCallError("the answer is empty")
    try:
        call = json.loads(body)
    except json.JSONDecodeError as error:
        raise ToolCallError(f"the answer is not valid JSON ({error.msg} at line {error.lineno} column {error.colno})")
    if not isinstance(call, dict):
        raise ToolCallError('the answer must be a JSON object {"name": ..., "arguments": {...}}')
    unknown = sorted(call.keys() - {"name", "arguments"})
    if unknown:
        raise ToolCallError(f'unexpected keys {", ".join(unknown)}: use {{"name": ..., "arguments": {{...}}}}')
    name, arguments = call.get("name"), call.get("arguments", {})
    if name not in TOOLS:
        raise ToolCallError(f'"name" must be one of {", ".join(TOOLS)}, got {json.dumps(name)[:40]}')
    if not isinstance(arguments, dict):
        raise ToolCallError('"arguments" must be a JSON object')
    _check_types(arguments)
    if name == "bash":
        if set(arguments) != {"command"} or not arguments["command"].strip():
            raise ToolCallError('bash takes exactly one argument, a non-empty "command"')
    elif name == "str_replace_editor":
        _check_editor(arguments)
    elif arguments:
        raise ToolCallError("submit takes no arguments")
    return ToolCall(name, arguments)


def _numbered(lines: list[str], first: int) -> str:
    """Lines prefixed with their 1-based numbers, as ``cat -n`` prints them."""
    return "\n".join(f"{number:6d}\t{line}" for number, line in enumerate(lines, start=first))


class Editor:
    """``str_replace_editor`` over the workspace folder `root`, which the actor knows as `mount`."""

    def __init__(self, root: Path, mount: str = WORKSPACE_MOUNT) -> None:
        self.root = root.resolve()
        self.mount = mount

    def run(self, arguments: Mapping[str, Any]) -> str:
        """Run one validated editor call and return its output (errors start with ``Error:``)."""
        try:
            path = self._resolve(arguments["path"])
            command = arguments["command"]
            if command == "view":
                return self._view(path, arguments.get("view_range"))
            if command == "create":
                return self._create(path, arguments["file_text"])
            if command == "str_replace":
                return self._str_replace(path, arguments["old_str"], arguments.get("new_str", ""))
            return self._insert(path, arguments["insert_line"], arguments["new_str"])
        except _EditorError as error:
            return f"Error: {error}"

    def _shown(self, path: Path) -> str:
        """The path as the actor sees it (under `mount`)."""
        relative = path.relative_to(self.root)
        return str(PurePosixPath(self.mount) / relative) if str(relative) != "." else self.mount

    def _resolve(self, raw: str) -> Path:
        if "\x00" in raw or not raw.strip():
            raise _EditorError("the path is empty or contains a NUL character")
        posix = PurePosixPath(raw.strip())
        if posix.is_absolute():
            try:
                posix = posix.relative_to(self.mount)
            except ValueError:
                raise _EditorError(f"{raw} is outside the repository; paths must be under {self.mount}")
        resolved = (self.root / posix).resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise _EditorError(f"{raw} resolves outside the repository {self.mount}")
        return resolved

    def _read(self, path: Path) -> str:
        if not path.exists():
            raise _EditorError(f"{self._shown(path)} does not exist")
        if not path.is_file():
            raise _EditorError(f"{self._shown(path)} is not a file")
        if path.stat().st_size > MAX_FILE_CHARS:
            raise _EditorError(f"{self._shown(path)} is larger than {MAX_FILE_CHARS} bytes; inspect it with bash")
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise _EditorError(f"{self._shown(path)} is not a UTF-8 text file")

    def _write(self, path: Path, text: str) -> None:
        if len(text) > MAX_FILE_CHARS:
            raise _EditorError(f"the new content is longer than {MAX_FILE_CHARS} characters")
        path.write_text(text, encoding="utf-8")

    def _view(self, path: Path, view_range: list[int] | None) -> str:
        if path.is_dir():
            if view_range is not None:
                raise _EditorError("view_range applies to files, not folders")
            return self._listing(path)
        lines = self._read(path).split("\n")
        first, last = 1, len(lines)
        if view_range is not None:
            first, last = view_range[0], len(lines) if view_range[1] == -1 else view_range[1]
            if not 1 <= first <= last <= len(lines):
                raise _EditorError(f"view_range {view_range} is not within lines 1..{len(lines)} of the file")
        text = _numbered(lines[first - 1 : last], first)
        if len(text) > MAX_VIEW_CHARS:
            text = text[:MAX_VIEW_CHARS] + "\n[... cut: view a smaller view_range to see the rest ...]"
        return f"Lines {first}-{last} of {self._shown(path)}:\n{text}"

    def _listing(self, folder: Path) -> str:
        """Files and folders up to two levels below `folder` (hidden and cache folders left out), cut after
        `MAX_VIEW_CHARS` characters. Links are shown with ``@`` and never followed, so the listing says nothing
        of what they point to."""
        paths = []
        for path in _visible_children(folder):
            paths.append(path)
            if path.is_dir() and not path.is_symlink():
                paths += _visible_children(path)
        shown, length = [], 0
        for path in sorted(paths):
            line = self._shown(path) + ("@" if path.is_symlink() else "/" if path.is_dir() else "")
            length += len(line) + 1
            if length > MAX_VIEW_CHARS:
                shown.append(f"[... cut: {len(paths) - len(shown)} more entries; list them with bash ...]")
                break
            shown.append(line)
        return f"Files and folders in {self._shown(folder)}, two levels deep:\n" + "\n".join(shown)

    def _create(self, path: Path, text: str) -> str:
        if path.exists():
            raise _EditorError(f"{self._shown(path)} already exists; edit it with str_replace or insert")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._write(path, text)
        return f"Created {self._shown(path)} ({len(text.splitlines())} lines)."

    def _str_replace(self, path: Path, old: str, new: str) -> str:
        text = self._read(path)
        count = text.count(old)
        if count == 0:
            raise _EditorError(
                f"old_str was not found verbatim in {self._shown(path)}; view the file and copy it exactly"
            )
        if count > 1:
            lines = sorted({text.count("\n", 0, index) + 1 for index in _occurrences(text, old, _LINES_NAMED)})
            named = ", ".join(map(str, lines)) + (", ..." if count > _LINES_NAMED else "")
            raise _EditorError(
                f"old_str occurs {count} times in {self._shown(path)} (lines {named}); "
                "include more surrounding lines to make it unique"
            )
        start_line = text[: text.index(old)].count("\n")
        self._write(path, text.replace(old, new))
        return self._edited(path, start_line, new.count("\n") + 1)

    def _insert(self, path: Path, after: int, new: str) -> str:
        lines = self._read(path).split("\n")
        if not 0 <= after <= len(lines):
            raise _EditorError(f"insert_line {after} is not within 0..{len(lines)}")
        self._write(path, "\n".join([*lines[:after], *new.split("\n"), *lines[after:]]))
        return self._edited(path, after, new.count("\n") + 1)

    def _edited(self, path: Path, first_changed: int, changed: int) -> str:
        """Confirmation with the edited region and a few lines around it, numbered."""
        lines = path.read_text(encoding="utf-8").split("\n")
        start = max(first_changed - _SNIPPET_CONTEXT, 0)
        end = min(first_changed + changed + _SNIPPET_CONTEXT, len(lines))
        return f"Edited {self._shown(path)}. The changed region now reads:\n{_numbered(lines[start:end], start + 1)}"


def _occurrences(text: str, part: str, limit: int) -> list[int]:
    """Where `part` starts in `text`, its first `limit` occurrences."""
    found, start = [], text.find(part)
    while start != -1 and len(found) < limit:
        found.append(start)
        start = text.find(part, start + 1)
    return found


def _visible_children(folder: Path) -> list[Path]:
    """The entries of `folder` that listings show (hidden names and caches left out)."""
    with os.scandir(folder) as entries:
        return [
            Path(entry.path) for entry in entries if not entry.name.startswith(".") and entry.name not in _HIDDEN_NAMES
        ]


class _EditorError(Exception):
    """An editor call that cannot be carried out; its message is shown to the actor."""
