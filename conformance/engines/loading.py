"""Finding and calling a backend's factory.

A backend is named either by a built-in short name (``memory``, ``file``,
``sqlite``) or as ``module:function``. The function takes a `BackendContext` and
returns a Checkpointer, or an awaitable of one. Worker processes import the same
name, so it must be importable from a fresh interpreter.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Sequence
from typing import cast

import msgspec

from ...spec import BackendContext, BackendFactory, Checkpointer
from .provenance import BackendHandle, blame_backend

__all__ = [
    "BUILTIN_BACKENDS",
    "BackendLoadError",
    "BackendRef",
    "open_checkpointer",
    "parse_options",
    "resolve_backend",
]

BUILTIN_BACKENDS: dict[str, str] = {
    "memory": "checkpointspec.backends.memory:make",
    "file": "checkpointspec.backends.file:make",
    "sqlite": "checkpointspec.backends.sqlite:make",
}


class BackendLoadError(Exception):
    """The backend name cannot be resolved to a working factory (a usage error, exit 2)."""


class BackendRef(msgspec.Struct, frozen=True):
    """A resolved backend: the name the user gave and its importable ``module:function``."""

    name: str
    target: str

    def load(self) -> BackendFactory:
        """Import the factory. Raises `BackendLoadError` with a one-line reason."""
        module_name, _, attribute = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise BackendLoadError(f"cannot import {module_name!r}: {exc}") from exc
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
    function for the factory's own)."""
    try:
        made = factory(ctx)
        opened: Checkpointer = await made if isinstance(made, Awaitable) else made
    except Exception as exc:
        blame_backend(exc, "factory")
        raise
    return BackendHandle.wrap(opened)
