"""The PostgreSQL reference backend: one schema per store, shared by processes and hosts.

`checkpointer` is the handle (the contract's operations, durability, the kit's
factory), `connections` the pool, retries, error translation and lost
connections, `appends` how appends reach the server alone or grouped in one
transaction, `schema` the tables, write functions, migrations and version
marker, `maintenance` the advisory-lock maintenance lock, `stores` how a
directory names its schema and how stores nobody can reach are dropped,
`cluster` the throwaway servers tests and the kit's server crash checks start. Needs
the ``postgres`` extra (psycopg 3 and psycopg-pool). docs/postgres.md is the
reference.
"""

from .checkpointer import (
    DEFAULT_BUSY_TIMEOUT_MS,
    DEFAULT_POOL_SIZE,
    DSN_ENVIRONMENT,
    MIGRATIONS,
    SCHEMA_VERSION,
    ConnectionLostError,
    PostgresCheckpointer,
    ServerUnreachableError,
    check_dsn,
    dsn_from,
    make,
    open_store,
    store_version,
)
from .schema import DEFAULT_SCHEMA
from .stores import MARKER_NAME, drop_store, prune_stores

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_MS",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_SCHEMA",
    "DSN_ENVIRONMENT",
    "MARKER_NAME",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "ConnectionLostError",
    "PostgresCheckpointer",
    "ServerUnreachableError",
    "check_dsn",
    "drop_store",
    "dsn_from",
    "make",
    "open_store",
    "prune_stores",
    "store_version",
]
