"""The operator commands' STORE argument: ``sqlite:FILE``, ``file:DIR``, ``module:function=DIR``.

`parse_store` turns the text into a `StoreSpec` without touching anything;
`open_store` checks that a store is there and opens a checkpointer on it. The
operator commands read and rewrite existing sessions, so opening never creates
a store: a mistyped path is `NoStoreError`, never a new, empty store that then
reports "no sessions".

- ``sqlite:./sessions.db`` — the SQLite backend on that database *file* (not a
  directory: unlike the kit's ``sqlite`` factory, which keeps ``checkpoints.db``
  inside its directory, the file is named directly).
- ``file:./sessions/`` — the file backend's store directory (it holds ``format.json``).
- ``postgres:postgresql://user@host/db`` — the PostgreSQL backend's store in schema
  ``checkpointspec`` of that database (needs the ``postgres`` extra). A store the
  kit's factory made for a directory is ``checkpointspec.backends.postgres:make=DIR``
  with ``CHECKPOINTSPEC_POSTGRES_DSN`` set.
- ``mypkg.backend:make=./store`` — any backend: the factory is imported and called
  with ``BackendContext(path=DIR)``, as the kit calls it
  (`checkpointspec.backends.registry`). ``DIR`` must exist; what the backend
  keeps there is its own business.

Every refusal is a `StoreError`: `StoreSpecError` for text that names no store
(`UnknownSchemeError` for a scheme other than those above), `StoreUnreachableError`
for a store that cannot be opened (`NoStoreError` when there is none), and
`StoreFactoryError` for a ``module:function`` that cannot be imported or called.
Nothing is written before a store is known to be there.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Final, Literal, TypeAlias, cast
from urllib.parse import quote

import msgspec

from ..backends import file as file_backend
from ..backends.registry import (
    BackendLoadError,
    BackendRef,
    BackendTarget,
    FactoryFailedError,
    NotACheckpointerError,
    open_backend,
)
from ..backends.sqlite import DATABASE_NAME, SqliteCheckpointer
from ..backends.sqlite.schema import header_user_version
from ..spec import (
    Checkpointer,
    CheckpointError,
    CorruptStoreError,
    InvalidArgumentError,
    SchemaVersionError,
)

__all__ = [
    "SCHEMES",
    "NoStoreError",
    "StoreError",
    "StoreFactoryError",
    "StoreScheme",
    "StoreSpec",
    "StoreSpecError",
    "StoreUnreachableError",
    "UnknownSchemeError",
    "check_store",
    "open_store",
    "parse_store",
]

StoreScheme: TypeAlias = Literal["sqlite", "file", "postgres", "module"]

SCHEMES: Final = "sqlite:FILE, file:DIR, postgres:DSN or module:function=DIR"
"""The forms of a store, as error messages name them."""

FILE_STORE_MARKER: Final = "format.json"
"""What makes a directory a file store (the file backend writes it first)."""

_SQLITE_MAGIC: Final = b"SQLite format 3\x00"
_SQLITE_HEADER: Final = 100


class StoreError(CheckpointError):
    """A store named on the command line cannot be used; ``store`` is the text as given."""

    def __init__(self, store: str, message: str) -> None:
        super().__init__(message)
        self.store = store


class StoreSpecError(StoreError, ValueError):
    """The text is not of the form ``scheme:location``; ``reason`` says what is wrong."""

    def __init__(self, store: str, reason: str) -> None:
        super().__init__(store, f"store {store!r}: {reason}; use {SCHEMES}")
        self.reason = reason


class UnknownSchemeError(StoreSpecError):
    """The text names a scheme other than ``sqlite``, ``file`` or ``module:function``."""

    def __init__(self, store: str, scheme: str) -> None:
        super().__init__(store, f"unknown scheme {scheme!r}")
        self.scheme = scheme


class StoreUnreachableError(StoreError):
    """The store cannot be opened: ``location`` is the path, ``reason`` why. Nothing was written."""

    def __init__(self, store: str, location: str, reason: str) -> None:
        super().__init__(store, reason)
        self.location = location
        self.reason = reason


class NoStoreError(StoreUnreachableError):
    """There is no store at ``location`` (none was created)."""


class StoreFactoryError(StoreError):
    """A ``module:function`` store whose factory cannot be imported, fails, or returns
    something that is not a Checkpointer; ``factory`` is the ``module:function``."""

    def __init__(self, store: str, factory: str, reason: str) -> None:
        super().__init__(store, reason)
        self.factory = factory
        self.reason = reason


class StoreSpec(msgspec.Struct, frozen=True):
    """A parsed store: its scheme, its path, and for ``module`` the ``module:function``.

    ``text`` is the store as given, for messages. For ``postgres`` the DSN is
    ``dsn`` and ``path`` is empty.
    """

    text: str
    scheme: StoreScheme
    path: Path
    factory: str | None = None
    dsn: str | None = None


def _is_dotted_name(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def parse_store(text: str) -> StoreSpec:
    """The `StoreSpec` ``text`` names, without touching the file system.

    ``sqlite`` and ``file`` are reserved scheme names; anything else of the form
    ``module.path:function=DIR`` is a factory. ``~`` in a path is expanded.
    Raises `StoreSpecError` (or `UnknownSchemeError`).
    """
    scheme, colon, rest = text.partition(":")
    if not colon:
        raise StoreSpecError(text, "no scheme")
    if scheme == "postgres":
        if not rest:
            raise StoreSpecError(text, "postgres: needs a DSN (postgresql://user@host/db)")
        try:
            from psycopg import ProgrammingError  # the postgres extra
            from psycopg.conninfo import conninfo_to_dict
        except ImportError:
            pass  # opening it says the extra is missing
        else:
            try:
                conninfo_to_dict(rest)  # libpq's own parser: no connection is made
            except ProgrammingError as exc:
                raise StoreSpecError(text, f"not a PostgreSQL connection string: {exc}") from None
        return StoreSpec(text, "postgres", Path(), dsn=rest)
    if scheme in ("sqlite", "file"):
        if not rest:
            what = "a database file" if scheme == "sqlite" else "a directory"
            raise StoreSpecError(text, f"{scheme}: needs {what}")
        return StoreSpec(text, cast(StoreScheme, scheme), Path(rest).expanduser())
    factory, equals, location = text.partition("=")
    module_name, _, function = factory.partition(":")
    if not equals or not _is_dotted_name(module_name):
        raise UnknownSchemeError(text, scheme)
    if not _is_dotted_name(function):
        raise StoreSpecError(text, f"{function!r} is not a function name")
    if not location:
        raise StoreSpecError(text, f"{factory}= needs a directory")
    return StoreSpec(text, "module", Path(location).expanduser(), factory)


# -- is there a store? ----------------------------------------------------------------------


def _missing(spec: StoreSpec, what: str) -> NoStoreError:
    parent = spec.path.parent
    if not parent.exists():
        reason = f"no store at {spec.path}: directory {parent} does not exist"
    else:
        reason = f"no store at {spec.path}: no such {what}"
    return NoStoreError(spec.text, str(spec.path), reason)


def _unreachable(spec: StoreSpec, reason: str) -> StoreUnreachableError:
    return StoreUnreachableError(spec.text, str(spec.path), reason)


def _sqlite_version(path: Path) -> tuple[int, int]:
    """``(user_version, number of schema objects)``, read through a read-only connection.

    Used only when the file header says version 0: that is an empty database or
    a store in use whose header is still in its write-ahead log (a reader sees
    the log, the header does not), and only SQLite can tell them apart.
    """
    conn = sqlite3.connect(f"file:{quote(os.fspath(path))}?mode=ro", uri=True)
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        objects = int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
    finally:
        conn.close()
    return version, objects


def _check_sqlite(spec: StoreSpec) -> None:
    path = spec.path
    if not path.exists():
        raise _missing(spec, "file")
    if path.is_dir():
        inside = path / DATABASE_NAME  # where the kit's sqlite factory keeps its database
        hint = f" (sqlite:{inside}?)" if inside.is_file() else ""
        raise _unreachable(spec, f"{path} is a directory; sqlite: names the database file{hint}")
    try:
        with path.open("rb") as db:
            header = db.read(_SQLITE_HEADER)
    except OSError as exc:
        raise _unreachable(spec, f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(header) < _SQLITE_HEADER or not header.startswith(_SQLITE_MAGIC):
        raise _unreachable(spec, f"{path} is not an SQLite database")
    if header_user_version(path) == 0:
        try:
            version, objects = _sqlite_version(path)
        except sqlite3.Error as exc:
            raise _unreachable(spec, f"cannot open {path}: {exc}") from exc
        if version == 0 and objects == 0:
            # The backend would adopt an empty database as a new store: that is creating one.
            raise NoStoreError(
                spec.text, str(path), f"no store at {path}: an empty SQLite database"
            )


def _check_directory(spec: StoreSpec) -> None:
    path = spec.path
    if not path.exists():
        raise _missing(spec, "directory")
    if not path.is_dir():
        raise _unreachable(spec, f"{path} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise _unreachable(spec, f"cannot read {path}: permission denied")
    if spec.scheme == "file" and not (path / FILE_STORE_MARKER).exists():
        raise NoStoreError(
            spec.text, str(path), f"no store at {path}: it holds no {FILE_STORE_MARKER}"
        )


def check_store(spec: StoreSpec) -> None:
    """Raise `NoStoreError` or `StoreUnreachableError` unless a store is at ``spec.path``.

    Reads only: a file's header (and, for an SQLite header at version 0, the
    version through a read-only connection), a directory's listing.
    """
    if spec.scheme == "sqlite":
        _check_sqlite(spec)
    elif spec.scheme == "postgres":
        pass  # only a connection tells: see _open_postgres
    else:
        _check_directory(spec)


# -- opening ----------------------------------------------------------------------------------


async def _open_module(spec: StoreSpec, factory: str) -> Checkpointer:
    target = BackendTarget(BackendRef(factory, factory))
    try:
        make = target.factory()
    except BackendLoadError as exc:  # does not import, lacks the name, or is not callable
        raise StoreFactoryError(spec.text, factory, str(exc)) from exc
    try:
        return await open_backend(make, target.context(spec.path))
    except NotACheckpointerError as exc:
        raise StoreFactoryError(spec.text, factory, str(exc)) from exc
    except (SchemaVersionError, CorruptStoreError):
        raise
    except Exception as exc:  # a factory failing for any reason is a store that cannot open
        failed = FactoryFailedError(factory, exc)
        raise StoreFactoryError(spec.text, factory, str(failed)) from exc


async def _open_postgres(spec: StoreSpec) -> Checkpointer:
    assert spec.dsn is not None
    try:
        from ..backends import postgres  # psycopg is an optional extra
    except ImportError as exc:
        raise StoreUnreachableError(
            spec.text, "postgres", f"postgres: needs the postgres extra ({exc})"
        ) from exc
    where = f"schema {postgres.DEFAULT_SCHEMA}"
    try:
        if await postgres.store_version(spec.dsn) == 0:
            raise NoStoreError(spec.text, where, f"no store in {where} of that database")
        return await postgres.PostgresCheckpointer(spec.dsn, create=False).open()
    except (postgres.ServerUnreachableError, InvalidArgumentError) as exc:
        raise StoreUnreachableError(spec.text, where, str(exc)) from exc
    except SchemaVersionError as exc:
        raise StoreUnreachableError(
            spec.text,
            where,
            f"{where} was written by a newer version (schema {exc.found}; "
            f"this one reads up to {exc.supported})",
        ) from exc


async def _open(spec: StoreSpec) -> Checkpointer:
    if spec.scheme == "postgres":
        return await _open_postgres(spec)
    if spec.scheme == "sqlite":
        return await SqliteCheckpointer(spec.path).open()
    if spec.scheme == "file":
        return file_backend.make(BackendTarget.named("file").context(spec.path))
    assert spec.factory is not None
    return await _open_module(spec, spec.factory)


async def open_store(store: str | StoreSpec) -> Checkpointer:
    """Open the checkpointer of an existing store; the caller closes it.

    Raises `StoreSpecError`, `NoStoreError`, `StoreUnreachableError` (a store
    written by a newer version, a damaged or foreign one, an unreadable file) or
    `StoreFactoryError`, with nothing created or changed.
    """
    spec = parse_store(store) if isinstance(store, str) else store
    check_store(spec)
    try:
        return await _open(spec)
    except SchemaVersionError as exc:
        raise _unreachable(
            spec,
            f"{spec.path} was written by a newer version (schema {exc.found}; "
            f"this one reads up to {exc.supported})",
        ) from exc
    except CorruptStoreError as exc:
        raise _unreachable(spec, f"{spec.path} is not a usable store: {exc}") from exc
    except (sqlite3.Error, OSError) as exc:
        raise _unreachable(spec, f"cannot open {spec.path}: {exc}") from exc
