"""The experience extractor's side of the bank: its prompts, the strict checking of its answers, and bank writes.

Paper: "Complementary Reinforcement Learning", arXiv 2603.17621, section "Experience operations". The extractor
is a second LLM that is called in two ways:

* **Distillation** (:func:`distill_messages`, :func:`parse_distill`): it reads one finished trajectory (the task
  instruction, the outcome, the interaction, and the entries the actor was shown) and answers with at most
  ``max_ops`` = 3 operations: ``add`` a new entry, ``update`` some of the shown entries (replace them by one new
  entry), or ``return`` (change nothing; must be alone).
* **Merge** (:func:`merge_messages`, :func:`parse_merge`): every few actor steps the bank is swept in chunks of at
  most ``merge_chunk`` = 5 entries; for each chunk it may ``merge`` several entries into one, ``rewrite`` one
  entry, ``discard`` entries, or ``return`` (keep all). Entries no operation names stay as they are.

The model thinks first, then writes its answer inside ``<answer>...</answer>``; only the last such block counts.
Two answer styles (:data:`STYLES`):

* ``"json"`` (the paper's): a JSON list of objects, for example::

      [{"op": "add", "title": "...", "content": "..."},
       {"op": "update", "targets": [0, 1], "title": "...", "content": "..."}]
      [{"op": "merge", "targets": [0, 2], "title": "...", "content": "..."}, {"op": "discard", "targets": [1]}]
      [{"op": "return"}]

  Fields per op: ``add`` title, content; ``update``/``merge``/``rewrite`` targets, title, content; ``discard``
  targets; ``return`` nothing. Every listed field is required and no other field is allowed. Targets are a list
  of plain JSON integers (``true``, ``1.0`` and ``"1"`` are not indices).

* ``"lines"`` (ours, for models as small as SmolLM2-135M): one operation per line, no quoting or escaping::

      ADD <title> :: <content>
      UPDATE <i>[,<j>...] <title> :: <content>
      MERGE <i>,<j>[,...] <title> :: <content>
      REWRITE <i> <title> :: <content>
      DISCARD <i>[,<j>...]
      RETURN

  The keyword is the first word of the line; indices are written as digits joined by commas with no spaces
  (``0,2``); the title runs up to the first ``::`` and the content is the rest of the line. Blank lines are
  skipped. An answer needs no brackets, quotes or escapes: keywords, digits, the ``::`` separator and plain text.

* ``"note"`` (ours, for models too small for any operation grammar, such as SmolLM2-135M, which writes no
  valid answer in either style above): the reply is ONE lesson written as plain text. A distillation note is one
  ``add``; a merge note replaces the whole chunk (one ``merge`` of every entry shown). Nothing else is
  expressible, so validation reduces to the text checks (empty, oversize, bad characters) and one more: a
  label is not a lesson. How a note is read:

  - a **label line** is a line whose last visible character is a colon ("Task:", "Objective:", "Here is the
    lesson:", "The actions are:"): it announces what follows and says nothing by itself;
  - a **preamble** is a label line that speaks of the reply rather than the task: it names a lesson or advice
    ("Lesson:", "Sure. Here is the lesson:") or opens with an assent or "here" ("Sure, here it is:");
  - the **lesson line** is the first non-blank line that is not a label line; a ``Lesson:`` or ``Advice:``
    label at its start is dropped.

  The content is the label lines before the lesson line, preambles left out, joined with it by spaces ("Task:" then
  "Reach the stairs." is stored as "Task: Reach the stairs."); its first words are the title. A reply of label lines
  alone is rejected as ``label_only``; later lines are ignored. SmolLM2-135M often puts a label on a line of its
  own, so a note's generation stops only at a line break that ends a line other than a label (:data:`NOTE_STOP`),
  leaving the lesson line room to come.

In the json and lines styles op names are matched case-insensitively. Titles and contents are kept verbatim apart from
stripping surrounding whitespace (in the JSON style, after JSON decoding).

Validation is all-or-nothing: one problem anywhere (see :data:`REJECTION_REASONS`) rejects the whole answer, and
:class:`Parsed` then carries the reason and a readable detail but no operations, so the bank never sees half an
answer. Parsing never raises on any input string. :func:`to_writes` turns a valid answer into the bank's
:class:`~comprl.experience.bank.store.Write` objects, mapping prompt indices [0], [1], ... to bank ids.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Protocol, Sequence

from comprl.config import EXTRACTOR_STYLES as STYLES
from comprl.experience.bank.store import NewEntry, Write

__all__ = [
    "STYLES",
    "DISTILL_OPS",
    "MERGE_OPS",
    "REJECTION_REASONS",
    "ExtractorFormat",
    "EntryLike",
    "Operation",
    "Parsed",
    "render_transcript",
    "distill_messages",
    "merge_messages",
    "parse_distill",
    "parse_merge",
    "to_writes",
    "NOTE_STOP",
    "reply_stop",
]

"""Answer styles: "json" (the paper's operation list), "lines" (one compact line per operation) and "note" (one
plain-text lesson, for the smallest models)."""

NOTE_TITLE_WORDS = 8
"""A note's title: its first words, at most this many (and at most ``max_title_chars``)."""

