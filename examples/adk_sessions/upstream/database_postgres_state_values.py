"""DatabaseSessionService on PostgreSQL refuses a NUL and makes the float 1e16 an integer.

State is kept as JSONB: PostgreSQL's JSONB cannot hold ``\\u0000``, so a state value
with a NUL character fails the whole call, and it keeps numbers as ``numeric``, so the
float ``1e16`` reads back as the integer ``10000000000000000`` (google-adk 2.13.0,
asyncpg; it needs a server: set $ADK_DATABASE_URL to ``postgresql+asyncpg://...``).
Run: ``python database_postgres_state_values.py``.
"""

import asyncio
import os
import uuid

from google.adk.sessions.database_session_service import DatabaseSessionService

URL = os.environ.get("ADK_DATABASE_URL", "postgresql+asyncpg://localhost/postgres")


async def main() -> None:
    async with DatabaseSessionService(URL) as service:
        sid = uuid.uuid4().hex
        await service.create_session(app_name="app", user_id="u", session_id=sid, state={"f": 1e16})
        read = await service.get_session(app_name="app", user_id="u", session_id=sid)
        print(
            f"state['f'] was 1e16 (a float), reads back {read.state['f']!r} ({type(read.state['f']).__name__})"
        )
        try:
            await service.create_session(
                app_name="app", user_id="u", session_id=uuid.uuid4().hex, state={"nul": "a\x00b"}
            )
            print("a state value with a NUL character was kept")
        except Exception as exc:
            print(
                f"a state value with a NUL character: create_session raised {type(exc).__name__}: {str(exc).splitlines()[0]}"
            )


asyncio.run(main())
