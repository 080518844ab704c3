"""The LangGraph saver contract's rules: what a ``BaseCheckpointSaver`` promises.

Each rule states what LangGraph's base class and docs promise of a checkpoint
saver (`put`, `put_writes`, `get_tuple`, `list`, `delete_thread` and the
extended `delete_for_runs`, `copy_thread`, `prune`), or, where they are silent,
what a saver must do for a graph's state not to be lost or corrupted; those say
so and why. They are the langgraph suite of the catalog (``--langgraph``), with
one level, ``langgraph``. An extended operation a saver does not implement is
not held against it: its rules are skipped, as LangGraph's own conformance suite
reports the capability "not implemented".

Ids are ``LG<AREA>-NNN`` so that they never meet the checkpointer's.
"""

from __future__ import annotations

from typing import Final

from ..capabilities import Capability
from ..rule_kinds import ConformanceLevel, Rule, RuleSuite, Strength

__all__ = ["LANGGRAPH_DECLARABLE", "LANGGRAPH_RULES"]

LANGGRAPH_DECLARABLE: Final[dict[Capability, str]] = {
    Capability.DURABLE: (
        "every answered put and put_writes survives a killed process, a power loss, and "
        "its server killed or its server's host power-cut"
    ),
    Capability.MULTI_PROCESS: "savers in several processes may use one store at once",
}
"""What a saver's author may declare of it (``--declare``): LangGraph's interface
says neither, and a saver cannot show either on its object. The rules needing one
are skipped for a saver that does not declare it."""


def _must(rule_id: str, title: str, statement: str, capability: Capability | None = None) -> Rule:
    return Rule(
        rule_id,
        Strength.MUST,
        capability,
        RuleSuite.LANGGRAPH,
        ConformanceLevel.LANGGRAPH,
        title,
        statement,
        since="0.9",
    )


