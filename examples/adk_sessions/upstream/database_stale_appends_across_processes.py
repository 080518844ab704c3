"""DatabaseSessionService on SQLite stores stale appends made from several processes.

Two worker processes each read one session, wait until both have read it, then each
appends an event through what it read. ``append_event`` promises ``StaleSessionError``
when the supplied session has been superseded: one append should be stored and one
refused. The service serialises appends with an ``asyncio.Lock`` per process and locks
rows only on MySQL, MariaDB and PostgreSQL; on SQLite the stale check and the insert
of two processes interleave, and both are stored (google-adk 2.13.0, most runs). Run:
``python database_stale_appends_across_processes.py``.
"""

import asyncio
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

from google.adk.events import Event
from google.adk.sessions.database_session_service import DatabaseSessionService


def url(directory: str) -> str:
    """SQLite in ``directory``; a PostgreSQL server's database when $ADK_DATABASE_URL names
    one (``postgresql+asyncpg://...``), emptied first by the caller."""
    return (
        os.environ.get("ADK_DATABASE_URL")
        or f"sqlite+aiosqlite:///{Path(directory) / 'sessions.db'}"
    )


def worker(directory: str, number: int, both_read: object, outcome: object) -> None:
    async def run() -> None:
        async with DatabaseSessionService(url(directory)) as service:
            session = await service.get_session(app_name="app", user_id="u", session_id="s")
            both_read.wait()  # type: ignore[attr-defined]
            event = Event(id=f"e{number}", author="user", invocation_id="i", timestamp=time.time())
            try:
                await service.append_event(session, event)
                outcome.put("stored")  # type: ignore[attr-defined]
            except Exception as exc:
                outcome.put(type(exc).__name__)  # type: ignore[attr-defined]

    asyncio.run(run())


async def create(directory: str) -> None:
    async with DatabaseSessionService(url(directory)) as service:
        await service.delete_session(app_name="app", user_id="u", session_id="s")
        await service.create_session(app_name="app", user_id="u", session_id="s")


async def events(directory: str) -> int:
    async with DatabaseSessionService(url(directory)) as service:
        read = await service.get_session(app_name="app", user_id="u", session_id="s")
        return len(read.events)


def main() -> None:
    stored_twice = 0
    for _ in range(10):
        directory = tempfile.mkdtemp()
        asyncio.run(create(directory))
        both_read = multiprocessing.Barrier(2)
        outcome: multiprocessing.Queue[str] = multiprocessing.Queue()
        workers = [
            multiprocessing.Process(target=worker, args=(directory, n, both_read, outcome))
            for n in range(2)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        outcomes = sorted(outcome.get() for _ in workers)
        if outcomes == ["stored", "stored"]:
            stored_twice += 1
        print(outcomes, "the session holds", asyncio.run(events(directory)), "events")
    print(f"both appends stored in {stored_twice} of 10 runs; expected: in none")


if __name__ == "__main__":
    main()
