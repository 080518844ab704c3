"""The error hierarchy (spec/errors.py): one root, facts as attributes, picklable.

Errors cross process boundaries (the kit's worker processes, ``-n`` runs), so
every class must survive pickling with its attributes and message intact.
`InvalidArgumentError` also carries a machine-readable `ReasonCode` and the rule
it enforces; which input gets which code is tested with the checks that raise
it (test_validation.py, test_events.py).
"""

from __future__ import annotations

import copy
import pickle

import pytest
from checkpointspec.spec import errors
from checkpointspec.spec.errors import (
    CheckpointConflictError,
    CheckpointerClosedError,
    CheckpointError,
    CodecError,
    CompactionError,
    CompactionReason,
    ConnectionLostError,
    CorruptStoreError,
    InvalidArgumentError,
    ReasonCode,
    RestoreError,
    RestoreReason,
    SchemaVersionError,
    SessionLockedError,
    StoreBusyError,
    UnsupportedOperationError,
)

# (error, the attributes it must carry). At least one case per class; the facts
# are the constructor's arguments, so nothing here is read back from the code.
CASES: list[tuple[CheckpointError, dict[str, object]]] = [
    (
        InvalidArgumentError("session_id", "must not be empty", ReasonCode.EMPTY, "ARG-001"),
        {
            "argument": "session_id",
            "reason": "must not be empty",
            "reason_code": ReasonCode.EMPTY,
            "rule_id": "ARG-001",
        },
    ),
    (
        InvalidArgumentError(
            "to_seq", "5 is beyond the head 3", ReasonCode.BEYOND_HEAD, "TRUNC-002"
        ),
        {
            "argument": "to_seq",
            "reason": "5 is beyond the head 3",
            "reason_code": ReasonCode.BEYOND_HEAD,
            "rule_id": "TRUNC-002",
        },
    ),
    (
        InvalidArgumentError("options", "unknown ['x']", ReasonCode.UNKNOWN_OPTION),
        {
            "argument": "options",
            "reason": "unknown ['x']",
            "reason_code": ReasonCode.UNKNOWN_OPTION,
            "rule_id": None,
        },
    ),
    (
        InvalidArgumentError("events", "too many"),
        {"argument": "events", "reason": "too many", "reason_code": None, "rule_id": None},
    ),
    (
        CheckpointConflictError("s/1", 2, 3),
        {"session_id": "s/1", "expected": 2, "actual": 3, "kind": "head"},
    ),
    (
        CheckpointConflictError("s", 0, 4, kind="generation"),
        {"session_id": "s", "expected": 0, "actual": 4, "kind": "generation"},
    ),
    (
        UnsupportedOperationError("truncate", "truncate"),
        {"operation": "truncate", "capability": "truncate"},
    ),
    (CheckpointerClosedError("read"), {"operation": "read"}),
    (
        CodecError("s", "decode", "authentication tag mismatch", seq=7),
        {
            "session_id": "s",
            "direction": "decode",
            "detail": "authentication tag mismatch",
            "seq": 7,
        },
    ),
    (
        CodecError("s", "encode", "key unavailable"),
        {"session_id": "s", "direction": "encode", "detail": "key unavailable", "seq": None},
    ),
    (
        CorruptStoreError("s", "record 12", "checksum mismatch"),
        {"session_id": "s", "location": "record 12", "detail": "checksum mismatch"},
    ),
    (
        CorruptStoreError(None, "header", "bad magic"),
        {"session_id": None, "location": "header", "detail": "bad magic"},
    ),
    (SchemaVersionError(3, 2), {"found": 3, "supported": 2}),
    (StoreBusyError("append", 1.25), {"operation": "append", "waited_seconds": 1.25}),
    (
        ConnectionLostError("truncate", "s1", "the server stayed unreachable"),
        {
            "operation": "truncate",
            "session_id": "s1",
            "detail": "the server stayed unreachable",
            "outcome": "unknown",
        },
    ),
    (SessionLockedError("s", "append"), {"session_id": "s", "operation": "append"}),
    (
        RestoreError("s", 4, RestoreReason.OUT_OF_BAND_CHANGE, "changed", "src/a.py"),
        {
            "session_id": "s",
            "seq": 4,
            "reason_code": RestoreReason.OUT_OF_BAND_CHANGE,
            "detail": "changed",
            "path": "src/a.py",
        },
    ),
    (
        CompactionError("s", CompactionReason.UNKNOWN_SESSION, "no events"),
        {"session_id": "s", "reason_code": CompactionReason.UNKNOWN_SESSION, "detail": "no events"},
    ),
    (CheckpointError("anything went wrong"), {"args": ("anything went wrong",)}),
]

