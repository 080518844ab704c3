"""ID-002's probe ids: inside the contract, and merged by every naive storage name they aim at.

Each scheme below is a way a store might make a name from an id; it is confused
by the probes when two of them get the same name. Escaping only the escape
character (``%`` as ``%25``), escaping a character with a backslash and doubling
a character are injective on their own, so those are not schemes the probes must
break; reading backslash escapes back (``a\\:b`` as ``a:b``) is.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Hashable

import pytest
from checkpointspec.conformance.checks._id_probes import ID_PROBES, SEPARATORS
from checkpointspec.conformance.engines.machines.strategies import CONFUSABLE_IDS
from checkpointspec.spec import check_session_id


def _merges(name: Callable[[str], Hashable]) -> bool:
    seen: set[Hashable] = set()
    for probe in ID_PROBES:
        key = name(probe)
        if key in seen:
            return True
        seen.add(key)
    return False


def test_every_probe_is_a_valid_id_once_the_machines_pool_included() -> None:
    assert all(check_session_id(probe) == probe for probe in ID_PROBES)
    assert len(set(ID_PROBES)) == len(ID_PROBES)
    assert set(CONFUSABLE_IDS) <= set(ID_PROBES)
    assert len(ID_PROBES) < 500  # one pass stays cheap


@pytest.mark.parametrize("c", SEPARATORS, ids=[f"U+{ord(c):04X}" for c in SEPARATORS])
def test_a_separator_mapped_dropped_collapsed_escaped_or_stripped_merges_two_probes(
    c: str,
) -> None:
    percent = "".join(f"%{byte:02X}" for byte in c.encode("utf-8"))
    schemes: dict[str, Callable[[str], Hashable]] = {
        "dropped": lambda sid: sid.replace(c, ""),
        "collapsed": lambda sid: re.sub(f"{re.escape(c)}+", lambda _: c, sid),
        "stripped": lambda sid: sid.strip(c),
        "stripped at the end": lambda sid: sid.rstrip(c),
        "stripped at the start": lambda sid: sid.lstrip(c),
    }
    if c != "%":
        schemes["percent-escaped"] = lambda sid: sid.replace(c, percent)
        schemes["percent-escaped, lowercase"] = lambda sid: sid.replace(c, percent.lower())
    for d in SEPARATORS:
        if d != c:
            schemes[f"mapped to U+{ord(d):04X}"] = lambda sid, d=d: sid.replace(c, d)
    assert [scheme for scheme, name in schemes.items() if not _merges(name)] == []


@pytest.mark.parametrize(
    "name",
    [
        str.lower,
        str.upper,
        str.casefold,
        *(lambda sid, form=form: unicodedata.normalize(form, sid) for form in ("NFC", "NFD")),
        *(lambda sid, form=form: unicodedata.normalize(form, sid) for form in ("NFKC", "NFKD")),
        lambda sid: unicodedata.normalize("NFKD", sid).encode("ascii", "ignore"),
        str.strip,
        lambda sid: re.sub(r"\\(.)", r"\1", sid, flags=re.DOTALL),
    ],
    ids=["lower", "upper", "casefold", "NFC", "NFD", "NFKC", "NFKD", "ascii", "strip", "unescaped"],
)
def test_case_normalisation_and_whitespace_merge_two_probes(
    name: Callable[[str], Hashable],
) -> None:
    assert _merges(name)


def test_a_truncation_to_any_length_merges_two_probes() -> None:
    assert [n for n in range(1, 256) if not _merges(lambda sid, n=n: sid[:n])] == []
    # In bytes, up to the longest a 256-character id can be: 4 bytes per character.
    assert [n for n in range(1, 1021) if not _merges(lambda sid, n=n: sid.encode()[:n])] == []
