"""InMemorySaver.put_writes keeps the writes before a value it cannot serialise.

A task's writes are one call: when the second value fails to serialise, put_writes
raises, yet the first write stays pending. A graph resumed after the error takes a
task with pending writes as done, so the task is not run again and its second write
is lost for good (SqliteSaver serialises every value first and stores none).
Runs with ``langgraph-checkpoint`` alone; exits 1 while the defect is there.
"""

import threading

from langgraph.checkpoint.memory import InMemorySaver

saver = InMemorySaver()
config = saver.put(
    {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}},
    {
        "v": 4,
        "id": "1ef4f797-8335-6428-8001-8a1503f9b875",
        "ts": "2024-07-31T20:14:19.804150+00:00",
        "channel_values": {},
        "channel_versions": {},
        "versions_seen": {},
    },
    {},
    {},
)
try:
    saver.put_writes(config, [("a", 1), ("b", threading.Lock())], task_id="task-1")
except TypeError as exc:
    print(f"put_writes raised {type(exc).__name__}: {exc}")
pending = saver.get_tuple(config).pending_writes
print(f"pending writes after it raised: {pending}")
assert pending == [], "put_writes raised, yet kept part of the task's writes"
