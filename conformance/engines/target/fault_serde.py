"""A LangGraph saver's serializer made to fail on command.

A LangGraph saver serialises every value through its ``serde`` attribute
(``dumps_typed`` to store, ``loads_typed`` to read), set when it is made and read
at each call. `FaultySerde` takes that attribute's place, passes every call on to
the saver's own serializer, and raises `SerdeFault` at the n-th ``dumps_typed`` or
``loads_typed`` it is told to: what a value the serializer cannot handle, or
stored bytes it cannot read, does to a graph. It counts the calls, so the checks
learn how many values a call serialises before they make each one fail.
"""

from __future__ import annotations

__all__ = ["FaultySerde", "SerdeFault"]


class SerdeFault(Exception):
    """What `FaultySerde` raises in place of the saver's serializer."""


class FaultySerde:
    """The saver's ``serde``, wrapped: fails at the ``fail_dumps``-th ``dumps_typed``
    or the ``fail_loads``-th ``loads_typed`` counted from when they were set (None:
    never). Anything else is the wrapped serializer's."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.dumps = 0
        self.loads = 0
        self.fail_dumps: int | None = None
        self.fail_loads: int | None = None

    def fail_at(self, *, dumps: int | None = None, loads: int | None = None) -> None:
        """Fail the ``dumps``-th serialisation or the ``loads``-th deserialisation from
        now (None: neither); both counters start again."""
        self.dumps = self.loads = 0
        self.fail_dumps, self.fail_loads = dumps, loads

    def dumps_typed(self, obj: object) -> object:
        """The wrapped ``dumps_typed``, or `SerdeFault` when this is the one to fail."""
        self.dumps += 1
        if self.dumps == self.fail_dumps:
            raise SerdeFault(f"the kit's serde failed the {self.dumps}. value serialised")
        return getattr(self.inner, "dumps_typed")(obj)  # noqa: B009 - the saver's, untyped

    def loads_typed(self, data: object) -> object:
        """The wrapped ``loads_typed``, or `SerdeFault` when this is the one to fail."""
        self.loads += 1
        if self.loads == self.fail_loads:
            raise SerdeFault(f"the kit's serde failed the {self.loads}. value read")
        return getattr(self.inner, "loads_typed")(data)  # noqa: B009

    def __getattr__(self, name: str) -> object:
        if name == "inner":  # not set yet (a copy being made): no serializer to ask
            raise AttributeError(name)
        return getattr(self.inner, name)
