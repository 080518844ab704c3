"""What a backend factory is given: the store's path, the codec, and options.

A backend author writes one factory, ``make(ctx: BackendContext) -> Checkpointer``
(or an async function returning one), importable as ``module:function``. The kit
calls it once per handle it wants: calling it again with the same ``ctx.path``
must reopen the same store, and the kit's worker processes call it too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeAlias

import msgspec

from .codec import Codec
from .protocol import Checkpointer

__all__ = ["BackendContext", "BackendFactory"]


class BackendContext(msgspec.Struct, frozen=True):
    """Everything a factory needs to open (or reopen) one store.

    ``path`` is a directory that belongs to this store alone and already exists;
    the backend may create anything it likes inside it and nothing outside it
    (ID-003). ``codec`` is the codec the backend must pass every payload through
    (None: store payloads as they are); backends without CODEC ignore it.
    ``options`` carries backend-specific settings given on the command line
    (``--option key=value``), as strings.
    """

    path: Path
    codec: Codec | None = None
    options: dict[str, str] = msgspec.field(default_factory=dict)


BackendFactory: TypeAlias = Callable[[BackendContext], "Checkpointer | Awaitable[Checkpointer]"]
"""The shape of ``make``: synchronous or async, returning a Checkpointer."""
