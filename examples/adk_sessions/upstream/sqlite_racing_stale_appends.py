"""SqliteSessionService stores appends made through stale session objects when they race.

Four callers read one session, then each appends an event through what it read, all
at once. ``append_event`` promises ``StaleSessionError`` when the supplied session has
been superseded: one append should be stored and three refused. The stale check reads
``update_time`` and the insert follows in another statement, with no lock between, so
all four are stored (google-adk 2.13.0: 4 stored, 0 refused). Run:
``python sqlite_racing_stale_appends.py``.
"""

import asyncio
import tempfile
import time
from pathlib import Path

from google.adk.events import Event
from google.adk.sessions.sqlite_session_service import SqliteSessionService


async def main() -> None:
    service = SqliteSessionService(str(Path(tempfile.mkdtemp()) / "sessions.db"))
    await service.create_session(app_name="app", user_id="u", session_id="s")
    read = [
        await service.get_session(app_name="app", user_id="u", session_id="s") for _ in range(4)
    ]
    now = time.time()
    events = [
        Event(id=f"e{n}", author="user", invocation_id="inv", timestamp=now + n) for n in range(4)
    ]
    outcomes = await asyncio.gather(
        *(service.append_event(s, e) for s, e in zip(read, events, strict=True)),
        return_exceptions=True,
    )
    stored = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [type(o).__name__ for o in outcomes if isinstance(o, BaseException)]
    final = await service.get_session(app_name="app", user_id="u", session_id="s")
    print(f"{len(stored)} stored, refused: {refused}, the session holds {len(final.events)} events")
    print("expected: 1 stored, refused: ['StaleSessionError'] * 3, the session holds 1 events")


asyncio.run(main())
