"""PostgresSaver changes or refuses channel values it keeps inline in JSONB.

put() keeps str/int/float/bool/None channel values inline in the ``checkpoint``
JSONB column (other values go through the serializer into checkpoint_blobs).
JSONB keeps numbers as ``numeric``: a float Python writes in exponent form
(abs >= 1e16) comes back as an int, -0.0 loses its sign; NaN and infinity are
not JSON and text with a NUL is not valid jsonb text, so put() raises.
InMemorySaver and SqliteSaver return every one as put. Needs
``langgraph-checkpoint-postgres`` and a server: ``DB_URI=postgresql://...``;
exits 1 while the defect is there.
"""

import math
import os
import secrets

import psycopg
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.conninfo import make_conninfo

DSN = os.environ["DB_URI"]
VALUES = {
    "1e16": 1e16,
    "2.5e20": 2.5e20,
    "neg_zero": -0.0,
    "nan": float("nan"),
    "inf": float("inf"),
    "nul_text": "a\x00b",
    "0.5": 0.5,  # comes back as put
}


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        both_nan = math.isnan(a) and math.isnan(b)
        return both_nan or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b


def round_trip(saver: PostgresSaver, thread: str, value: object) -> object:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"ch": value}
    checkpoint["channel_versions"] = {"ch": "1"}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    try:
        saver.put(config, checkpoint, {"step": 1}, {"ch": "1"})
    except Exception as exc:
        return f"put() raised {type(exc).__name__}: {str(exc).splitlines()[0]}"
    return saver.get_tuple(config).checkpoint["channel_values"]["ch"]


name = f"inline_{secrets.token_hex(4)}"
with psycopg.connect(DSN, autocommit=True) as admin:
    admin.execute(f'CREATE DATABASE "{name}"')
try:
    differ = []
    with PostgresSaver.from_conn_string(make_conninfo(DSN, dbname=name)) as saver:
        saver.setup()
        for label, value in VALUES.items():
            got = round_trip(saver, label, value)
            print(f"{label:9} put {value!r:>12} -> got {got!r}")
            if not same(got, value):
                differ.append(label)
finally:
    with psycopg.connect(DSN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
assert not differ, f"channel values not returned as put: {differ}"