DISTILL_OPS: tuple[str, ...] = ("add", "update", "return")
"""Operations a distillation answer may hold."""

MERGE_OPS: tuple[str, ...] = ("merge", "rewrite", "discard", "return")
"""Operations a merge answer may hold."""

REJECTION_REASONS: tuple[str, ...] = (
    "no_answer",  # no complete <answer>...</answer> block (the last <answer> must be closed)
    "bad_json",  # json style: the answer is not valid JSON
    "not_a_list",  # json style: valid JSON, but not a list
    "empty_list",  # no operation at all (an unchanged bank is said with an explicit return)
    "too_many_ops",  # more than max_ops (distill) or more than there are entries (merge)
    "bad_type",  # json style: an operation is not an object, or a field has the wrong type
    "unknown_op",  # an op name outside DISTILL_OPS / MERGE_OPS
    "missing_field",  # a required field (or, in the lines style, a part of the line) is absent
    "unexpected_field",  # a field (or trailing text) the op does not take
    "bad_target_count",  # update/discard name none, merge fewer than two, rewrite not exactly one
    "bad_index",  # an index outside [0, n), or (lines style) not written as digits joined by commas
    "duplicate_index",  # an index named twice, in one operation or across operations
    "return_not_alone",  # return together with other operations
    "empty_text",  # a title or content that is empty after stripping whitespace
    "oversize_text",  # a title or content over its character limit
    "bad_text",  # a NUL character or lone surrogate in a text, or a title spanning several lines
    "label_only",  # note style: the reply holds label lines ("Task:") and no line of lesson after them
)
"""Why an extractor answer was rejected; :attr:`Parsed.reason` is always one of these (or None when valid)."""

NOTE_STOP: tuple[str, ...] = tuple(f"{c}\n" for c in map(chr, range(0x21, 0x7F)) if c != ":")
"""Stop strings of a note-style reply: every visible ASCII character but the colon, then a line break. Ours
(issue 68): the engines stop at a fixed string (kept in the reply), so "the first line break after a line that is
not a label" is spelled as all its ASCII endings. A label line ("Task:") or a blank line goes on to the next line,
and the reply ends right after the lesson line, so the extractor is not trained on text that no lesson keeps. A
lesson line that ends in a space or a non-ASCII character runs on to the next such break or to ``max_new_tokens``;
the parser reads the same lesson either way. The old stop, the first line break of any kind, cut the reply
right after its label: 44% of the lessons in notebook 01's committed comp_rl banks were a bare label."""

_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_ANSWER_TAG = re.compile(r"</?answer>", re.IGNORECASE)
_INDEX_LIST = re.compile(r"[0-9]+(?:,[0-9]+)*")
_MAX_INDEX_DIGITS = 9
"""Longer digit runs in the lines style are rejected as out of range before being turned into an int."""
_SEPARATOR = "::"
_LESSON_LABEL = re.compile(r"(?:advice|lesson)\s*:\s*", re.IGNORECASE)
"""A ``Lesson:`` or ``Advice:`` label at the start of a note's lesson line, dropped."""
_PREAMBLE = re.compile(r"\b(?:lessons?|advice)\b|^(?:sure|okay|ok|certainly|of course|here)\b", re.IGNORECASE)
"""A label line that speaks of the reply itself (module docstring): left out of the lesson."""
_CUT_MARK = "\n[... {n} characters cut ...]\n"
_MIN_TRANSCRIPT_CHARS = 200
_SNIPPET_CHARS = 60

# Fields each op takes ("op" aside; in the lines style, its parts), and how many targets it may name (min, max).
_FIELDS: dict[str, tuple[str, ...]] = {
    "add": ("title", "content"),
    "update": ("targets", "title", "content"),
    "merge": ("targets", "title", "content"),
    "rewrite": ("targets", "title", "content"),
    "discard": ("targets",),
    "return": (),
}
_TARGET_COUNT: dict[str, tuple[int, int | None]] = {
    "update": (1, None),
    "merge": (2, None),
    "rewrite": (1, 1),
    "discard": (1, None),
}


