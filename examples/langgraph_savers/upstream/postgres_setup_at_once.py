"""PostgresSaver.setup() run at once by several savers of a fresh database raises.

LangGraph's docs ask every saver to run setup() before its first use, so the
workers of a deployment starting together run it at once. On a database nobody
has set up, all but one of them raise (CREATE TABLE IF NOT EXISTS racing on the
catalogue's unique index); the store ends complete. Needs
``langgraph-checkpoint-postgres`` and a server: ``DB_URI=postgresql://...``;
exits 1 while the defect is there.
"""

import os
import secrets
import threading

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

DSN = os.environ["DB_URI"]
WORKERS = 4

name = f"setup_at_once_{secrets.token_hex(4)}"
with psycopg.connect(DSN, autocommit=True) as admin:
    admin.execute(f'CREATE DATABASE "{name}"')
uri = make_conninfo(DSN, dbname=name)
start = threading.Barrier(WORKERS)
raised: list[str] = []


def worker() -> None:
    with psycopg.connect(uri, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        start.wait()
        try:
            saver.setup()
        except Exception as exc:
            raised.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


try:
    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
finally:
    with psycopg.connect(DSN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
for said in raised:
    print(f"setup() raised {said}")
assert not raised, f"{len(raised)} of {WORKERS} savers' setup() at once raised"
