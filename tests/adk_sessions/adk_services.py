"""ADK session services with one bug each, for the adk_session suite's own tests.

``make(ctx)`` with ``--option kind=K`` returns a subclass of ADK's own
``InMemorySessionService`` with the one mistake K names (a realistic one, each seen
in session services), the service itself (``InMemory``), or a persistent service that
keeps the whole contract (``DurableSqlite``). Each one-bug service should fail the rule
of its cause, as the one root of its run; the two correct ones pass.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sqlite3
import time
import uuid
from typing import Any

from checkpointspec.spec import BackendContext
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions._session_util import extract_state_delta
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from google.adk.sessions.in_memory_session_service import InMemorySessionService


class ReadsWithoutOrder(InMemorySessionService):
    """Events read back ordered by their text, as a query without ORDER BY may give
    them (ADKGET-001)."""

    async def get_session(self, **kwargs: Any) -> Any:
        session = await super().get_session(**kwargs)
        if session is not None and kwargs.get("config") is None:
            session.events.sort(key=lambda e: e.content.parts[0].text or "")
        return session


class FoldsUserIds(InMemorySessionService):
    """User ids compared without case, as a case-insensitive collation does (ADKISO-001)."""

    async def create_session(self, *, user_id: str, **kwargs: Any) -> Any:
        made = await super().create_session(user_id=user_id.lower(), **kwargs)
        made.user_id = user_id
        return made

    async def get_session(self, *, user_id: str, **kwargs: Any) -> Any:
        got = await super().get_session(user_id=user_id.lower(), **kwargs)
        if got is not None:
            got.user_id = user_id
        return got

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> Any:
        return await super().list_sessions(
            app_name=app_name, user_id=None if user_id is None else user_id.lower()
        )

    async def delete_session(self, *, user_id: str, **kwargs: Any) -> None:
        await super().delete_session(user_id=user_id.lower(), **kwargs)

    async def append_event(self, session: Any, event: Any) -> Any:
        folded = session.model_copy(update={"user_id": session.user_id.lower()})
        folded.events = session.events
        folded.state = session.state
        done = await super().append_event(folded, event)
        session.last_update_time = folded.last_update_time
        return done


class OldestFirst(InMemorySessionService):
    """num_recent_events answered with the oldest events (ADKGET-002)."""

    async def get_session(self, **kwargs: Any) -> Any:
        config = kwargs.get("config")
        if config is None or not config.num_recent_events:
            return await super().get_session(**kwargs)
        recent = config.num_recent_events
        whole = await super().get_session(**{**kwargs, "config": None})
        if whole is not None:
            whole.events = whole.events[:recent]
        return whole


class KeepsTempKeys(InMemorySessionService):
    """An event stored with the temp: keys of its delta, which ADK never stores
    (ADKSTATE-001)."""

    def _trim_temp_delta_state(self, event: Any) -> Any:
        return event


class UserKeysInSession(InMemorySessionService):
    """user: keys kept in the session's own state, not the user's (ADKSTATE-001)."""

    async def append_event(self, session: Any, event: Any) -> Any:
        done = await super().append_event(session, event)
        delta = event.actions.state_delta or {}
        users = self.user_state.get(session.app_name, {}).get(session.user_id, {})
        for key in delta:
            if key.startswith("user:"):
                users.pop(key.removeprefix("user:"), None)
                stored = self.sessions[session.app_name][session.user_id][session.id]
                stored.state[key] = copy.deepcopy(delta[key])
        return done


class DeleteKeepsEvents(InMemorySessionService):
    """A session created again with a deleted one's id gets its events back, as a
    delete that leaves the events table's rows does (ADKDEL-001)."""

    def __init__(self) -> None:
        super().__init__()
        self.graveyard: dict[tuple[str, str, str], list[Any]] = {}

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        stored = self.sessions.get(app_name, {}).get(user_id, {}).get(session_id)
        if stored is not None:
            self.graveyard[(app_name, user_id, session_id)] = list(stored.events)
        await super().delete_session(app_name=app_name, user_id=user_id, session_id=session_id)

    async def create_session(self, **kwargs: Any) -> Any:
        made = await super().create_session(**kwargs)
        old = self.graveyard.pop((made.app_name, made.user_id, made.id), [])
        self.sessions[made.app_name][made.user_id][made.id].events.extend(old)
        return made


