"""The SQLite reference backend: one database file per store, shared by processes.

`checkpointer` is the backend (its docstring explains the concurrency design
and durability), `worker` the statements each operation runs in one thread
hop, `schema` the tables, migrations and version marker.
"""

from .checkpointer import (
    DATABASE_NAME,
    DEFAULT_BUSY_TIMEOUT_MS,
    FAULT_POINTS,
    MIGRATIONS,
    SCHEMA_VERSION,
    GroupCommitStats,
    SqliteCheckpointer,
    make,
)

__all__ = [
    "DATABASE_NAME",
    "DEFAULT_BUSY_TIMEOUT_MS",
    "FAULT_POINTS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "GroupCommitStats",
    "SqliteCheckpointer",
    "make",
]