@dataclass(frozen=True)
class ExtractorFormat:
    """How the extractor is prompted and what its answers may contain."""

    style: Literal["json", "lines", "note"] = "json"
    """Answer style, one of :data:`STYLES`: "json" (paper), "lines" (compact) or "note" (one plain lesson)."""
    max_ops: int = 3
    """Operations one distillation answer may hold. Paper: 3."""
    max_title_chars: int = 120
    """Longest accepted title, in characters (ours; the paper sets no limit)."""
    max_content_chars: int = 1000
    """Longest accepted content, in characters (ours; the paper sets no limit)."""
    max_transcript_chars: int = 6000
    """Cap on the interaction as rendered into a distillation prompt; longer ones keep their start and end and
    mark the cut (ours: ~2k tokens of text, which with the instructions fits SmolLM2's 8,192-token window)."""
    merge_chunk: int = 5
    """Entries shown per merge call, the size of the sliding window over the bank. Paper: 5."""

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"ExtractorFormat style={self.style!r}; accepted: {', '.join(STYLES)}")
        for name in ("max_ops", "max_title_chars", "max_content_chars", "merge_chunk"):
            if getattr(self, name) < 1:
                raise ValueError(f"ExtractorFormat {name}={getattr(self, name)!r}: must be >= 1")
        if self.max_transcript_chars < _MIN_TRANSCRIPT_CHARS:
            raise ValueError(
                f"ExtractorFormat max_transcript_chars={self.max_transcript_chars!r}: "
                f"must be >= {_MIN_TRANSCRIPT_CHARS}"
            )


class EntryLike(Protocol):
    """What the prompts need of a bank entry (``comprl.experience.bank.Entry`` is one)."""

    @property
    def title(self) -> str: ...

    @property
    def content(self) -> str: ...


@dataclass(frozen=True)
class Operation:
    """One validated operation; ``targets`` are indices into the entries shown in the prompt, not bank ids."""

    op: str
    """One of :data:`DISTILL_OPS` or :data:`MERGE_OPS`."""
    targets: tuple[int, ...] = ()
    """Indices of the prompt's entries this op replaces or deletes (empty for add and return)."""
    title: str = ""
    """Title of the entry this op writes (empty for discard and return)."""
    content: str = ""
    """Content of the entry this op writes (empty for discard and return)."""


@dataclass(frozen=True)
class Parsed:
    """The outcome of checking one extractor answer: valid operations, or a rejection reason and no operations."""

    operations: tuple[Operation, ...] = ()
    reason: str | None = None
    """None when the answer is valid, else one of :data:`REJECTION_REASONS`."""
    detail: str = ""
    """Why it was rejected, in words (empty when valid)."""

    @property
    def valid(self) -> bool:
        return self.reason is None