class ListIgnoresUser(InMemorySessionService):
    """list_sessions answering every user's sessions whatever user it is asked for
    (ADKLIST-001)."""

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> Any:
        return await super().list_sessions(app_name=app_name, user_id=None)


class FloatsAsText(InMemorySessionService):
    """Session state values kept as their repr when they are floats, as a column of
    text without JSON does (ADKITEM-001)."""

    async def append_event(self, session: Any, event: Any) -> Any:
        done = await super().append_event(session, event)
        stored = self.sessions[session.app_name][session.user_id][session.id]
        for key, value in list(stored.state.items()):
            if isinstance(value, float):
                stored.state[key] = repr(value)
        return done


class DurableSqliteService(BaseSessionService):
    """A persistent service that keeps what the contract asks: one SQLite file in WAL
    mode with ``synchronous=FULL``, each call one ``BEGIN IMMEDIATE`` transaction, the
    stale check inside the transaction that writes, by a revision counter. The
    reference the durable rules are tried against: it must pass them all."""

    def __init__(self, path: str) -> None:
        self.path = path
        with self._connect() as db:
            db.executescript(
                "CREATE TABLE IF NOT EXISTS sessions (app TEXT, user TEXT, id TEXT, "
                "state TEXT, revision INTEGER, update_time REAL, PRIMARY KEY (app, user, id));"
                "CREATE TABLE IF NOT EXISTS events (app TEXT, user TEXT, sid TEXT, n INTEGER "
                "PRIMARY KEY AUTOINCREMENT, timestamp REAL, data TEXT);"
                "CREATE TABLE IF NOT EXISTS scopes (app TEXT, user TEXT, state TEXT, "
                "PRIMARY KEY (app, user));"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    @staticmethod
    def _scope(db: sqlite3.Connection, app: str, user: str) -> dict[str, Any]:
        row = db.execute("SELECT state FROM scopes WHERE app=? AND user=?", (app, user)).fetchone()
        return dict(json.loads(row[0])) if row else {}

    def _merge_scope(
        self, db: sqlite3.Connection, app: str, user: str, delta: dict[str, Any]
    ) -> None:
        if delta:
            merged = self._scope(db, app, user) | delta
            db.execute(
                "INSERT OR REPLACE INTO scopes VALUES (?, ?, ?)", (app, user, json.dumps(merged))
            )

    def _merged(
        self, db: sqlite3.Connection, app: str, user: str, own: dict[str, Any]
    ) -> dict[str, Any]:
        merged = dict(own)
        merged |= {"app:" + k: v for k, v in self._scope(db, app, "").items()}
        merged |= {"user:" + k: v for k, v in self._scope(db, app, user).items()}
        return merged

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = session_id or uuid.uuid4().hex
        deltas = extract_state_delta(state or {})
        with contextlib.closing(self._connect()) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT INTO sessions VALUES (?, ?, ?, ?, 1, ?)",
                    (app_name, user_id, session_id, json.dumps(deltas["session"]), time.time()),
                )
            except sqlite3.IntegrityError:
                db.execute("ROLLBACK")
                raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
            self._merge_scope(db, app_name, "", deltas["app"])
            self._merge_scope(db, app_name, user_id, deltas["user"])
            merged = self._merged(db, app_name, user_id, deltas["session"])
            db.execute("COMMIT")
        made = Session(app_name=app_name, user_id=user_id, id=session_id, state=merged)
        made.last_update_time = 1.0  # revision 1
        return made

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        with contextlib.closing(self._connect()) as db:
            db.execute("BEGIN")
            row = db.execute(
                "SELECT state, revision FROM sessions WHERE app=? AND user=? AND id=?",
                (app_name, user_id, session_id),
            ).fetchone()
            if row is None:
                db.execute("COMMIT")
                return None
            rows = db.execute(
                "SELECT data, timestamp FROM events WHERE app=? AND user=? AND sid=? ORDER BY n",
                (app_name, user_id, session_id),
            ).fetchall()
            merged = self._merged(db, app_name, user_id, json.loads(row[0]))
            db.execute("COMMIT")
        events = [Event.model_validate_json(data) for data, _ in rows]
        if config is not None and config.num_recent_events is not None:
            events = events[-config.num_recent_events :] if config.num_recent_events else []
        if config is not None and config.after_timestamp is not None:
            events = [e for e in events if e.timestamp >= config.after_timestamp]
        got = Session(
            app_name=app_name, user_id=user_id, id=session_id, state=merged, events=events
        )
        got.last_update_time = float(row[1])  # the revision read: what the stale check compares
        return got

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        with contextlib.closing(self._connect()) as db:
            rows = db.execute(
                "SELECT user, id FROM sessions WHERE app=? AND (? IS NULL OR user=?)",
                (app_name, user_id, user_id),
            ).fetchall()
        return ListSessionsResponse(
            sessions=[Session(app_name=app_name, user_id=u, id=i) for u, i in rows]
        )

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        with contextlib.closing(self._connect()) as db:
            db.execute("BEGIN IMMEDIATE")
            names = (app_name, user_id, session_id)
            db.execute("DELETE FROM sessions WHERE app=? AND user=? AND id=?", names)
            db.execute("DELETE FROM events WHERE app=? AND user=? AND sid=?", names)
            db.execute("COMMIT")

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        names = (session.app_name, session.user_id, session.id)
        deltas = extract_state_delta(event.actions.state_delta or {})
        with contextlib.closing(self._connect()) as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute(
                "SELECT state, revision FROM sessions WHERE app=? AND user=? AND id=?", names
            ).fetchone()
            if row is None:
                db.execute("ROLLBACK")
                raise SessionNotFoundError(f"Session {session.id} not found.")
            if row[1] != int(session.last_update_time):
                db.execute("ROLLBACK")
                raise StaleSessionError("the session object is older than the stored session")
            own = json.loads(row[0]) | deltas["session"]
            db.execute(
                "UPDATE sessions SET state=?, revision=revision+1 WHERE app=? AND user=? AND id=?",
                (json.dumps(own), *names),
            )
            db.execute(
                "INSERT INTO events (app, user, sid, timestamp, data) VALUES (?, ?, ?, ?, ?)",
                (*names, event.timestamp, event.model_dump_json(exclude_none=True)),
            )
            self._merge_scope(db, session.app_name, "", deltas["app"])
            self._merge_scope(db, session.app_name, session.user_id, deltas["user"])
            db.execute("COMMIT")
        session.last_update_time = float(row[1] + 1)
        return self._commit_event_to_session(session, event)


