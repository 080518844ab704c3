"""Naming and opening a backend: a built-in name or ``module:function`` → a factory → a handle.

Everything that turns text a user typed into an open `Checkpointer` lives here,
for every program that does it: the kit's CLI and pytest plugin, its worker
processes and killed-restore children, the operator commands, and the stdio
server. So there is one table of built-in names (`BUILTIN_BACKENDS`), one
importer of ``module:name`` (`import_object`), one list of the members a
Checkpointer has (`CHECKPOINTER_MEMBERS`, read off the `Checkpointer` protocol),
and one set of errors a user sees, each a `BackendLoadError` with a one-line
message naming what to fix.

The steps, each usable on its own:

1. `resolve_backend` turns a name into a `BackendRef` (nothing imported yet);
   `process_backend` does it for ``--process COMMAND``.
2. `BackendRef.load` (or `load_factory`) imports the factory. Its module runs
   once per process (Python keeps it in ``sys.modules``), so the kit can load
   per check, per worker or per handle at no cost.
3. `open_backend` calls the factory with a `BackendContext`, awaits it if it is
   async, and checks that the result has every member of the protocol.

`BackendTarget` puts them together: the backend to open with its options and
codec, as one value that is built once and handed on whole. It is the one place
that loads the factory in a process (`BackendTarget.factory`), builds a
`BackendContext` (`BackendTarget.context`), and says how another process opens
the same backend (`BackendTarget.argv`, `BackendTarget.env`).

This module knows nothing of the session layer or the kit: it may import only
`checkpointspec.spec`. The kit wraps the handles it opens in its own way
(`checkpointspec.conformance.engines.target.provenance.open_checkpointer`).
"""

from __future__ import annotations

import importlib
import os
import shlex
import sys
import sysconfig
import traceback
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Final, cast

import msgspec

from ..spec import BackendContext, BackendFactory, Checkpointer, Codec

__all__ = [
    "BUILTIN_BACKENDS",
    "CHECKPOINTER_MEMBERS",
    "STDIO_FACTORY",
    "BackendLoadError",
    "BackendOptionError",
    "BackendRef",
    "BackendTarget",
    "FactoryFailedError",
    "MissingAttributeError",
    "ModuleImportError",
    "NotACheckpointerError",
    "NotCallableError",
    "UnknownBackendError",
    "checkpointer_shortfall",
    "import_object",
    "load_factory",
    "open_backend",
    "parse_options",
    "process_backend",
    "resolve_backend",
]

BUILTIN_BACKENDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "memory": "checkpointspec.backends.memory:make",
        "file": "checkpointspec.backends.file:make",
        "sqlite": "checkpointspec.backends.sqlite:make",
        "postgres": "checkpointspec.backends.postgres:make",
    }
)
"""The backends a user can name without a module: short name → ``module:function``."""

STDIO_FACTORY: Final = "checkpointspec.backends.stdio:make"
"""The factory of every ``--process`` backend: a `StdioCheckpointer` per handle."""


# -- errors ----------------------------------------------------------------------------------


class BackendLoadError(Exception):
    """A backend (or another ``module:name``) cannot be named, imported or opened.

    A usage error: the message is one line saying what is wrong, and nothing was
    run or written. The kit exits with status 2 on it.
    """


class UnknownBackendError(BackendLoadError):
    """``name`` is neither a built-in backend nor of the form ``module:function``."""

    def __init__(self, name: str) -> None:
        known = ", ".join(sorted(BUILTIN_BACKENDS))
        super().__init__(f"unknown backend {name!r}: use one of {known} or module:function")
        self.name = name


class ModuleImportError(BackendLoadError):
    """Importing ``module`` failed; the message says where (the author's own line,
    or the file and line of a syntax error) and the error. The original exception
    is the ``__cause__``."""

    def __init__(self, module: str, error: BaseException) -> None:
        super().__init__(_import_failure(module, error))
        self.module = module


class MissingAttributeError(BackendLoadError):
    """``module`` imports but has no ``attribute`` (which may be dotted)."""

    def __init__(self, module: str, attribute: str) -> None:
        super().__init__(f"{module!r} has no attribute {attribute!r}")
        self.module = module
        self.attribute = attribute


class NotCallableError(BackendLoadError):
    """``target`` names something that cannot be called, so it is no factory."""

    def __init__(self, target: str) -> None:
        super().__init__(f"{target} is not callable")
        self.target = target


class NotACheckpointerError(BackendLoadError, TypeError):
    """The factory ``factory`` returned a ``returned`` lacking the protocol members ``missing``.

    Raised when a handle is opened (not when the factory is imported): what a
    factory returns is only known by calling it.
    """

    def __init__(self, factory: str, returned: str, missing: Sequence[str]) -> None:
        super().__init__(
            f"the factory {factory} returned {returned}, which is not a "
            f"Checkpointer: it lacks {', '.join(missing)}"
        )
        self.factory = factory
        self.returned = returned
        self.missing = tuple(missing)


