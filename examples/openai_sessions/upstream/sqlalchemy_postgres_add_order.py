"""On PostgreSQL, an add_items committed later can read back before items already read.

Found by ``checkpointspec run --openai-session`` (OASMP-002) on openai-agents 0.24.0
with ``postgresql+asyncpg``. SQLAlchemySession orders a conversation by ``created_at``
and then ``id``; ``created_at`` defaults to ``CURRENT_TIMESTAMP``, which PostgreSQL
fixes when a transaction *begins*. An add whose transaction began first but took the
session's row lock second (its process paused between ``BEGIN`` and the lock) commits
after another add and still sorts before it: its items appear in the middle of a
conversation that readers have already seen, and ``get_items(limit=N)`` returns an
order no sequence of the adds gives.

Writer processes add to one conversation at once while a reader reads it over and
over; since only adds happen, each read should begin with the read before it. Set
$OPENAI_DATABASE_URL to ``postgresql+asyncpg://...`` (a server you can write to; it
makes the tables ``order_repro_sessions`` and ``order_repro_messages``) and run
``python sqlalchemy_postgres_add_order.py``; it exits 1 when a read did not extend
the one before it.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
import threading
from typing import Any

from agents.extensions.memory import SQLAlchemySession

URL = os.environ.get("OPENAI_DATABASE_URL", "postgresql+asyncpg://localhost/postgres")
TABLES: dict[str, Any] = {
    "sessions_table": "order_repro_sessions",
    "messages_table": "order_repro_messages",
}
WRITERS = 4
ADDS = 100


def session() -> SQLAlchemySession:
    return SQLAlchemySession.from_url("conv", url=URL, create_tables=True, **TABLES)


def writer(k: int) -> None:
    async def run() -> None:
        conversation = session()
        for n in range(ADDS):
            await conversation.add_items([{"role": "user", "content": f"writer {k} add {n}"}])
        await conversation.engine.dispose()

    asyncio.run(run())


async def read_while_written(done: threading.Event) -> int:
    conversation = session()
    earlier: list[str] = []
    misordered = 0
    while not done.is_set():
        now = [str(item["content"]) for item in await conversation.get_items()]
        if now[: len(earlier)] != earlier:
            misordered += 1
            seen = set(earlier)
            inserted = [c for c in now[: len(earlier)] if c not in seen]
            print(f"{inserted[:2]} read back before {earlier[-1]!r}, which was read first")
        earlier = now
    await conversation.engine.dispose()
    return misordered


async def fresh() -> None:
    conversation = session()
    await conversation.clear_session()
    await conversation.engine.dispose()


def main() -> int:
    asyncio.run(fresh())
    writers = [multiprocessing.Process(target=writer, args=(k,)) for k in range(WRITERS)]
    for process in writers:
        process.start()
    done = threading.Event()

    def stop_when_written() -> None:
        for process in writers:
            process.join()
        done.set()

    threading.Thread(target=stop_when_written).start()
    misordered = asyncio.run(read_while_written(done))
    print(f"{misordered} reads did not extend the read before them; expected: none")
    return 1 if misordered else 0


if __name__ == "__main__":
    sys.exit(main())
