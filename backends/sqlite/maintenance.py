"""The SQLite backend's maintenance lock: a table row, believed only while its holder lives.

A handle holds a session (MAINTENANCE) with two things, both taken inside one
``BEGIN IMMEDIATE`` transaction, so that no other writer in any process looks
in between:

* a row of the ``maintenance`` table: the session id and the holding handle's
  random ``token``. Writers read it inside their own write transaction, in the
  statement that reads the head (one more index lookup in an empty table on the
  usual path), and a row with another token refuses the write (MAINT-001);
* the ``flock`` of the session's lock file, ``<database>.locks/<sha256 of the
  id>.lock``, kept by the holder until it releases the session or closes. The
  kernel drops it when the holder's process dies.

A row alone does not refuse anything: a writer that finds another token tries
the lock file's lock without waiting. Taken, the holder is gone (SIGKILL, power
loss): the writer deletes the row and the file in its own transaction and
writes (MAINT-004). Every opening, locking and removal of a lock file by anyone
but a live holder happens inside a write transaction, which is what keeps two
processes from racing on a file. An in-memory database has one handle and no
lock files: a row is always its own handle's.

Everything here runs on the connection's worker thread (see
`checkpointspec.backends.sqlite.worker`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import sqlite3
from pathlib import Path
from typing import Final

from ...spec import SessionLockedError
from .schema import rollback

__all__ = ["LOCKS_SUFFIX", "Holder", "acquire", "check_writable", "release", "release_all"]

LOCKS_SUFFIX: Final = ".locks"
"""The lock files' directory is the database's path with this suffix."""


class Holder:
    """One handle's side of the lock: its token, where lock files go, and the ones it holds.

    ``held`` maps each session the handle holds to its locked file's descriptor
    (None without lock files). It is changed on the worker thread only.
    """

    __slots__ = ("directory", "held", "token")

    def __init__(self, database: Path | None) -> None:
        self.token = secrets.token_hex(16)
        self.directory = (
            None if database is None else database.with_name(database.name + LOCKS_SUFFIX)
        )
        self.held: dict[str, int | None] = {}

    def lock_path(self, session_id: str) -> str:
        """The lock file of ``session_id`` (any id maps to a safe, fixed-length name)."""
        assert self.directory is not None
        name = hashlib.sha256(session_id.encode("utf-8")).hexdigest() + ".lock"
        return os.path.join(self.directory, name)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder_alive(holder: Holder, session_id: str) -> bool:
    """Whether a live process locks ``session_id``'s lock file; a dead holder's file is removed.

    Inside a write transaction only (see the module docstring).
    """
    if holder.directory is None:
        return True  # an in-memory database: the row can only be a live handle's
    path = holder.lock_path(session_id)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        if not _try_lock(fd):
            return True
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return False
    finally:
        os.close(fd)


def check_writable(
    conn: sqlite3.Connection, holder: Holder, session_id: str, token: str, operation: str
) -> None:
    """Refuse a write to a session another handle holds (MAINT-001, MAINT-004).

    ``token`` is the session's ``maintenance`` row as read in this write
    transaction. The holder's own token passes (MAINT-002); a dead holder's row
    is deleted, and the write goes on.
    """
    if token == holder.token:
        return
    if _holder_alive(holder, session_id):
        raise SessionLockedError(session_id, operation)
    conn.execute("DELETE FROM maintenance WHERE session_id = ?", (session_id,))


def acquire(conn: sqlite3.Connection, holder: Holder, session_id: str) -> None:
    """Hold ``session_id`` for ``holder``'s handle, in one write transaction (MAINT-003)."""
    conn.execute("BEGIN IMMEDIATE")
    fd: int | None = None
    try:
        row = conn.execute(
            "SELECT token FROM maintenance WHERE session_id = ?", (session_id,)
        ).fetchone()
        if row is not None:
            if row[0] == holder.token or _holder_alive(holder, session_id):
                raise SessionLockedError(session_id, "acquire_maintenance")
            conn.execute("DELETE FROM maintenance WHERE session_id = ?", (session_id,))
        if holder.directory is not None:
            os.makedirs(holder.directory, exist_ok=True)
            fd = os.open(holder.lock_path(session_id), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            # Lock files are only touched inside write transactions, and we are in
            # one: a lock held now belongs to a holder whose row went missing.
            if not _try_lock(fd):
                raise SessionLockedError(session_id, "acquire_maintenance")
        conn.execute(
            "INSERT INTO maintenance (session_id, token) VALUES (?, ?)",
            (session_id, holder.token),
        )
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        if fd is not None:
            os.close(fd)
        raise
    holder.held[session_id] = fd


def release(conn: sqlite3.Connection, holder: Holder, session_id: str) -> None:
    """Give ``session_id`` back: delete the row and the lock file, then drop the lock.

    Nothing happens unless ``holder`` holds it. When the transaction cannot
    start (the store is busy) the handle keeps the session; once it has
    started, the lock is dropped whatever else fails, and a row left behind
    is a dead holder's, which the next writer clears.
    """
    if session_id not in holder.held:
        return
    conn.execute("BEGIN IMMEDIATE")
    fd = holder.held.pop(session_id)
    try:
        conn.execute(
            "DELETE FROM maintenance WHERE session_id = ? AND token = ?",
            (session_id, holder.token),
        )
        if fd is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(holder.lock_path(session_id))
    except BaseException:
        rollback(conn)
        raise
    finally:
        # Dropped inside the transaction: nobody else touches lock files before
        # the commit, and from then on the name is free for the next holder.
        if fd is not None:
            os.close(fd)
    try:
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def release_all(conn: sqlite3.Connection, holder: Holder) -> None:
    """Give back every session ``holder`` holds (at close); the locks are dropped even on errors."""
    try:
        for session_id in list(holder.held):
            release(conn, holder, session_id)
    finally:
        for fd in holder.held.values():
            if fd is not None:
                os.close(fd)
        holder.held.clear()
