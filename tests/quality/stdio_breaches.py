"""A reference backend (memory unless named) served over stdio by a server that breaks
the protocol at every append, each in one way, for the kit's PROTO-001 cases.

``python stdio_breaches.py BREACH [BACKEND]``, where ``BREACH`` is one of `BREACHES`
(``BACKEND`` as the kit names it: ``sqlite`` for a store that worker processes share):

- ``garbage``: a line that is no JSON comes before the append's reply;
- ``other-id``: the append's reply comes first under the id of the next request;
- ``unsolicited``: after the append's reply, a second reply no request asked for;
- ``exit``: the process exits in the middle of the append, before answering it.

Everything else is answered as `checkpointspec.backends.stdio.serve` answers it, so
the kit's only finding is the breach.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Final

from checkpointspec.backends.registry import BackendTarget
from checkpointspec.backends.stdio.messages import Append, Request
from checkpointspec.backends.stdio.serve import Server, reply_stream

BREACHES: Final = ("garbage", "other-id", "unsolicited", "exit")


class BreachingServer(Server):
    """A `Server` of ``backend`` that breaks the protocol in the way ``breach`` names at
    every append."""

    def __init__(self, breach: str, backend: str = "memory") -> None:
        super().__init__(BackendTarget.named(backend), sys.stdin.buffer, reply_stream())
        self.breach = breach
        self.extra: int | None = None
        """The id of the append whose reply is followed by an unsolicited one."""

    async def answer(self, request: Request) -> object:
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

    def send(self, **reply: object) -> None:
        super().send(**reply)
        if self.extra is not None and reply.get("id") == self.extra:
            self.extra = None
            super().send(id=reply["id"], result=reply.get("result"))


if __name__ == "__main__":
    if sys.argv[1:2] not in [[b] for b in BREACHES] or len(sys.argv) > 3:
        raise SystemExit(f"usage: python stdio_breaches.py {{{','.join(BREACHES)}}} [BACKEND]")
    asyncio.run(BreachingServer(*sys.argv[1:]).run())