ids = [f"{type(err).__name__}-{i}" for i, (err, _) in enumerate(CASES)]


def test_every_exported_error_class_has_a_case() -> None:
    exported = {getattr(errors, name) for name in errors.__all__} - {
        ReasonCode,
        RestoreReason,
        CompactionReason,
    }
    assert {type(err) for err, _ in CASES} == exported


@pytest.mark.parametrize(("err", "attributes"), CASES, ids=ids)
def test_every_error_derives_from_checkpoint_error(
    err: CheckpointError, attributes: dict[str, object]
) -> None:
    assert isinstance(err, CheckpointError)
    assert isinstance(err, Exception)


@pytest.mark.parametrize(("err", "attributes"), CASES, ids=ids)
def test_errors_carry_their_facts_as_attributes(
    err: CheckpointError, attributes: dict[str, object]
) -> None:
    assert {name: getattr(err, name) for name in attributes} == attributes


# The message is for people; the codes are for programs and are not repeated in it.
_CODES_NOT_IN_MESSAGES = {"args", "reason_code", "rule_id"}


@pytest.mark.parametrize(("err", "attributes"), CASES, ids=ids)
def test_messages_name_the_facts(err: CheckpointError, attributes: dict[str, object]) -> None:
    message = str(err)
    for name, value in attributes.items():
        if value is not None and name not in _CODES_NOT_IN_MESSAGES:
            assert str(value) in message, f"{name}={value!r} missing from {message!r}"


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize(("err", "attributes"), CASES, ids=ids)
def test_errors_pickle_with_attributes_intact(
    err: CheckpointError, attributes: dict[str, object], protocol: int
) -> None:
    clone = pickle.loads(pickle.dumps(err, protocol=protocol))
    assert type(clone) is type(err)
    assert {name: getattr(clone, name) for name in attributes} == attributes
    assert str(clone) == str(err)
    assert clone.args == err.args


@pytest.mark.parametrize(("err", "attributes"), CASES, ids=ids)
def test_errors_copy_with_attributes_intact(
    err: CheckpointError, attributes: dict[str, object]
) -> None:
    for clone in (copy.copy(err), copy.deepcopy(err)):
        assert type(clone) is type(err)
        assert {name: getattr(clone, name) for name in attributes} == attributes


def test_invalid_argument_error_is_also_a_value_error() -> None:
    assert isinstance(InvalidArgumentError("to_seq", "negative"), ValueError)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("code", list(ReasonCode))
def test_every_reason_code_survives_pickling_as_the_enum_member(
    code: ReasonCode, protocol: int
) -> None:
    err = InvalidArgumentError("x", "bad", code, "ARG-002")
    clone = pickle.loads(pickle.dumps(err, protocol=protocol))
    assert clone.reason_code is code
    assert clone.rule_id == "ARG-002"


def test_reason_codes_are_stable_snake_case_strings() -> None:
    # Programs (and the kit's JSON reports) see the value: it is the name, lower-cased.
    for code in ReasonCode:
        assert code.value == code.name.lower()
        assert code == code.value


def test_the_argument_reason_codes_are_the_documented_ones() -> None:
    # Renaming or dropping a code breaks callers that match on it: this list changes
    # only together with the catalog text in spec/errors.py and SPEC.md.
    assert {code.value for code in ReasonCode} == {
        "wrong_type",
        "empty",
        "too_long",
        "contains_nul",
        "not_utf8",
        "unsafe_path",
        "no_such_file",
        "not_a_file",
        "negative",
        "not_a_sequence",
        "not_an_event",
        "unstorable",
        "too_large",
        "beyond_head",
        "unknown_option",
        "bad_option",
    }


def test_conflict_kind_defaults_to_head() -> None:
    assert CheckpointConflictError("s", 1, 2).kind == "head"


def test_codec_error_message_names_the_seq_only_when_known() -> None:
    assert "seq 7" in str(CodecError("s", "decode", "bad", seq=7))
    assert "seq" not in str(CodecError("s", "decode", "bad"))


def test_corrupt_store_error_without_session_names_no_session() -> None:
    assert "session" not in str(CorruptStoreError(None, "header", "bad magic"))
    assert "'s'" in str(CorruptStoreError("s", "record 1", "bad"))


def test_errors_can_be_caught_by_the_root() -> None:
    for err, _ in CASES:
        with pytest.raises(CheckpointError):
            raise err
