"""Two pop_item calls at once on one SQLAlchemySession return the same item.

Found by ``checkpointspec run --openai-session`` (OASPOP-002) on openai-agents 0.6.0;
0.24.0 no longer does it. Four Session objects of one conversation, as four requests
of an agent server would open them, each pop once, at the same time, from a
conversation of four items: each should get a different item. Run with
``pip install 'openai-agents==0.6.0' 'sqlalchemy[asyncio]' aiosqlite`` and
``python sqlalchemy_racing_pops.py``; it exits 1 when two pops returned one item.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from agents.extensions.memory import SQLAlchemySession


async def main() -> int:
    url = f"sqlite+aiosqlite:///{Path(tempfile.mkdtemp()) / 'sessions.db'}"
    writer = SQLAlchemySession.from_url("conv", url=url, create_tables=True)
    await writer.add_items([{"role": "assistant", "content": f"reply {n}"} for n in range(4)])
    callers = [SQLAlchemySession.from_url("conv", url=url) for _ in range(4)]
    for attempt in range(20):
        popped = await asyncio.gather(*(caller.pop_item() for caller in callers))
        contents = [item["content"] for item in popped if item is not None]
        left = await writer.get_items()
        if len(set(contents)) < len(contents):
            print(f"attempt {attempt}: four pops at once returned {contents}; left {left}")
            return 1
        await writer.add_items([{"role": "assistant", "content": f"reply {n}"} for n in range(4)])
    print("every pop returned a different item in 20 attempts")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
