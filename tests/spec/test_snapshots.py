"""Unit tests of the snapshot helpers: paths, content encoding, hashes (SNAP-001..003).

Expected values are worked out from the docstrings in spec/snapshots.py and the
rule statements, never copied from a run.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
from checkpointspec.spec import (
    ABSENT_HASH,
    DEFAULT_SNAPSHOT_LIMIT,
    FileSnapshot,
    InvalidArgumentError,
    ReasonCode,
    SnapshotContentError,
    canonical_path,
    content_hash,
    encode_content,
    make_snapshot,
    snapshot_content,
)


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("a.txt", "a.txt"),
        ("dir/a.txt", "dir/a.txt"),
        ("./a.txt", "a.txt"),
        ("dir//a.txt", "dir/a.txt"),
        ("dir/./a.txt", "dir/a.txt"),
        ("dir/", "dir"),
        ("..a/b..", "..a/b.."),
        ("ünï cöde", "ünï cöde"),
        ("back\\slash", "back\\slash"),
    ],
)
def test_snap_003_paths_are_recorded_canonical(given: str, canonical: str) -> None:
    assert canonical_path(given) == canonical


@pytest.mark.parametrize(
    "path",
    [
        "",
        ".",
        "./",
        "//",
        "/etc/passwd",
        "/",
        "..",
        "../a",
        "a/..",
        "a/../b",
        "a/b/../../c",
        "nul\x00",
        "\udc80",
        ".checkpointspec/journal",
        "./.CheckpointSpec/x",
        ".checkpointspec",
    ],
)
def test_snap_003_unsafe_paths_are_refused(path: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        canonical_path(path)
    assert refused.value.reason_code is ReasonCode.UNSAFE_PATH
    assert refused.value.rule_id == "SNAP-003"
    assert refused.value.argument == "path"


@pytest.mark.parametrize("path", [None, b"a.txt", 3, ["a"]])
def test_snap_003_a_path_that_is_not_a_str_is_refused(path: object) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        canonical_path(path)  # type: ignore[arg-type]
    assert refused.value.reason_code is ReasonCode.UNSAFE_PATH


def test_content_hash_is_sha256_or_absent() -> None:
    assert content_hash(b"abc") == hashlib.sha256(b"abc").hexdigest()
    assert content_hash(b"") == hashlib.sha256(b"").hexdigest()
    assert content_hash(None) == ABSENT_HASH


def test_encode_content_keeps_utf8_as_text_and_the_rest_as_base64() -> None:
    assert encode_content("héllo".encode()) == ("héllo", "utf-8")
    assert encode_content(b"") == ("", "utf-8")
    assert encode_content(b"\xff\x00") == (base64.b64encode(b"\xff\x00").decode(), "base64")


@pytest.mark.parametrize("content", [b"", b"text", "ünï".encode(), bytes(range(256))])
def test_snapshot_content_puts_back_what_make_snapshot_kept(content: bytes) -> None:
    snapshot = make_snapshot("f", content, b"after")
    assert snapshot_content(snapshot) == content


def test_snapshot_content_of_an_absent_file_is_none() -> None:
    assert snapshot_content(FileSnapshot("f", None)) is None
    assert snapshot_content(FileSnapshot("f", None, encoding="base64")) is None


@pytest.mark.parametrize(
    "snapshot",
    [
        FileSnapshot("f", "not base64!", encoding="base64"),
        FileSnapshot("f", "QQ", encoding="base64"),  # missing padding
        FileSnapshot("f", "\udc80"),
    ],
)
def test_snapshot_content_refuses_what_does_not_decode(snapshot: FileSnapshot) -> None:
    with pytest.raises(SnapshotContentError):
        snapshot_content(snapshot)


def test_snap_001_make_snapshot_of_a_create_a_change_and_a_delete() -> None:
    assert make_snapshot("f", None, b"new", tool_call_id="c") == FileSnapshot(
        "f", None, hash_after=content_hash(b"new"), tool_call_id="c"
    )
    assert make_snapshot("f", b"old", b"new") == FileSnapshot(
        "f", "old", hash_after=content_hash(b"new")
    )
    assert make_snapshot("f", b"\xfe", None) == FileSnapshot(
        "f", base64.b64encode(b"\xfe").decode(), encoding="base64", hash_after=ABSENT_HASH
    )


def test_snap_002_content_over_the_limit_is_truncated() -> None:
    at_limit = make_snapshot("f", b"1234", b"x", limit=4)
    over = make_snapshot("f", b"12345", b"x", limit=4)
    assert (at_limit.truncated, at_limit.content_before) == (False, "1234")
    assert (over.truncated, over.content_before) == (True, "")
    assert over.hash_after == content_hash(b"x")
    assert make_snapshot("f", None, b"x" * 10, limit=4).truncated is False


def test_snap_002_the_default_limit_is_one_mebibyte() -> None:
    assert DEFAULT_SNAPSHOT_LIMIT == 1 << 20
    assert not make_snapshot("f", b"x" * DEFAULT_SNAPSHOT_LIMIT, None).truncated
    assert make_snapshot("f", b"x" * (DEFAULT_SNAPSHOT_LIMIT + 1), None).truncated