LANGGRAPH_RULES: Final[tuple[Rule, ...]] = (
    # -- put -------------------------------------------------------------------------
    _must(
        "LGPUT-001",
        "A put checkpoint is kept and named",
        "put(config, checkpoint, metadata, new_versions) returns a config naming the "
        "config's thread_id and checkpoint_ns and the checkpoint's id, and from then on "
        "get_tuple and list find that checkpoint under that thread and namespace until "
        "it is deleted.",
    ),
    _must(
        "LGPUT-002",
        "Metadata reads back as put",
        "A checkpoint's metadata reads back equal to the metadata put (after LangGraph's "
        "get_checkpoint_metadata, which adds the config's own scalar keys), every key and "
        "value, nested values and text included.",
    ),
    _must(
        "LGPUT-003",
        "The parent is the checkpoint the config named",
        "A checkpoint's parent_config names the checkpoint_id of the config it was put "
        "with, in the same thread and namespace, and is None when that config named no "
        "checkpoint.",
    ),
    _must(
        "LGPUT-004",
        "Threads and namespaces are apart",
        "A checkpoint, its values and its writes are seen only under its own thread_id "
        "and checkpoint_ns: a checkpoint with the same id in another thread or namespace "
        "is another checkpoint.",
    ),
    # -- channel values --------------------------------------------------------------
    _must(
        "LGCHAN-001",
        "Channel values read back as of the checkpoint's versions",
        "A checkpoint read back has, for every channel of its channel_versions whose "
        "value was given, the value given at that version, equal in type and content; a "
        "channel not rewritten by this put (absent from new_versions) still reads back "
        "the value an earlier checkpoint of the thread stored at that version.",
    ),
    _must(
        "LGCHAN-002",
        "Versions read back as put; removed channels are gone",
        "A checkpoint read back has the channel_versions and versions_seen it was put "
        "with, and no value "
        "for a channel its channel_versions do not name (a channel removed since the "
        "parent) or for a channel put empty (in new_versions, absent from "
        "channel_values).",
    ),
    # -- pending writes --------------------------------------------------------------
    _must(
        "LGWRITE-001",
        "Pending writes read back in order",
        "Writes put with put_writes(config, writes, task_id, task_path) read back as the "
        "checkpoint's pending_writes, each as (task_id, channel, value), in "
        "writes_sort_key order (task_path, task_id, then the write's index, where a "
        "special channel's index is its WRITES_IDX_MAP entry).",
    ),
    _must(
        "LGWRITE-002",
        "A repeated write is kept once, the first",
        "A regular write whose (task_id, index) the checkpoint already holds is not "
        "stored again and does not replace the first: putting the same writes twice "
        "(a retried task) leaves the pending writes as after the first time.",
    ),
    _must(
        "LGWRITE-003",
        "A special write replaces the task's earlier one",
        "A put_writes of special channels only (__error__, __scheduled__, __interrupt__, "
        "__resume__) replaces the same task's earlier write to that channel: the last "
        "error or interrupt of a task is the one read back.",
    ),
    _must(
        "LGWRITE-004",
        "Writes belong to their checkpoint",
        "Pending writes are seen only on the checkpoint whose config they were put with: "
        "a new checkpoint starts with none, and writes of another checkpoint, namespace "
        "or thread are never among them.",
    ),
    # -- get_tuple ---------------------------------------------------------------------
    _must(
        "LGGET-001",
        "Without an id, the latest checkpoint",
        "get_tuple of a config without checkpoint_id returns the checkpoint of that thread "
        "and namespace with the greatest checkpoint_id (ids increase, so the last put), "
        "and None when there is none.",
    ),
    _must(
        "LGGET-002",
        "An unknown checkpoint is None",
        "get_tuple of a checkpoint_id, thread or namespace the saver does not hold "
        "returns None: never another checkpoint in its place and never an error.",
    ),
    _must(
        "LGGET-003",
        "A tuple's config names its checkpoint",
        "A CheckpointTuple's config names the thread_id, checkpoint_ns and checkpoint_id "
        "of the checkpoint it carries, its checkpoint's id is that checkpoint_id, and its "
        "v and ts are those the checkpoint was put with.",
    ),
    # -- list --------------------------------------------------------------------------
    _must(
        "LGLIST-001",
        "list yields a thread's checkpoints newest first",
        "list(config) yields every checkpoint of the config's thread (of its "
        "checkpoint_ns when the config has one, of every namespace when it has none; the "
        "one checkpoint when it names a checkpoint_id), each once, and within a "
        "namespace in descending checkpoint_id order.",
    ),
    _must(
        "LGLIST-002",
        "filter matches metadata key by key",
        "list(..., filter=F) yields exactly the checkpoints whose metadata has, for every "
        "key of F, a value equal to F's (a missing key equals None).",
    ),
    _must(
        "LGLIST-003",
        "before yields only older checkpoints",
        "list(..., before=B) yields exactly the checkpoints whose checkpoint_id is less "
        "than B's checkpoint_id, so that paging with the last id seen never repeats or "
        "skips one.",
    ),
    _must(
        "LGLIST-004",
        "limit yields the first checkpoints",
        "list(..., limit=N) yields the first N checkpoints the same call without limit "
        "yields (all of them when there are fewer); limit=0 yields none.",
    ),
    _must(
        "LGLIST-005",
        "list(None) yields every thread",
        "list(None) yields every checkpoint of every thread the saver holds, each once "
        "and with its filter applied; the order across threads and namespaces is the "
        "saver's (LangGraph does not fix it), within one the newest first.",
    ),
    # -- delete_thread -----------------------------------------------------------------
    _must(
        "LGDEL-001",
        "delete_thread removes a thread whole and nothing else",
        "After delete_thread(thread_id), no checkpoint, value or pending write of that "
        "thread is found in any namespace, and every other thread reads back as before; "
        "deleting an unknown thread changes nothing and raises nothing.",
    ),
    # -- extended operations -----------------------------------------------------------
    _must(
        "LGRUNS-001",
        "delete_for_runs removes those runs' checkpoints only",
        "After delete_for_runs(run_ids), no checkpoint whose metadata run_id is one of "
        "run_ids is found, nor its pending writes, in any thread or namespace; every "
        "other checkpoint reads back as before, its values too (a value a remaining "
        "checkpoint shares with a deleted one is not lost: silent in LangGraph's docs, "
        "required so that no remaining state is corrupted). Run ids no checkpoint has "
        "change nothing and raise nothing.",
    ),
    _must(
        "LGCOPY-001",
        "copy_thread copies a thread whole",
        "After copy_thread(source, target) onto a target with no checkpoints, the target "
        "reads back as the source did (every namespace, checkpoint id, order, metadata, "
        "parent, channel value and pending write) and the source is unchanged. Copying a "
        "thread with no checkpoints may do nothing or raise (LangGraph's suite allows "
        "both): the kit does not ask it.",
    ),
    _must(
        "LGPRUNE-001",
        "prune keep_latest keeps the latest of each namespace",
        "After prune(thread_ids) (strategy keep_latest), each namespace of those threads "
        "holds only its latest checkpoint, which reads back whole (values and pending "
        "writes) with no parent (its parent is pruned: a parent_config naming it would "
        "lead a graph's history to a checkpoint that is gone, and LangGraph's "
        "PostgresSaver documents None); other threads are unchanged, and unknown threads "
        "change nothing and raise nothing.",
    ),
    _must(
        "LGPRUNE-002",
        "prune delete removes the threads",
        "After prune(thread_ids, strategy='delete'), those threads hold nothing, as after "
        "delete_thread; other threads are unchanged.",
    ),
    # -- the saver as a whole ----------------------------------------------------------
    _must(
        "LGTWIN-001",
        "The sync and async twins are one saver",
        "Where a saver offers both the synchronous method and its async twin (put and "
        "aput, list and alist, ...), what either stores the other reads, and both give "
        "the same answers.",
    ),
    _must(
        "LGSETUP-001",
        "setup() may run again",
        "Where a saver has setup(), calling it again on a saver in use, and on two savers "
        "of one store at once, raises nothing and keeps every checkpoint and pending "
        "write the store holds. Silent in LangGraph's docs; applications call setup() on "
        "every start, often from several processes at once, and a migration that is not "
        "idempotent, or that they race on, fails them or loses a graph's state.",
    ),
    _must(
        "LGSETUP-002",
        "setup() at once on a fresh store",
        "setup() run at once by several savers of one store nobody has set up yet (the "
        "workers of a deployment starting together) raises in none of them and leaves "
        "the store complete: every saver then stores and reads. Silent in LangGraph's "
        "docs, which ask every saver to run setup() before its first use; workers "
        "starting at once do exactly that. Checked for savers whose factory leaves "
        "setup() to the caller when its options say setup=caller.",
    ),
    _must(
        "LGSETUP-003",
        "setup() in a caller's transaction",
        "setup() run inside a transaction the caller opened on the saver's connection "
        "either completes, or raises and leaves the store as it was: setup() run "
        "afterwards outside a transaction then sets the store up whole, and it keeps and "
        "reads a graph's calls. Silent in LangGraph's docs; applications run migrations "
        "inside transactions, and a setup() that records a migration its failed "
        "transaction undid leaves a store every later setup() trusts. Checked for savers "
        "whose conn attribute has transaction() (psycopg's connections) and whose "
        "factory leaves setup() to the caller when its options say setup=caller.",
    ),
    _must(
        "LGKILL-001",
        "A killed writer leaves whole checkpoints",
        "A process killed at any moment of its calls leaves the saver as some of its "
        "calls in order left it: every call answered before the kill reads back, and the "
        "call cut short is whole or absent (no checkpoint without its values, no half of "
        "a put_writes). Silent in LangGraph's docs; a graph's process can die at any "
        "moment, and a resumed graph reads what it left. Checked for savers that keep "
        "their data in files under the store's directory.",
    ),
    _must(
        "LGMP-001",
        "Concurrent tasks lose nothing",
        "Calls made at once by several tasks of one process on one saver (a graph's "
        "parallel nodes writing their pending writes while another thread is put and "
        "read) have the outcome of some order of them one at a time: no acknowledged "
        "checkpoint or write is lost, duplicated or attached to another checkpoint. "
        "LangGraph's docs state no concurrency contract; parallel nodes call put_writes "
        "at once, so a saver that cannot take it loses a graph's state.",
    ),
    _must(
        "LGMP-002",
        "Savers in several processes lose nothing",
        "Calls made at once through savers of one store in several processes (graphs "
        "run by several workers on one database) have the outcome of some order of them "
        "one at a time: no acknowledged checkpoint or write is lost, duplicated or "
        "attached to another checkpoint. For savers declared multi_process: LangGraph's "
        "docs state no concurrency contract, and a deployment with several workers "
        "relies on one.",
        Capability.MULTI_PROCESS,
    ),
    _must(
        "LGPOWER-001",
        "A power loss keeps every answered call",
        "After a power loss at any moment of a writer's calls, the saver reads as some "
        "of its calls in order left it, with every call answered before the loss among "
        "them and the call in flight whole or absent. For savers declared durable that "
        "keep their data in files under the store's directory: what was answered is what "
        "a resumed graph starts from.",
        Capability.DURABLE,
    ),
    _must(
        "LGSRV-001",
        "A killed server keeps every answered call",
        "After the database server a saver keeps its data in is killed at any moment of "
        "the saver's calls and started again, the saver reads as some of its calls in "
        "order left it, with every call answered before the kill among them and the call "
        "cut short whole or absent (no checkpoint without its values, no half of a "
        "put_writes). For savers declared durable that take their server's URL from the "
        "options they are opened with (dsn): a server restarts after a crash, and a "
        "resumed graph reads what it kept.",
        Capability.DURABLE,
    ),
    _must(
        "LGSRV-002",
        "A cut connection keeps every answered call",
        "When a saver's connections to its database server are cut at any byte of its "
        "calls (a response lost, a request torn, a reset), every call answered before "
        "reads back afterwards, and every call that raised is whole or absent (no "
        "checkpoint without its values, no half of a put_writes). For savers that take "
        "their server's URL from the options they are opened with (dsn): networks drop "
        "connections, and a graph retried after the error reads what was kept.",
    ),
    _must(
        "LGSRV-003",
        "A power cut of the server's host keeps every answered call",
        "After a power cut of the host of the database server a saver keeps its data in, "
        "at any moment of the saver's calls, the server started again on what its disk "
        "kept reads as some of the calls in order left it, with every call answered "
        "before the cut among them and the call in flight whole or absent. For savers "
        "declared durable that take their server's URL from the options they are opened "
        "with (dsn): an answered call is what a resumed graph starts from.",
        Capability.DURABLE,
    ),
    _must(
        "LGCODEC-001",
        "A failed serialisation stores nothing",
        "A put or put_writes during which the saver's serde fails to serialise a value "
        "raises, and leaves the saver as it was: no checkpoint without its channel "
        "values, no part of the writes; the saver keeps working. Silent in LangGraph's "
        "docs; a graph resumed after the error treats a task with any writes as done, so "
        "half of a task's writes is a task's output lost for good.",
    ),
    _must(
        "LGCODEC-002",
        "A failed deserialisation is never an answer",
        "A get_tuple or list during which the saver's serde fails to deserialise a value "
        "raises; it never answers with the value missing or another in its place, and "
        "once the serde works again every checkpoint and write reads back as it was put "
        "(nothing dropped or rewritten because it did not load). Silent in LangGraph's "
        "docs; a graph handed a checkpoint short of a channel runs on from a state it "
        "never had.",
    ),
)
"""The LangGraph saver contract, in the order SPEC.md lists it."""