KINDS: dict[str, type[InMemorySessionService]] = {
    "InMemory": InMemorySessionService,
    "ReadsWithoutOrder": ReadsWithoutOrder,
    "FoldsUserIds": FoldsUserIds,
    "OldestFirst": OldestFirst,
    "KeepsTempKeys": KeepsTempKeys,
    "UserKeysInSession": UserKeysInSession,
    "DeleteKeepsEvents": DeleteKeepsEvents,
    "ListIgnoresUser": ListIgnoresUser,
    "FloatsAsText": FloatsAsText,
}
"""Every service here by its ``kind`` option, with the rule its defect breaks."""

RULE_OF: dict[str, str] = {
    "ReadsWithoutOrder": "ADKGET-001",
    "FoldsUserIds": "ADKISO-001",
    "OldestFirst": "ADKGET-002",
    "KeepsTempKeys": "ADKSTATE-001",
    "UserKeysInSession": "ADKSTATE-001",
    "DeleteKeepsEvents": "ADKDEL-001",
    "ListIgnoresUser": "ADKLIST-001",
    "FloatsAsText": "ADKITEM-001",
}
"""The rule each one-bug service breaks: what its run's one root must be."""


def make(ctx: BackendContext) -> object:
    """The service ``--option kind=K`` names (``DurableSqlite``: `DurableSqliteService` on
    a file of the store)."""
    kind = ctx.options.get("kind", "InMemory")
    if kind == "DurableSqlite":
        return DurableSqliteService(str(ctx.path / "sessions.db"))
    return KINDS[kind]()
