"""SqliteSessionService changes state values when an event's delta is merged into them.

A session's state is read back exactly after create_session, but once an event with
a state delta is appended, the SQL that merges the delta rewrites every value of the
state: ``-0.0`` comes back as ``0.0``, a text with a NUL character is cut at it, and
the app state's largest floats are rounded (google-adk 2.13.0). Run:
``python sqlite_state_values.py``.
"""

import asyncio
import tempfile
import time
from pathlib import Path

from google.adk.events import Event, EventActions
from google.adk.sessions.sqlite_session_service import SqliteSessionService

VALUES = {"negative zero": -0.0, "nul": "a\x00b", "largest": 1.7976931348623025e308}


async def main() -> None:
    service = SqliteSessionService(str(Path(tempfile.mkdtemp()) / "sessions.db"))
    state = {**VALUES, **{"app:" + k: v for k, v in VALUES.items()}}
    session = await service.create_session(app_name="app", user_id="u", session_id="s", state=state)
    delta = EventActions(state_delta={"turns": 1, "app:turns": 1})
    await service.append_event(
        session, Event(author="user", invocation_id="inv", timestamp=time.time(), actions=delta)
    )
    read = await service.get_session(app_name="app", user_id="u", session_id="s")
    for key, value in state.items():
        if repr(read.state[key]) != repr(value):
            print(f"state[{key!r}] was {value!r}, reads back {read.state[key]!r}")


asyncio.run(main())
