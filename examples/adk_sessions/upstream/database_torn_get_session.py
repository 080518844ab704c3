"""DatabaseSessionService's get_session can return state and events of different moments.

One process appends events, each setting ``state["turn"]`` and ``state["app:turn"]`` to
its own number; another reads the session over and over. Every read should show a
state whose ``turn`` and ``app:turn`` are the last returned event's: get_session reads
the session row, then its events, then the app and user state, in separate
statements, and under PostgreSQL's READ COMMITTED an append committed between them
shows either way round: in the events but not in the session's state (``turn``
behind), or in the app's state but not in the events (``app:turn`` ahead).
google-adk 2.13.0, asyncpg; it needs a server: set $ADK_DATABASE_URL to
``postgresql+asyncpg://...``. Run: ``python database_torn_get_session.py``.
"""

import asyncio
import multiprocessing
import os
import time

from google.adk.events import Event, EventActions
from google.adk.sessions.database_session_service import DatabaseSessionService

URL = os.environ.get("ADK_DATABASE_URL", "postgresql+asyncpg://localhost/postgres")
APPENDS = 200


def appender() -> None:
    async def run() -> None:
        async with DatabaseSessionService(URL) as service:
            for turn in range(1, APPENDS + 1):
                session = await service.get_session(app_name="app", user_id="u", session_id="s")
                delta = EventActions(state_delta={"turn": turn, "app:turn": turn})
                event = Event(
                    author="user", invocation_id="i", timestamp=time.time(), actions=delta
                )
                await service.append_event(session, event)

    asyncio.run(run())


async def reader(done: object) -> int:
    torn = 0
    async with DatabaseSessionService(URL) as service:
        while not done.is_set():  # type: ignore[attr-defined]
            read = await service.get_session(app_name="app", user_id="u", session_id="s")
            last = read.events[-1].actions.state_delta["turn"] if read.events else None
            turn, app_turn = read.state.get("turn"), read.state.get("app:turn")
            if (turn, app_turn) != (last, last):
                torn += 1
                print(
                    f"{len(read.events)} events, the last setting turn={last}; "
                    f"state turn={turn}, app:turn={app_turn}"
                )
    return torn


async def create() -> None:
    async with DatabaseSessionService(URL) as service:
        await service.delete_session(app_name="app", user_id="u", session_id="s")
        await service.create_session(app_name="app", user_id="u", session_id="s")


def main() -> None:
    asyncio.run(create())
    writer = multiprocessing.Process(target=appender)
    done = multiprocessing.Event()
    writer.start()

    def stop_when_written() -> None:
        writer.join()
        done.set()

    import threading

    threading.Thread(target=stop_when_written).start()
    torn = asyncio.run(reader(done))
    print(f"{torn} reads of state and events of different moments; expected: none")


if __name__ == "__main__":
    main()