class FactoryFailedError(BackendLoadError):
    """Calling the factory ``factory`` raised ``error`` (also the ``__cause__``).

    Raised by callers that open a handle only to use the store, where a failing
    factory is a usage error (the kit's probe, the operator commands); a check
    keeps the factory's own exception as evidence instead. The message is one
    line: the error's type, the first line of its text and, when more follow (a
    stdio child's stderr), the last, which is where a crash says what went wrong.
    """

    def __init__(self, factory: str, error: BaseException) -> None:
        super().__init__(
            f"the factory {factory} failed: {type(error).__name__}: {_first_and_last(str(error))}"
        )
        self.factory = factory
        self.error = error


def _first_and_last(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) <= 1:
        return message.strip()
    return f"{lines[0]} ... {lines[-1]}"


class BackendOptionError(BackendLoadError):
    """A backend option (``--option KEY=VALUE``, ``--process COMMAND``) is malformed."""


# -- importing ``module:name`` -----------------------------------------------------------------


def _import_failure(module_name: str, exc: BaseException) -> str:
    """One line naming the module, where importing it failed and the error."""
    if isinstance(exc, ModuleNotFoundError) and exc.name is not None:
        # The module, or a package above it, is not on the path: no line of the
        # author's is at fault, and the importer's own frame would only mislead.
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


