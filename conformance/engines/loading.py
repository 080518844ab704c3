"""Finding and calling a backend's factory.

A backend is named either by a built-in short name (``memory``, ``file``,
``sqlite``) or as ``module:function``. The function takes a `BackendContext` and
returns a Checkpointer, or an awaitable of one. Worker processes import the same
name, so it must be importable from a fresh interpreter.
"""

from __future__ import annotations

import importlib
import shlex
import sysconfig
import traceback
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import cast

import msgspec

from ...spec import BackendContext, BackendFactory, Checkpointer
from .provenance import BackendHandle, blame_backend

__all__ = [
    "BUILTIN_BACKENDS",
    "BackendLoadError",
    "BackendRef",
    "NotACheckpointerError",
    "checkpointer_shortfall",
    "open_checkpointer",
    "parse_options",
    "process_backend",
    "resolve_backend",
]

BUILTIN_BACKENDS: dict[str, str] = {
    "memory": "checkpointspec.backends.memory:make",
    "file": "checkpointspec.backends.file:make",
    "sqlite": "checkpointspec.backends.sqlite:make",
    "postgres": "checkpointspec.backends.postgres:make",
}


class BackendLoadError(Exception):
    """The backend name cannot be resolved to a working factory (a usage error, exit 2)."""


class NotACheckpointerError(TypeError):
    """A factory returned something that is not a Checkpointer (it lacks some of its members)."""


CHECKPOINTER_MEMBERS: tuple[str, ...] = (
    "append",
    "read",
    "head",
    "list_sessions",
    "delete",
    "truncate",
    "check_integrity",
    "close",
    "capabilities",
)
"""What every Checkpointer has, operations it does not support included (those raise
`UnsupportedOperationError`): the members of the `Checkpointer` protocol."""


def checkpointer_shortfall(made: object) -> list[str]:
    """The `Checkpointer` members ``made`` lacks (empty when it has them all)."""
    return [name for name in CHECKPOINTER_MEMBERS if not hasattr(made, name)]


def _import_failure(module_name: str, exc: BaseException) -> str:
    """One line naming the module, where importing it failed and the error."""
    if isinstance(exc, ModuleNotFoundError) and exc.name is not None:
        # The module, or a package above it, is not on the path: no line of the
        # author's is at fault, and the kit's own frame would only mislead.
        if exc.name == module_name:
            return f"cannot import {module_name!r}: {exc}"
        if module_name.startswith(f"{exc.name}."):
            return (
                f"cannot import {module_name!r}: no package {exc.name!r} "
                "(is its folder on PYTHONPATH?)"
            )
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{exc.filename}:{exc.lineno}"
        return f"cannot import {module_name!r}: {where}: SyntaxError: {exc.msg}"
    # The deepest frame outside the standard library is the line the author wrote
    # (importlib's own frames are frozen; a stdlib call the module made is not its line).
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    own = [f for f in frames if not Path(f.filename).resolve().is_relative_to(stdlib)]
    chosen = own or frames
    where = f"{chosen[-1].filename}:{chosen[-1].lineno}: " if chosen else ""
    return f"cannot import {module_name!r}: {where}{type(exc).__name__}: {exc}"


class BackendRef(msgspec.Struct, frozen=True):
    """A resolved backend: the name the user gave and its importable ``module:function``."""

    name: str
    target: str

    def load(self) -> BackendFactory:
        """Import the factory. Raises `BackendLoadError` with a one-line reason, also when
        importing the module raises anything (a syntax error names its file and line)."""
        module_name, _, attribute = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # any import-time error is the backend module's: a usage error
            raise BackendLoadError(_import_failure(module_name, exc)) from exc
        target: object = module
        for part in attribute.split("."):
            try:
                target = getattr(target, part)
            except AttributeError:
                raise BackendLoadError(f"{module_name!r} has no attribute {attribute!r}") from None
        if not callable(target):
            raise BackendLoadError(f"{self.target} is not callable")
        return cast(BackendFactory, target)


def resolve_backend(name: str) -> BackendRef:
    """Turn a built-in name or ``module:function`` into a `BackendRef` (not yet imported)."""
    if name in BUILTIN_BACKENDS:
        return BackendRef(name, BUILTIN_BACKENDS[name])
    module_name, sep, attribute = name.partition(":")
    if not sep or not module_name or not attribute:
        known = ", ".join(sorted(BUILTIN_BACKENDS))
        raise BackendLoadError(f"unknown backend {name!r}: use one of {known} or module:function")
    return BackendRef(name, name)


STDIO_FACTORY = "checkpointspec.backends.stdio:make"
"""The factory of every ``--process`` backend: a `StdioCheckpointer` per handle."""


def process_backend(command: str, *, validate: bool = False) -> tuple[BackendRef, dict[str, str]]:
    """The backend behind ``--process COMMAND``, and the options its factory needs (the
    command, and schema validation when ``validate``); merge them into the run's options.

    Its name is the command line a replay needs (``--process 'node b.js'``).
    """
    if not command.strip():
        raise BackendLoadError("--process needs a command, e.g. --process 'node my-backend.js'")
    try:
        shlex.split(command)
    except ValueError as exc:
        raise BackendLoadError(f"--process {command!r}: {exc}") from None
    name = f"--process {shlex.quote(command)}" + (" --validate-protocol" if validate else "")
    options = {"process": command} | ({"validate_protocol": "1"} if validate else {})
    return BackendRef(name, STDIO_FACTORY), options


def parse_options(pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (``--option``) as a dict; `BackendLoadError` for any other shape."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BackendLoadError(f"option {pair!r} is not KEY=VALUE")
        options[key] = value
    return options


async def open_checkpointer(factory: BackendFactory, ctx: BackendContext) -> Checkpointer:
    """Call the factory, await its result if needed, and return the handle as a
    `BackendHandle`, which notes every exception the backend raises (so does this
    function for the factory's own).

    Raises `NotACheckpointerError` (noted as the factory's) when the factory's
    result lacks a member of the `Checkpointer` protocol, naming them.
    """
    try:
        made = factory(ctx)
        opened: object = await made if isinstance(made, Awaitable) else made
        missing = checkpointer_shortfall(opened)
        if missing:
            name = (
                f"{getattr(factory, '__module__', '?')}:{getattr(factory, '__qualname__', factory)}"
            )
            raise NotACheckpointerError(
                f"the factory {name} returned {type(opened).__name__}, which is not a "
                f"Checkpointer: it lacks {', '.join(missing)}"
            )
    except Exception as exc:
        blame_backend(exc, "factory")
        raise
    return BackendHandle.wrap(cast(Checkpointer, opened))
