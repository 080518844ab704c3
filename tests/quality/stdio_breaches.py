"""A reference backend (memory unless named) served over stdio by a server that breaks
the protocol at every append, or at every close, each in one way, for the kit's PROTO-001
cases.

``python stdio_breaches.py BREACH [BACKEND]``, where ``BREACH`` is one of `BREACHES` or
`CLOSE_BREACHES` (``BACKEND`` as the kit names it: ``sqlite`` for a store that worker
processes share):

- ``garbage``: a line that is no JSON comes before the append's reply;
- ``other-id``: the append's reply comes first under the id of the next request;
- ``unsolicited``: after the append's reply, a second reply no request asked for;
- ``exit``: the process exits in the middle of the append, before answering it;
- ``garbage-at-close``: a line that is no JSON comes before the reply to ``close``;
- ``other-id-at-close``: the reply to ``close`` comes under the id of the next request.

A close breach comes only at the close of a handle that appended: so the kit's probe
and a check that only reads close cleanly, and in MP-001's stress check the breach is
met only by the workers, each as it closes its handle at the end.

Everything else is answered as `checkpointspec.backends.stdio.serve` answers it, so
the kit's only finding is the breach.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Final

from checkpointspec.backends.registry import BackendTarget
from checkpointspec.backends.stdio.messages import Append, Close, Hello, Request
from checkpointspec.backends.stdio.serve import Server, reply_stream

BREACHES: Final = ("garbage", "other-id", "unsolicited", "exit")
CLOSE_BREACHES: Final = ("garbage-at-close", "other-id-at-close")


class BreachingServer(Server):
    """A `Server` of ``backend`` that breaks the protocol in the way ``breach`` names at
    every append, or for a breach of `CLOSE_BREACHES` at every close of a handle that appended."""

    def __init__(self, breach: str, backend: str = "memory") -> None:
        super().__init__(BackendTarget.named(backend), sys.stdin.buffer, reply_stream())
        self.breach = breach
        self.extra: int | None = None
        """The id of the append whose reply is followed by an unsolicited one."""
        self.appended = False
        """The handle open (or closed last) has appended: its close breaks the protocol."""

    async def answer(self, request: Request) -> object:
        if self.breach in CLOSE_BREACHES:
            return await self.answer_breaking_close(request)
        if not isinstance(request, Append):
            return await super().answer(request)
        if self.breach == "exit":
            sys.stderr.write("exiting in the middle of an append\n")
            sys.stderr.flush()
            os._exit(1)
        result = await super().answer(request)
        if self.breach == "garbage":
            self.replies.write(b"this line is no JSON\n")
        elif self.breach == "other-id":
            self.send(id=request.id + 1, result=result)
        else:
            self.extra = request.id
        return result

    async def answer_breaking_close(self, request: Request) -> object:
        result = await super().answer(request)
        if isinstance(request, Hello):
            self.appended = False
        elif isinstance(request, Append):
            self.appended = True
        elif isinstance(request, Close) and self.appended:
            if self.breach == "garbage-at-close":
                self.replies.write(b"this line is no JSON\n")
            else:
                self.send(id=request.id + 1, result=result)
        return result

    def send(self, **reply: object) -> None:
        super().send(**reply)
        if self.extra is not None and reply.get("id") == self.extra:
            self.extra = None
            super().send(id=reply["id"], result=reply.get("result"))


if __name__ == "__main__":
    every = BREACHES + CLOSE_BREACHES
    if sys.argv[1:2] not in [[b] for b in every] or len(sys.argv) > 3:
        raise SystemExit(f"usage: python stdio_breaches.py {{{','.join(every)}}} [BACKEND]")
    asyncio.run(BreachingServer(*sys.argv[1:]).run())