def _import_module(module_name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # whatever importing raises is the module's own: a usage error
        raise ModuleImportError(module_name, exc) from exc


def _look_up(module: ModuleType, module_name: str, attribute: str) -> object:
    found: object = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise MissingAttributeError(module_name, attribute) from None
    return found


def import_object(target: str) -> object:
    """The object ``MODULE:NAME`` names, imported (``NAME`` may be dotted: ``pkg.mod:Cls.make``);
    for a bare ``MODULE``, the module itself.

    Raises `ModuleImportError` when the module does not import, whatever it
    raised (the message names the module, the file and line at fault and the
    error), and `MissingAttributeError` when it lacks ``NAME``. Not cached: use
    `load_factory` for a backend's factory.
    """
    module_name, _, attribute = target.partition(":")
    module = _import_module(module_name)
    return _look_up(module, module_name, attribute) if attribute else module


def load_factory(target: str) -> BackendFactory:
    """The factory ``module:function`` names, imported once per process.

    Python's import system keeps the module in ``sys.modules``, so a later call
    with the same ``target`` runs none of the module again and returns the same
    object; a module Python has dropped is imported afresh, and a failed import
    is tried again by the next call.

    Raises `ModuleImportError`, `MissingAttributeError` or `NotCallableError`.
    """
    found = import_object(target)
    if not callable(found):
        raise NotCallableError(target)
    return cast(BackendFactory, found)


# -- naming a backend --------------------------------------------------------------------------


class BackendRef(msgspec.Struct, frozen=True):
    """A resolved backend: the name the user gave and its importable ``module:function``.

    ``name`` is what a replay command repeats (a built-in name, ``module:function``
    or ``--process 'COMMAND'``); ``target`` is what a worker process imports.
    """

    name: str
    target: str

    def load(self) -> BackendFactory:
        """The factory, imported once per process (`load_factory`). Raises a
        `BackendLoadError` with a one-line reason, also when importing the module
        raises anything (a syntax error names its file and line)."""
        return load_factory(self.target)


def resolve_backend(name: str) -> BackendRef:
    """Turn a built-in name or ``module:function`` into a `BackendRef` (not yet imported).

    Raises `UnknownBackendError` for anything else.
    """
    if name in BUILTIN_BACKENDS:
        return BackendRef(name, BUILTIN_BACKENDS[name])
    module_name, sep, attribute = name.partition(":")
    if not sep or not module_name or not attribute:
        raise UnknownBackendError(name)
    return BackendRef(name, name)


def process_backend(command: str, *, validate: bool = False) -> tuple[BackendRef, dict[str, str]]:
    """The backend behind ``--process COMMAND``, and the options its factory needs (the
    command, and schema validation when ``validate``); merge them into the run's options.

    Its name is the command line a replay needs (``--process 'node b.js'``). Raises
    `BackendOptionError` for an empty command or one the shell could not split.
    """
    if not command.strip():
        raise BackendOptionError("--process needs a command, e.g. --process 'node my-backend.js'")
    try:
        shlex.split(command)
    except ValueError as exc:
        raise BackendOptionError(f"--process {command!r}: {exc}") from None
    name = f"--process {shlex.quote(command)}" + (" --validate-protocol" if validate else "")
    options = {"process": command} | ({"validate_protocol": "1"} if validate else {})
    return BackendRef(name, STDIO_FACTORY), options


def parse_options(pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (``--option``) as a dict; `BackendOptionError` for any other shape."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BackendOptionError(f"option {pair!r} is not KEY=VALUE")
        options[key] = value
    return options


# -- opening a handle --------------------------------------------------------------------------


def _protocol_members(protocol: type) -> tuple[str, ...]:
    """The public members ``protocol`` declares: its operations in the order it declares
    them, then its attributes (properties and annotated names)."""
    declared = {name: value for name, value in vars(protocol).items() if not name.startswith("_")}
    operations = [name for name, value in declared.items() if callable(value)]
    attributes = [name for name, value in declared.items() if not callable(value)]
    annotated = [name for name in vars(protocol).get("__annotations__", {}) if name not in declared]
    return (*operations, *attributes, *annotated)


CHECKPOINTER_MEMBERS: Final = _protocol_members(Checkpointer)
"""What every Checkpointer has, operations it does not support included (those raise
`UnsupportedOperationError`): the members of the `Checkpointer` protocol."""


def checkpointer_shortfall(made: object) -> list[str]:
    """The `Checkpointer` members ``made`` lacks (empty when it has them all)."""
    return [name for name in CHECKPOINTER_MEMBERS if not hasattr(made, name)]


def _factory_name(factory: BackendFactory) -> str:
    module = getattr(factory, "__module__", "?")
    return f"{module}:{getattr(factory, '__qualname__', factory)}"


async def open_backend(factory: BackendFactory, ctx: BackendContext) -> Checkpointer:
    """Call ``factory(ctx)``, await its result if it is awaitable, and return the handle.

    Whatever the factory raises propagates unchanged. Raises `NotACheckpointerError`
    when the result lacks a member of the `Checkpointer` protocol, naming them all.
    """
    made = factory(ctx)
    opened: object = await made if isinstance(made, Awaitable) else made
    missing = checkpointer_shortfall(opened)
    if missing:
        raise NotACheckpointerError(_factory_name(factory), type(opened).__name__, missing)
    return cast(Checkpointer, opened)


# -- the backend under test as one value -------------------------------------------------------


class BackendTarget(msgspec.Struct, frozen=True):
    """A backend to open: what (``ref``), with which options and codec; built once, carried whole.

    It goes whole to every place that opens the backend, in this process or
    another, and it is the one place that loads the factory (`factory`), makes
    a `BackendContext` (`context`) and says how a child process opens the same
    backend (`argv`, `env`). It pickles and encodes as it is (with no codec: a
    codec lives in one process), so a child given it as JSON has the same value.
    """

    ref: BackendRef
    """The backend: its name as the user gave it and the ``module:function`` imported."""
    options: dict[str, str] = msgspec.field(default_factory=dict)
    """What the factory gets in `BackendContext.options`."""
    codec: Codec | None = None
    """What the factory gets in `BackendContext.codec` unless a handle is given its own."""

    @classmethod
    def named(cls, name: str, options: Mapping[str, str] | None = None) -> BackendTarget:
        """The backend a built-in name or ``module:function`` names (`resolve_backend`;
        nothing imported yet), with ``options``."""
        return cls(resolve_backend(name), dict(options or {}))

    def factory(self) -> BackendFactory:
        """The factory, imported once per process (`load_factory`); a `BackendLoadError`
        with a one-line reason if it cannot be."""
        return self.ref.load()

    def context(
        self,
        path: Path,
        *,
        codec: Codec | None = None,
        options: Mapping[str, str] | None = None,
    ) -> BackendContext:
        """The `BackendContext` that opens the store at ``path``: this target's options
        with ``options`` added over them, and ``codec`` if given, else this target's."""
        return BackendContext(
            path=path,
            codec=codec if codec is not None else self.codec,
            options={**self.options, **(options or {})},
        )

    async def open(
        self,
        path: Path,
        *,
        codec: Codec | None = None,
        options: Mapping[str, str] | None = None,
    ) -> Checkpointer:
        """A handle on the store at ``path``, opened in this process (`open_backend`)."""
        return await open_backend(self.factory(), self.context(path, codec=codec, options=options))

    def argv(self, program: str) -> list[str]:
        """The command that runs the Python module ``program`` for this backend in a new
        process: this interpreter, ``-m program``, and the ``module:function`` it imports
        (the options reach it with each handle it opens)."""
        return [sys.executable, "-m", program, self.ref.target]

    def env(self) -> dict[str, str]:
        """The environment of that process: this one's, with this interpreter's import path,
        so ``module:function`` imports there as it does here."""
        return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