class _Rejected(Exception):
    """Raised inside the parser at the first problem; caught by :func:`_parse` and turned into a :class:`Parsed`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _snippet(value: Any) -> str:
    """A short description of a (decoded JSON) value for error details; containers are not walked."""
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return f"an object with {len(value)} fields"
    text = repr(value[: _SNIPPET_CHARS] if isinstance(value, str) else value)
    return text if len(text) <= _SNIPPET_CHARS else text[: _SNIPPET_CHARS - 3] + "..."


# --------------------------------------------------------------------------------------------------------------
# Prompts
# --------------------------------------------------------------------------------------------------------------


def render_transcript(messages: Sequence[Mapping[str, str]], max_chars: int) -> str:
    """The interaction of an :class:`~comprl.experience.interface.Episode` as compact text for the extractor.

    System messages are skipped; each user message is an observation and each assistant message the agent's
    reply, labelled with the turn number (``Observation 3:`` then ``Agent 3: north``). Answer tags are removed
    (the agent's ``<answer>north</answer>`` reads ``north``) so that the only answer tags in the extractor's
    prompt are those of its own format. Text longer than ``max_chars`` keeps its start and end, half each,
    around a marker saying how many characters were cut; the result never exceeds ``max_chars``.
    """
    if max_chars < _MIN_TRANSCRIPT_CHARS:
        raise ValueError(f"max_chars={max_chars!r}: must be >= {_MIN_TRANSCRIPT_CHARS}")
    parts = []
    turn = 0
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not isinstance(content, str):
            shown = repr(message)[:_SNIPPET_CHARS]
            raise ValueError(f"transcript message {i} needs string 'role' and 'content', got {shown}")
        if role == "system":
            continue
        content = _ANSWER_TAG.sub("", content).strip()
        if role == "user":
            turn += 1
            parts.append(f"Observation {turn}:\n{content}")
        elif role == "assistant":
            parts.append(f"Agent {turn}: {content}")
        else:
            raise ValueError(f"transcript message {i} has role={role!r}; accepted: system, user, assistant")
    text = "\n".join(parts) if parts else "(no turns were played)"
    if len(text) <= max_chars:
        return text
    keep = max_chars - len(_CUT_MARK.format(n=len(text)))  # the widest the marker can be
    head = keep // 2
    tail = keep - head
    return text[:head] + _CUT_MARK.format(n=len(text) - keep) + text[len(text) - tail :]


def _render_entries(entries: Sequence[EntryLike], fmt: ExtractorFormat) -> str:
    if fmt.style == "note":
        return "\n".join(f"- {e.content}" for e in entries)
    if fmt.style == "lines":
        return "\n".join(f"[{i}] {e.title} {_SEPARATOR} {e.content}" for i, e in enumerate(entries))
    return "\n".join(f"[{i}] title: {e.title}\ncontent: {e.content}" for i, e in enumerate(entries))


def _limits_line(fmt: ExtractorFormat) -> str:
    return (
        f"A title is one line of at most {fmt.max_title_chars} characters; "
        f"a content has at most {fmt.max_content_chars} characters."
    )


_STRICTNESS = (
    "An answer with any error (invalid JSON, a missing or extra field, a number that is not one of the lessons "
    "shown, too many operations, an empty or too long text) is thrown away whole."
)


def _distill_system(fmt: ExtractorFormat) -> str:
    if fmt.style == "note":
        return (
            "You help an agent get better at a text task. Read one finished episode and write ONE short lesson "
            "for its next attempt: what to do, or what to avoid, and when. Answer with the lesson only, as one "
            f"sentence on one line of at most {fmt.max_content_chars} characters."
        )
    if fmt.style == "lines":
        return (
            "You write lessons for an agent from one finished episode of a text task.\n"
            "Give your answer between <answer> and </answer>, one operation per line:\n"
            "ADD title :: content\n"
            "UPDATE 0 title :: content\n"
            "RETURN\n"
            "ADD stores a new lesson. UPDATE replaces the given lessons with these numbers (several: 0,1) by one "
            "new lesson. RETURN changes nothing and must be the only line.\n"
            f"At most {fmt.max_ops} lines. Title: at most {fmt.max_title_chars} characters. "
            f"Content: one line, at most {fmt.max_content_chars} characters.\n"
            "Example:\n"
            "<answer>\n"
            "ADD Read the goal first :: Find the target named in the task, then move straight toward it.\n"
            "</answer>"
        )
    return (
        "You keep a bank of lessons for an agent that plays text tasks. Each lesson has a short title and a "
        "content. You are shown one finished episode: the task, whether the agent succeeded, its turns, and the "
        "lessons it was given before it started (numbered [0], [1], ...; there may be none). Change the bank so "
        "that the next attempt at a similar task goes better.\n"
        "\n"
        "Operations:\n"
        "- add: store a new lesson that none of the given lessons covers.\n"
        '- update: replace one or more given lessons ("targets": their numbers) by one better lesson, for example '
        "to correct a lesson that misled the agent or to join lessons that overlap.\n"
        "- return: leave the bank as it is, when the episode teaches nothing new. It must be the only operation.\n"
        "\n"
        "Good lessons are general (they help on other tasks of this kind), concrete (what to do or avoid, and "
        "when) and short. After a success, keep what worked; after a failure, say what to do instead. "
        f"{_limits_line(fmt)}\n"
        "\n"
        f"Think briefly, then write your answer as a JSON list of at most {fmt.max_ops} operations between "
        "<answer> and </answer>:\n"
        "<answer>\n"
        '[{"op": "add", "title": "<title>", "content": "<content>"},\n'
        ' {"op": "update", "targets": [0], "title": "<title>", "content": "<content>"}]\n'
        "</answer>\n"
        'To change nothing: <answer>[{"op": "return"}]</answer>\n'
        f"{_STRICTNESS}"
    )


def _merge_system(fmt: ExtractorFormat) -> str:
    if fmt.style == "note":
        return (
            "You keep the lessons of an agent short. Combine the lessons below into ONE lesson that keeps what is "
            "useful and drops repeats and mistakes. Answer with the lesson only, as one sentence on one line of at "
            f"most {fmt.max_content_chars} characters."
        )
    if fmt.style == "lines":
        return (
            "You tidy up the lessons of an agent: join repeats, improve unclear lessons, delete bad ones.\n"
            "Give your answer between <answer> and </answer>, one operation per line:\n"
            "MERGE 0,2 title :: content\n"
            "REWRITE 1 title :: content\n"
            "DISCARD 3\n"
            "RETURN\n"
            "MERGE joins two or more lessons into one. REWRITE improves one lesson. DISCARD deletes lessons "
            "(several: 3,4). RETURN keeps all lessons and must be the only line. Lessons you do not name stay. "
            "Name each lesson at most once.\n"
            f"Title: at most {fmt.max_title_chars} characters. "
            f"Content: one line, at most {fmt.max_content_chars} characters."
        )
    return (
        "You keep a bank of lessons for an agent that plays text tasks. Each lesson has a short title and a "
        f"content. You are shown up to {fmt.merge_chunk} lessons from the bank, numbered [0], [1], .... Clean "
        "them up so that the bank stays small, correct and free of repeats.\n"
        "\n"
        "Operations:\n"
        '- merge: join two or more lessons that overlap into one lesson ("targets": their numbers).\n'
        '- rewrite: replace one lesson by a clearer or more general version ("targets": its number).\n'
        '- discard: delete lessons that are wrong, vague or useless ("targets": their numbers).\n'
        "- return: keep every lesson as it is. It must be the only operation.\n"
        "Lessons that no operation names stay as they are; each lesson may be named by at most one operation. "
        f"merge and rewrite write the lesson that survives. {_limits_line(fmt)}\n"
        "\n"
        "Think briefly, then write your answer as a JSON list between <answer> and </answer>:\n"
        "<answer>\n"
        '[{"op": "merge", "targets": [0, 2], "title": "<title>", "content": "<content>"},\n'
        ' {"op": "rewrite", "targets": [3], "title": "<title>", "content": "<content>"},\n'
        ' {"op": "discard", "targets": [1]}]\n'
        "</answer>\n"
        'To change nothing: <answer>[{"op": "return"}]</answer>\n'
        f"{_STRICTNESS}"
    )


def _closing_line(fmt: ExtractorFormat) -> str:
    return "Now write the lesson." if fmt.style == "note" else "Now think briefly and answer."


def distill_messages(
    instruction: str,
    success: bool,
    transcript: Sequence[Mapping[str, str]],
    used: Sequence[EntryLike],
    fmt: ExtractorFormat,
) -> list[dict[str, str]]:
    """The chat (system, user) asking the extractor what one finished trajectory should change in the bank.

    Args:
        instruction: the task instruction the actor was given (``Trajectory.instruction``).
        success: whether the episode succeeded.
        transcript: ``Trajectory.messages``, rendered with :func:`render_transcript` under
            ``fmt.max_transcript_chars``.
        used: the entries the actor was shown, in order; the answer refers to them as [0], [1], ...
        fmt: answer style and limits.
    """
    if fmt.style == "json":
        lessons = _render_entries(used, fmt) if used else "none, so only add and return are possible"
    elif fmt.style == "lines":
        lessons = _render_entries(used, fmt) if used else "none, so only ADD and RETURN are possible"
    else:
        lessons = _render_entries(used, fmt) if used else "none"
    outcome = "success (the agent completed the task)" if success else "failure (the agent did not complete the task)"
    user = (
        f"Task:\n{instruction.strip()}\n\n"
        f"Outcome: {outcome}\n\n"
        f"Lessons given to the agent:\n{lessons}\n\n"
        f"Episode:\n{render_transcript(transcript, fmt.max_transcript_chars)}\n\n"
        f"{_closing_line(fmt)}"
    )
    return [{"role": "system", "content": _distill_system(fmt)}, {"role": "user", "content": user}]


def merge_messages(entries: Sequence[EntryLike], fmt: ExtractorFormat) -> list[dict[str, str]]:
    """The chat (system, user) asking the extractor to merge, rewrite or discard a chunk of bank entries.

    ``entries`` holds 1 to ``fmt.merge_chunk`` entries; the answer refers to them as [0], [1], ...
    """
    if not 1 <= len(entries) <= fmt.merge_chunk:
        raise ValueError(f"merge chunk of {len(entries)} entries; accepted: 1 to merge_chunk={fmt.merge_chunk}")
    user = f"Lessons:\n{_render_entries(entries, fmt)}\n\n{_closing_line(fmt)}"
    return [{"role": "system", "content": _merge_system(fmt)}, {"role": "user", "content": user}]


# --------------------------------------------------------------------------------------------------------------
# Parsing and validation
# --------------------------------------------------------------------------------------------------------------


def parse_distill(text: str, n_used: int, fmt: ExtractorFormat) -> Parsed:
    """Check a distillation answer against the ``n_used`` entries its prompt showed.

    Valid: 1 to ``fmt.max_ops`` operations among add / update / return, update targets in ``[0, n_used)`` and
    named once across the answer, return alone, texts non-empty and within the limits.
    """
    return _parse(text, n_used, fmt, DISTILL_OPS, fmt.max_ops)


def parse_merge(text: str, n_entries: int, fmt: ExtractorFormat) -> Parsed:
    """Check a merge answer against the chunk of ``n_entries`` entries its prompt showed.

    Valid: merge / rewrite / discard operations that each name their own entries of ``[0, n_entries)`` (so at
    most ``n_entries`` operations), or a lone return; texts non-empty and within the limits.
    """
    return _parse(text, n_entries, fmt, MERGE_OPS, max(n_entries, 1))


def _parse(text: str, n: int, fmt: ExtractorFormat, allowed: tuple[str, ...], max_ops: int) -> Parsed:
    if not isinstance(text, str):
        raise ValueError(f"extractor output must be a str, got {type(text).__name__}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"number of entries shown must be an int >= 0, got {n!r}")
    try:
        if fmt.style == "note":
            return Parsed(operations=(_note_operation(text, n, allowed, fmt),))
        answer = _answer_block(text)
        items = _json_items(answer) if fmt.style == "json" else _line_items(answer)
        if not items:
            raise _Rejected("empty_list", "the answer holds no operation; use return to change nothing")
        if len(items) > max_ops:
            raise _Rejected("too_many_ops", f"{len(items)} operations; at most {max_ops} are accepted")
        parse_item = _json_operation if fmt.style == "json" else _line_operation
        operations = tuple(_checked(parse_item(item, k, allowed), k, n, fmt) for k, item in enumerate(items))
        _check_together(operations)
    except _Rejected as rejected:
        return Parsed(reason=rejected.reason, detail=rejected.detail)
    return Parsed(operations=operations)


def reply_stop(fmt: ExtractorFormat) -> tuple[str, ...]:
    """The stop strings that end an extractor reply in ``fmt``'s style: :data:`NOTE_STOP` for a note, the closing
    answer tag otherwise."""
    return NOTE_STOP if fmt.style == "note" else ("</answer>",)


def _note_text(text: str) -> str:
    """The lesson a note-style reply holds (module docstring): the label lines before its first lesson line,
    preambles left out, joined with that line by spaces; "" when the reply is blank. Raises :class:`_Rejected`
    (``label_only``) for a reply of label lines alone."""
    labels: list[str] = []
    seen_label = False
    for line in (line.strip() for line in text.split("\n")):
        if not line:
            continue
        if line.endswith(":"):
            seen_label = True
            if not _PREAMBLE.search(line):
                labels.append(line)
            continue
        label = _LESSON_LABEL.match(line)
        return " ".join([*labels, line[label.end() :] if label else line])
    if seen_label:
        raise _Rejected("label_only", f"the reply holds only label lines, no lesson after them: {_snippet(text)}")
    return ""


def _note_operation(text: str, n: int, allowed: tuple[str, ...], fmt: ExtractorFormat) -> Operation:
    """A note: its lesson (:func:`_note_text`) is the content, its first words the title."""
    content = _note_text(text)
    title = " ".join(content.split()[:NOTE_TITLE_WORDS])[: fmt.max_title_chars].strip()
    if allowed == DISTILL_OPS:
        return _checked(Operation("add", (), title, content), 0, n, fmt)
    return _checked(Operation("merge", tuple(range(n)), title, content), 0, n, fmt)


def _answer_block(text: str) -> str:
    """The text inside the last ``<answer>`` and the first ``</answer>`` after it."""
    opening = None
    for opening in _ANSWER_OPEN.finditer(text):
        pass
    if opening is None:
        raise _Rejected("no_answer", "no <answer> tag")
    closing = _ANSWER_CLOSE.search(text, opening.end())
    if closing is None:
        raise _Rejected("no_answer", "the last <answer> is not closed by </answer>")
    return text[opening.end() : closing.start()]


def _json_items(answer: str) -> list[Any]:
    try:
        value = json.loads(answer)
    except (ValueError, RecursionError) as error:  # JSONDecodeError is a ValueError; deep nesting recurses
        raise _Rejected("bad_json", f"the answer is not valid JSON: {str(error)[:_SNIPPET_CHARS]}") from None
    if not isinstance(value, list):
        raise _Rejected("not_a_list", f"the answer must be a JSON list of operations, got {type(value).__name__}")
    return value


def _line_items(answer: str) -> list[str]:
    return [line.strip() for line in answer.split("\n") if line.strip()]


def _op_name(name: str, k: int, allowed: tuple[str, ...]) -> str:
    op = name.lower() if name.isascii() else name
    if op not in allowed:
        raise _Rejected("unknown_op", f"operation {k} is {_snippet(name)}; accepted: {', '.join(allowed)}")
    return op


def _json_operation(item: Any, k: int, allowed: tuple[str, ...]) -> Operation:
    """Read one JSON operation object; types are checked here, values in :func:`_checked`."""
    if not isinstance(item, dict):
        raise _Rejected("bad_type", f"operation {k} must be a JSON object, got {_snippet(item)}")
    if "op" not in item:
        raise _Rejected("missing_field", f"operation {k} has no 'op' field")
    if not isinstance(item["op"], str):
        raise _Rejected("bad_type", f"operation {k}: 'op' must be a string, got {_snippet(item['op'])}")
    op = _op_name(item["op"], k, allowed)
    fields = _FIELDS[op]
    for name in fields:
        if name not in item:
            raise _Rejected("missing_field", f"operation {k} ({op}) has no {name!r} field")
    for name in item:
        if name != "op" and name not in fields:
            raise _Rejected("unexpected_field", f"operation {k} ({op}) does not take a {_snippet(name)} field")
    targets: tuple[int, ...] = ()
    if "targets" in fields:
        raw = item["targets"]
        if not isinstance(raw, list):
            raise _Rejected("bad_type", f"operation {k} ({op}): 'targets' must be a list, got {_snippet(raw)}")
        for target in raw:
            if type(target) is not int:  # rejects bool (an int subclass), float, str, null
                raise _Rejected("bad_type", f"operation {k} ({op}): target {_snippet(target)} is not an integer")
        targets = tuple(raw)
    texts = {}
    for name in ("title", "content"):
        if name in fields:
            if not isinstance(item[name], str):
                got = _snippet(item[name])
                raise _Rejected("bad_type", f"operation {k} ({op}): {name!r} must be a string, got {got}")
            texts[name] = item[name].strip()
    return Operation(op, targets, texts.get("title", ""), texts.get("content", ""))


def _line_operation(line: str, k: int, allowed: tuple[str, ...]) -> Operation:
    """Read one line ``KEYWORD [indices] [title :: content]``; values are checked in :func:`_checked`."""
    keyword, rest = _split_first(line)
    op = _op_name(keyword, k, allowed)
    fields = _FIELDS[op]
    targets: tuple[int, ...] = ()
    if "targets" in fields:
        if not rest:
            raise _Rejected("missing_field", f"operation {k} ({keyword}) names no entries: {_snippet(line)}")
        indices, rest = _split_first(rest)
        targets = _line_indices(indices, k, keyword)
    if "title" not in fields:
        if rest:
            raise _Rejected("unexpected_field", f"operation {k} ({keyword}) has extra text {_snippet(rest)}")
        return Operation(op, targets)
    title, separator, content = rest.partition(_SEPARATOR)
    if not separator:
        wanted = f"'title {_SEPARATOR} content'"
        raise _Rejected("missing_field", f"operation {k} ({keyword}) needs {wanted}: {_snippet(line)}")
    return Operation(op, targets, title.strip(), content.strip())


def _split_first(text: str) -> tuple[str, str]:
    """The first whitespace-separated word of ``text`` and the rest, stripped."""
    parts = text.split(None, 1)
    return parts[0], parts[1].strip() if len(parts) == 2 else ""


def _line_indices(word: str, k: int, keyword: str) -> tuple[int, ...]:
    if not _INDEX_LIST.fullmatch(word):
        raise _Rejected("bad_index", f"operation {k} ({keyword}): {_snippet(word)} is not a list of numbers like 0,2")
    digits = word.split(",")
    if any(len(d) > _MAX_INDEX_DIGITS for d in digits):
        raise _Rejected("bad_index", f"operation {k} ({keyword}): index {_snippet(word)} is out of range")
    return tuple(int(d) for d in digits)


def _checked(operation: Operation, k: int, n: int, fmt: ExtractorFormat) -> Operation:
    """Check the values of one operation: target count, range and repeats, then its texts."""
    op, targets = operation.op, operation.targets
    if op in _TARGET_COUNT:
        low, high = _TARGET_COUNT[op]
        if len(targets) < low or (high is not None and len(targets) > high):
            wanted = f"exactly {low}" if low == high else f"at least {low}"
            raise _Rejected("bad_target_count", f"operation {k} ({op}) names {len(targets)} entries; it needs {wanted}")
    for target in targets:
        if not 0 <= target < n:
            shown = f"[0, {n - 1}]" if n else "none (no entries were shown)"
            raise _Rejected("bad_index", f"operation {k} ({op}): index {_snippet(target)} out of range; shown: {shown}")
    if len(set(targets)) != len(targets):
        raise _Rejected("duplicate_index", f"operation {k} ({op}) names an entry twice: {list(targets)}")
    if "title" in _FIELDS[op]:
        _check_text(operation.title, "title", fmt.max_title_chars, k, op)
        _check_text(operation.content, "content", fmt.max_content_chars, k, op)
    return operation


def _check_text(text: str, name: str, limit: int, k: int, op: str) -> None:
    if not text:
        raise _Rejected("empty_text", f"operation {k} ({op}) has an empty {name}")
    if len(text) > limit:
        raise _Rejected("oversize_text", f"operation {k} ({op}): {name} has {len(text)} characters; at most {limit}")
    if "\x00" in text or any("\ud800" <= ch <= "\udfff" for ch in text):
        raise _Rejected("bad_text", f"operation {k} ({op}): {name} holds a NUL character or a lone surrogate")
    if name == "title" and len(text.splitlines()) > 1:
        raise _Rejected("bad_text", f"operation {k} ({op}): the title spans several lines: {_snippet(text)}")


def _check_together(operations: tuple[Operation, ...]) -> None:
    """Rules across operations: return stands alone, and no entry is named by two operations."""
    if len(operations) > 1 and any(o.op == "return" for o in operations):
        raise _Rejected("return_not_alone", f"return must be the only operation, got {[o.op for o in operations]}")
    seen: set[int] = set()
    for k, operation in enumerate(operations):
        repeated = seen.intersection(operation.targets)
        if repeated:
            raise _Rejected("duplicate_index", f"operation {k} ({operation.op}) names entry {min(repeated)} again")
        seen.update(operation.targets)


# --------------------------------------------------------------------------------------------------------------
# Bank writes
# --------------------------------------------------------------------------------------------------------------


def to_writes(parsed: Parsed, ids: Sequence[int]) -> list[Write]:
    """The bank writes of a valid answer, in answer order; prompt index i becomes bank id ``ids[i]``.

    add -> ``Write("add")``; update, merge and rewrite -> ``Write("update")`` replacing their targets by one new
    entry; discard -> ``Write("discard")``; return -> nothing. Raises ValueError for a rejected answer or an index
    with no id (both programming errors: only valid answers, checked against ``len(ids)`` entries, come here).
    """
    if parsed.reason is not None:
        raise ValueError(f"cannot write a rejected answer (reason={parsed.reason!r}: {parsed.detail})")
    writes = []
    for operation in parsed.operations:
        if operation.op not in _FIELDS:
            raise ValueError(f"unknown operation {operation.op!r}; accepted: {', '.join(_FIELDS)}")
        for target in operation.targets:
            if not 0 <= target < len(ids):
                raise ValueError(f"{operation.op} target {target!r} has no bank id (got {len(ids)} ids)")
        targets = tuple(ids[t] for t in operation.targets)
        if operation.op == "add":
            writes.append(Write("add", entry=NewEntry(operation.title, operation.content)))
        elif operation.op in ("update", "merge", "rewrite"):
            writes.append(Write("update", targets=targets, entry=NewEntry(operation.title, operation.content)))
        elif operation.op == "discard":
            writes.append(Write("discard", targets=targets))
    return writes


# --------------------------------------------------------------------------------------------------------------
# search_and_ask: the actor's mid-episode question, answered by rewriting one bank entry
# --------------------------------------------------------------------------------------------------------------


def _refine_system(fmt: ExtractorFormat) -> str:
    task = (
        "An agent playing a text task stopped to ask a question, and the closest lesson in its bank is shown. "
        "Rewrite that lesson so that it answers the question: keep what helps with it, drop what does not apply, "
        "and say plainly what to do. Do not claim more than the lesson supports."
    )
    if fmt.style == "note":
        return (
            f"{task} Answer with the advice only, as one sentence on one line of at most "
            f"{fmt.max_content_chars} characters."
        )
    if fmt.style == "lines":
        return (
            f"{task}\n"
            f"Give the advice between <answer> and </answer> as plain text of at most {fmt.max_content_chars} "
            "characters.\n"
            "Example:\n"
            "<answer>\n"
            "The goal is often out of sight: walk along the walls until it appears, then go straight to it.\n"
            "</answer>"
        )
    return (
        f"{task} The advice has at most {fmt.max_content_chars} characters.\n"
        "\n"
        "Think briefly, then write your answer as a JSON object between <answer> and </answer>:\n"
        "<answer>\n"
        '{"content": "<advice>"}\n'
        "</answer>\n"
        "An answer that is not such an object (invalid JSON, a missing or extra field) or whose advice is empty "
        "or too long is thrown away."
    )


def _render_entry(entry: EntryLike, fmt: ExtractorFormat) -> str:
    if fmt.style == "note":
        return entry.content
    if fmt.style == "lines":
        return f"{entry.title} {_SEPARATOR} {entry.content}"
    return f"title: {entry.title}\ncontent: {entry.content}"


def refine_messages(entry: EntryLike, query: str, fmt: ExtractorFormat) -> list[dict[str, str]]:
    """The chat (system, user) asking the extractor to rewrite one bank entry as an answer to the actor's question.

    This is the extractor's side of the search_and_ask tool: the manager retrieves ``entry`` for ``query`` (the
    text the actor wrote inside :data:`~comprl.experience.interface.SEARCH_TAG`) and shows the extractor both; the
    rewrite is what the actor reads next. The answer follows ``fmt.style`` (checked by :func:`parse_refine`).
    """
    question = query.strip() or "(the agent wrote no question)"
    closing = "Now write the advice." if fmt.style == "note" else "Now think briefly and answer."
    user = f"Question from the agent:\n{question}\n\nLesson:\n{_render_entry(entry, fmt)}\n\n{closing}"
    return [{"role": "system", "content": _refine_system(fmt)}, {"role": "user", "content": user}]


def parse_refine(text: str, fmt: ExtractorFormat) -> str | None:
    """The advice of a :func:`refine_messages` answer, or None when the answer is rejected.

    json style: the last ``<answer>`` block must hold a JSON object whose only field is a string ``content``;
    lines style: the advice is the text of the last ``<answer>`` block; note style: the reply read as a note's
    content is (module docstring; a reply of labels alone is rejected). The advice, stripped of surrounding
    whitespace, must be non-empty, at most ``fmt.max_content_chars`` long and free of NUL characters and lone
    surrogates, the checks an entry's content passes. Never raises on any string; a non-string is a programming
    error (ValueError).
    """
    if not isinstance(text, str):
        raise ValueError(f"extractor output must be a str, got {type(text).__name__}")
    try:
        if fmt.style == "note":
            advice = _note_text(text)
        elif fmt.style == "lines":
            advice = _answer_block(text)
        else:
            advice = _json_advice(_answer_block(text))
        advice = advice.strip()
        _check_text(advice, "content", fmt.max_content_chars, 0, "refine")
    except _Rejected:
        return None
    return advice


def _json_advice(answer: str) -> str:
    try:
        value = json.loads(answer)
    except (ValueError, RecursionError):
        raise _Rejected("bad_json", "the answer is not valid JSON") from None
    if not isinstance(value, dict) or set(value) != {"content"} or not isinstance(value["content"], str):
        raise _Rejected("bad_type", 'the answer must be {"content": "<advice>"}')
    return value["content"]


__all__ += ["refine_messages", "parse_refine"]
