"""LangGraph's own conformance suite (langgraph-checkpoint-conformance 0.0.2), test by test,
mapped to the rules of the LangGraph saver contract that state what it checks (the
first its main one). docs/langgraph.md shows the same table; tests/savers keeps
both complete against the installed package."""

from __future__ import annotations

from typing import Final

OFFICIAL_TESTS: Final[dict[str, tuple[str, ...]]] = {
    # -- test_put (ALL_PUT_TESTS, 17) --
    "test_put.test_put_returns_config": (
        "LGPUT-001",
    ),  # aput returns config with thread, ns and the checkpoint's id
    "test_put.test_put_roundtrip": (
        "LGPUT-001",
        "LGCHAN-001",
    ),  # put then get_tuple: same id, same channel_values
    "test_put.test_put_preserves_channel_values": (
        "LGCHAN-001",
    ),  # str/int/list/dict channel values read back equal
    "test_put.test_put_preserves_channel_versions": (
        "LGCHAN-002",
    ),  # channel_versions read back (int/str leniency)
    "test_put.test_put_preserves_versions_seen": (
        "LGCHAN-002",
    ),  # versions_seen node keys read back
    "test_put.test_put_preserves_metadata": (
        "LGPUT-002",
    ),  # metadata source, step and a custom key read back
    "test_put.test_put_root_namespace": (
        "LGPUT-001",
        "LGGET-003",
    ),  # put in ns "" is found; tuple config ns is ""
    "test_put.test_put_child_namespace": (
        "LGPUT-001",
        "LGGET-003",
    ),  # put in ns "child:abc" found; tuple names that ns
    "test_put.test_put_default_namespace": (
        "LGPUT-001",
    ),  # put with ns "" is found (body passes ns despite docstring)
    "test_put.test_put_multiple_checkpoints_same_thread": (
        "LGPUT-001",
        "LGGET-003",
    ),  # 3 chained puts each found by id
    "test_put.test_put_multiple_threads_isolated": (
        "LGPUT-004",
    ),  # two threads' latest keep their own channel value
    "test_put.test_put_parent_config": (
        "LGPUT-003",
    ),  # parent_config names the checkpoint_id the put config named
    "test_put.test_put_incremental_channel_update": (
        "LGCHAN-001",
    ),  # unrewritten channel read from earlier version
    "test_put.test_put_new_channel_added": (
        "LGCHAN-001",
    ),  # new channel + unchanged channel both read back
    "test_put.test_put_channel_removed": (
        "LGCHAN-002",
        "LGCHAN-001",
    ),  # channel dropped from versions is absent
    "test_put.test_put_preserves_run_id": ("LGPUT-002",),  # metadata run_id reads back
    "test_put.test_put_preserves_versions_seen_values": (
        "LGCHAN-002",
    ),  # versions_seen per-node versions read back
    # -- test_put_writes (ALL_PUT_WRITES_TESTS, 10) --
    "test_put_writes.test_put_writes_basic": (
        "LGWRITE-001",
    ),  # one write reads back as (task_id, channel, value)
    "test_put_writes.test_put_writes_multiple_writes_same_task": (
        "LGWRITE-001",
    ),  # 3 writes of a task (order unchecked)
    "test_put_writes.test_put_writes_multiple_tasks": (
        "LGWRITE-001",
    ),  # same channel from two tasks: both kept
    "test_put_writes.test_put_writes_preserves_task_id": (
        "LGWRITE-001",
    ),  # pending write carries the task_id given
    "test_put_writes.test_put_writes_preserves_channel_and_value": (
        "LGWRITE-001",
    ),  # channel and dict value read back
    "test_put_writes.test_put_writes_task_path": (
        "LGWRITE-001",
    ),  # task_path accepted; the write reads back
    "test_put_writes.test_put_writes_idempotent": (
        "LGWRITE-002",
    ),  # same write put twice is stored once
    "test_put_writes.test_put_writes_special_channels": (
        "LGWRITE-001",
    ),  # __error__/__interrupt__ in one call read back
    "test_put_writes.test_put_writes_across_namespaces": (
        "LGWRITE-004",
        "LGPUT-004",
    ),  # root/child ns writes apart
    "test_put_writes.test_put_writes_cleared_on_next_checkpoint": (
        "LGWRITE-004",
    ),  # new checkpoint has no writes
    # -- test_get_tuple (ALL_GET_TUPLE_TESTS, 10) --
    "test_get_tuple.test_get_tuple_nonexistent_returns_none": (
        "LGGET-002",
        "LGGET-001",
    ),  # unknown thread gives None
    "test_get_tuple.test_get_tuple_latest_when_no_checkpoint_id": (
        "LGGET-001",
    ),  # no id: the last of 3 puts
    "test_get_tuple.test_get_tuple_specific_checkpoint_id": (
        "LGPUT-001",
        "LGGET-003",
    ),  # explicit id: that one, not latest
    "test_get_tuple.test_get_tuple_config_structure": (
        "LGGET-003",
    ),  # tuple config has thread_id, ns "", checkpoint id
    "test_get_tuple.test_get_tuple_checkpoint_fields": (
        "LGGET-003",
        "LGCHAN-001",
    ),  # id, v, ts, values, version keys
    "test_get_tuple.test_get_tuple_metadata": (
        "LGPUT-002",
    ),  # metadata source="input", step=-1 read back
    "test_get_tuple.test_get_tuple_parent_config": (
        "LGPUT-003",
    ),  # parent_config None for first, parent id for 2nd
    "test_get_tuple.test_get_tuple_pending_writes": (
        "LGWRITE-001",
    ),  # the one write reads back exactly
    "test_get_tuple.test_get_tuple_respects_namespace": (
        "LGPUT-004",
        "LGPUT-001",
    ),  # root and child ns each found
    "test_get_tuple.test_get_tuple_nonexistent_checkpoint_id": (
        "LGGET-002",
    ),  # unknown id in known thread gives None
    # -- test_list (ALL_LIST_TESTS, 16) --
    "test_list.test_list_all": ("LGLIST-001",),  # no filter: all 4 checkpoints of the thread
    "test_list.test_list_by_thread": (
        "LGLIST-001",
    ),  # unknown thread yields 0; the real thread yields 4
    "test_list.test_list_by_namespace": (
        "LGLIST-001",
        "LGPUT-004",
    ),  # ns "" and ns "child:1" each yield only their 1
    "test_list.test_list_ordering": ("LGLIST-001",),  # newest first (descending checkpoint_id)
    "test_list.test_list_metadata_filter_single_key": (
        "LGLIST-002",
    ),  # filter source="input" yields its 2
    "test_list.test_list_metadata_filter_step": ("LGLIST-002",),  # filter step=1 yields its 1
    "test_list.test_list_metadata_filter_multiple_keys": (
        "LGLIST-002",
    ),  # two-key filter: all keys must match
    "test_list.test_list_metadata_filter_no_match": (
        "LGLIST-002",
    ),  # two-key filter matching nothing yields none
    "test_list.test_list_metadata_custom_keys": (
        "LGLIST-002",
        "LGPUT-002",
    ),  # filter on custom key; metadata read back
    "test_list.test_list_before": ("LGLIST-003",),  # before=3rd id yields exactly the 2 older
    "test_list.test_list_limit": ("LGLIST-004",),  # limit=1 yields 1, limit=2 yields 2
    "test_list.test_list_limit_plus_before": (
        "LGLIST-004",
        "LGLIST-003",
    ),  # before+limit=1: the newest older one
    "test_list.test_list_combined_thread_and_filter": (
        "LGLIST-002",
        "LGLIST-001",
    ),  # thread + source="loop" filter
    "test_list.test_list_empty_result": (
        "LGLIST-001",
        "LGLIST-002",
    ),  # unknown thread with a filter yields nothing
    "test_list.test_list_includes_pending_writes": (
        "LGWRITE-001",
        "LGLIST-001",
    ),  # listed tuple carries its write
    "test_list.test_list_multiple_namespaces": (
        "LGLIST-001",
        "LGPUT-004",
    ),  # 3 namespaces; ns "" lists only root
    # -- test_delete_thread (ALL_DELETE_THREAD_TESTS, 5) --
    "test_delete_thread.test_delete_thread_removes_checkpoints": (
        "LGDEL-001",
    ),  # get_tuple None, list empty after
    "test_delete_thread.test_delete_thread_removes_writes": (
        "LGDEL-001",
    ),  # thread with a write: get_tuple None after
    "test_delete_thread.test_delete_thread_removes_all_namespaces": (
        "LGDEL-001",
    ),  # root and child ns both gone
    "test_delete_thread.test_delete_thread_preserves_other_threads": (
        "LGDEL-001",
    ),  # the other thread still found
    "test_delete_thread.test_delete_thread_nonexistent_noop": (
        "LGDEL-001",
    ),  # unknown thread: no error
    # -- test_delete_for_runs (ALL_DELETE_FOR_RUNS_TESTS, 7) --
    "test_delete_for_runs.test_delete_for_runs_single": (
        "LGRUNS-001",
    ),  # run1's checkpoint gone, run2's kept
    "test_delete_for_runs.test_delete_for_runs_multiple": (
        "LGRUNS-001",
    ),  # two of three runs deleted, third kept
    "test_delete_for_runs.test_delete_for_runs_preserves_other_runs": (
        "LGRUNS-001",
    ),  # unrelated run kept
    "test_delete_for_runs.test_delete_for_runs_removes_writes": (
        "LGRUNS-001",
    ),  # checkpoint with a write: get None
    "test_delete_for_runs.test_delete_for_runs_empty_list_noop": (
        "LGRUNS-001",
    ),  # empty run list: no error
    "test_delete_for_runs.test_delete_for_runs_nonexistent_noop": (
        "LGRUNS-001",
    ),  # unknown run_id: no error
    "test_delete_for_runs.test_delete_for_runs_across_namespaces": (
        "LGRUNS-001",
    ),  # run gone from root and child ns
    # -- test_copy_thread (ALL_COPY_THREAD_TESTS, 8) --
    "test_copy_thread.test_copy_thread_basic": (
        "LGCOPY-001",
    ),  # target lists the 3 copied checkpoints
    "test_copy_thread.test_copy_thread_all_checkpoints": (
        "LGCOPY-001",
    ),  # same count and channel_values as source
    "test_copy_thread.test_copy_thread_preserves_metadata": (
        "LGCOPY-001",
    ),  # copied metadata equals source's
    "test_copy_thread.test_copy_thread_preserves_namespaces": (
        "LGCOPY-001",
    ),  # root and child ns both copied
    "test_copy_thread.test_copy_thread_preserves_writes": (
        "LGCOPY-001",
    ),  # the pending write is copied
    "test_copy_thread.test_copy_thread_preserves_ordering": (
        "LGCOPY-001",
    ),  # target list ids/order equal source's
    "test_copy_thread.test_copy_thread_source_unchanged": (
        "LGCOPY-001",
    ),  # source ids unchanged after copy
    "test_copy_thread.test_copy_thread_nonexistent_source": (
        "LGCOPY-001",
    ),  # unknown source: target empty (raise ok)
    # -- test_prune (ALL_PRUNE_TESTS, 8) --
    "test_prune.test_prune_keep_latest_single_thread": (
        "LGPRUNE-001",
    ),  # keep_latest leaves only the last of 4
    "test_prune.test_prune_keep_latest_multiple_threads": (
        "LGPRUNE-001",
    ),  # each of two threads keeps its latest
    "test_prune.test_prune_keep_latest_across_namespaces": (
        "LGPRUNE-001",
    ),  # latest kept per namespace
    "test_prune.test_prune_keep_latest_preserves_writes": (
        "LGPRUNE-001",
    ),  # latest's pending write survives
    "test_prune.test_prune_delete_all": (
        "LGPRUNE-002",
    ),  # strategy="delete" leaves the thread empty
    "test_prune.test_prune_preserves_other_threads": (
        "LGPRUNE-001",
    ),  # unlisted thread's ids unchanged
    "test_prune.test_prune_empty_list_noop": ("LGPRUNE-001",),  # empty thread list: no error
    "test_prune.test_prune_nonexistent_noop": ("LGPRUNE-001",),  # unknown thread: no error
}
