"""Summarizers that need no model: deterministic, offline, for tests and for use without a network.

`ExtractiveSummarizer` picks facts out of the conversation instead of
paraphrasing it: the user's requests (the first line of each prompt), the
files the tool calls named, what earlier summaries said, and a few counts.
The same conversation and instructions always give the same text, and the text
never grows past ``max_chars``, however long the conversation.

It does not implement `TokenCounter`: compaction then counts tokens with
`estimate_tokens` and reports them as ``estimated``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import msgspec

from ..spec import Message, TextBlock, ToolResultBlock, ToolUseBlock

__all__ = ["ExtractiveSummarizer"]

_WORD = re.compile(r"\w{4,}")
"""Words of the instructions that count when matching requests: four letters or more."""


class ExtractiveSummarizer:
    """A summary made of lines taken from the conversation.

    The text has, in this order: one line of counts; ``Instructions:`` and the
    first line of the instructions, when given; the files touched (sorted, at
    most ``max_files`` named); the first line of each earlier summary; and the
    user's requests, oldest first. Instructions also decide which requests are
    kept when they do not all fit: those sharing a word of four letters or more
    with the instructions (case-insensitively) come first, under their own
    heading; then the most recent others. Every line is cut at ``line_chars``
    characters and the whole at ``max_chars``; a last line says how many
    requests were left out.
    """

    def __init__(
        self, *, max_chars: int = 2000, line_chars: int = 160, max_files: int = 20
    ) -> None:
        for name, value, least in (
            ("max_chars", max_chars, 200),
            ("line_chars", line_chars, 20),
            ("max_files", max_files, 0),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"{name} must be an int of at least {least}, not {value!r}")
        self.max_chars = max_chars
        self.line_chars = line_chars
        self.max_files = max_files

    async def summarize(self, messages: Sequence[Message], instructions: str | None) -> str:
        """The summary of ``messages`` (see the class docstring); `Summarizer` protocol."""
        return self.extract(messages, instructions)

    def extract(self, messages: Sequence[Message], instructions: str | None) -> str:
        """The summary, computed synchronously."""
        prompts: list[Message] = []
        earlier: list[str] = []
        files: set[str] = set()
        tool_calls = errors = 0
        for message in messages:
            origin = message.origin
            if origin == "prompt":
                prompts.append(message)
            elif origin == "assistant":
                for block in message.blocks:
                    if isinstance(block, ToolUseBlock):
                        tool_calls += 1
                        _add_paths(files, block.arguments)
            elif origin == "tool_results":
                for block in message.blocks:
                    if isinstance(block, ToolResultBlock) and block.is_error:
                        errors += 1
            elif origin == "summary":
                earlier.append(self._first_line(message.blocks))

        head = [
            self._cut(
                f"Summary of {len(messages)} messages: {len(prompts)} requests, "
                f"{tool_calls} tool calls ({errors} failed)."
            )
        ]
        focus: set[str] = set()
        if instructions is not None and instructions.strip():
            first = instructions.strip().splitlines()[0]
            head.append(self._cut(f"Instructions: {first}"))
            focus = {word.casefold() for word in _WORD.findall(instructions)}
        if files:
            named = sorted(files)
            more = len(named) - self.max_files
            listed = ", ".join(named[: self.max_files]) + (f" and {more} more" if more > 0 else "")
            head.append(self._cut(f"Files touched ({len(named)}): {listed}"))
        head.extend(self._cut(f"Earlier summary: {line}") for line in earlier)

        # First lines are taken only of the requests that are looked at: without
        # instructions, the few most recent that fit.
        lines: dict[int, str] = {}

        def request(i: int) -> str:
            if i not in lines:
                lines[i] = self._first_line(prompts[i].blocks)
            return lines[i]

        matching = [i for i in range(len(prompts)) if focus & _words(request(i))] if focus else []
        # Room for request lines, after the head, two headings and the left-out line.
        reserve = len(
            "Requests about the instructions:\nOther requests:\n(0000000 requests left out)"
        )
        room = max(0, self.max_chars - _length(head) - reserve)
        chosen, taken = _latest_fitting(request, matching, room)
        unmatched: Sequence[int] = range(len(prompts))
        if matching:
            unmatched = sorted(set(unmatched) - set(matching))
        recent, _ = _latest_fitting(request, unmatched, room - taken)
        chosen |= recent

        body: list[str] = []
        about = [f"- {request(i)}" for i in matching if i in chosen]
        rest = [f"- {request(i)}" for i in sorted(recent)]
        if about:
            body += ["Requests about the instructions:", *about]
        if rest:
            body += ["Other requests:" if about else "Requests:", *rest]
        if len(chosen) < len(prompts):
            body.append(f"({len(prompts) - len(chosen)} requests left out)")
        return "\n".join(head + body)[: self.max_chars]

    def _first_line(self, blocks: Iterable[object]) -> str:
        for block in blocks:
            if isinstance(block, TextBlock) and not block.text.isspace() and block.text:
                # Only the first line is wanted: no need to split the whole text.
                return self._cut(block.text.lstrip().partition("\n")[0].rstrip())
        return ""

    def _cut(self, line: str) -> str:
        return line if len(line) <= self.line_chars else line[: self.line_chars - 3] + "..."


class _PathArguments(msgspec.Struct):
    """The arguments of a tool call as far as files go; other fields are skipped unread."""

    path: object = None
    file_path: object = None
    filename: object = None
    file: object = None
    paths: object = None


PATH_KEYS: Final = _PathArguments.__struct_fields__
"""Argument names under which a tool call is taken to name the files it touches."""

_decode_paths = msgspec.json.Decoder(_PathArguments).decode


def _add_paths(files: set[str], arguments: str) -> None:
    """Add the file paths a tool call's JSON arguments name under one of `PATH_KEYS`."""
    try:
        decoded = _decode_paths(arguments)
    except msgspec.DecodeError:  # not JSON, or not an object
        return
    for value in (decoded.path, decoded.file_path, decoded.filename, decoded.file, decoded.paths):
        if value is None:
            continue
        if isinstance(value, str):
            if value:
                files.add(value)
        elif isinstance(value, list):
            files.update(v for v in value if isinstance(v, str) and v)


def _words(text: str) -> set[str]:
    return {word.casefold() for word in _WORD.findall(text)}


def _length(lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def _latest_fitting(
    request: Callable[[int], str], indexes: Sequence[int], room: int
) -> tuple[set[int], int]:
    """The most recent of ``indexes`` whose lines fit in ``room`` characters, and their length."""
    chosen: set[int] = set()
    used = 0
    for i in reversed(indexes):
        cost = len(request(i)) + 3  # "- " and the newline
        if used + cost > room:
            break
        chosen.add(i)
        used += cost
    return chosen, used
