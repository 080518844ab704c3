"""The session ids ID-002 writes side by side: every pair a naive storage name would confuse.

A store keeps each log under a name made from its id (a file name, a key, a row);
the mapping must be injective. The probes are built so that each common way of
making a name breaks it on some pair of them:

- **separators and escapes**: for every printable ASCII punctuation character and
  every whitespace character ``c`` (and a few non-ASCII look-alikes of ``/``, ``:``,
  ``.``, ``-`` and space), ``a{c}b`` stands beside ``a{d}b`` for every other such
  ``d`` (``c`` mapped to another character: ``a:b`` and ``a_b``), ``ab`` (``c``
  dropped), ``a{c}{c}b`` (a run of ``c`` collapsed), ``a%{hex}b`` in both cases
  (``c`` percent-escaped) and ``a\\{c}b`` (backslash escapes read back), and ``{c}a``
  and ``a{c}`` beside ``a`` (``c`` stripped at either end);
- **case**: ``A``/``a``, ``AB``/``Ab``/``aB``/``ab``, and what case folding merges
  (``ß``/``ss``, the Kelvin sign/``K``/``k``, dotless and dotted ``i``);
- **Unicode normalisation**: NFC beside NFD (``é``/``e`` + combining acute, ``Å``
  and the Angstrom sign), NFKC look-alikes (``ﬁ``/``fi``, fullwidth letters,
  ``①``/``1``, ``²``/``2``), and accents dropped (``é``/``e``);
- **length**: runs of one character 32 to 256 long, and pairs of 64 and 256 that
  differ only in their last character, in 1-, 2-, 3- and 4-byte characters, so that
  a truncation to any length in characters or bytes, a 255-byte file-name limit
  included, merges or refuses some of them.

The pool of the model-based machines (`CONFUSABLE_IDS`) is among them. Every probe
is an id `checkpointspec.spec.check_session_id` allows (at most 256 code points, no
NUL, UTF-8 encodable): a store must keep each apart, and refuse none.
"""

from __future__ import annotations

import string
import unicodedata
from typing import Final

from ...spec import MAX_SESSION_ID_LENGTH, check_session_id
from ..engines.machines.strategies import CONFUSABLE_IDS

__all__ = ["ID_PROBES", "SEPARATORS"]

_LOOK_ALIKES: Final = (
    "\u00a0",  # no-break space
    "\u3000",  # ideographic space
    "\u200b",  # zero-width space
    "\u2215",  # division slash
    "\u2044",  # fraction slash
    "\uff0f",  # fullwidth solidus
    "\uff1a",  # fullwidth colon
    "\u2236",  # ratio
    "\u2024",  # one dot leader
    "\u00b7",  # middle dot
    "\u2010",  # hyphen
    "\u2013",  # en dash
)

SEPARATORS: Final = tuple(string.punctuation + string.whitespace) + _LOOK_ALIKES
"""The characters a store may map, drop, double or escape in a name."""


def _around(c: str) -> list[str]:
    """The probes of one separator ``c``: between two letters, doubled, escaped, at either end."""
    percent = "".join(f"%{byte:02X}" for byte in c.encode("utf-8"))
    return [
        f"a{c}b",
        f"a{c}{c}b",
        f"a{percent}b",
        f"a{percent.lower()}b",
        f"a\\{c}b",
        f"{c}a",
        f"a{c}",
    ]


_CASES: Final = (
    "a",
    "A",
    "ab",
    "AB",
    "Ab",
    "aB",
    "stra\u00dfe",  # straße
    "strasse",
    "STRASSE",
    "\u212a",  # Kelvin sign
    "K",
    "k",
    "i",
    "I",
    "\u0131",  # dotless i
    "\u0130",  # I with dot above
)

_NORMAL_FORMS: Final = (
    "\u00e9",  # é, NFC
    "e\u0301",  # é, NFD
    "e",
    "\u00c5",  # Å, NFC
    "A\u030a",  # Å, NFD
    "\u212b",  # Angstrom sign, whose NFC is Å
    "\ufb01",  # ﬁ ligature, whose NFKC is "fi"
    "fi",
    "\uff21",  # fullwidth A
    "\u2460",  # circled 1
    "1",
    "\u00b2",  # superscript 2
    "2",
)

_FILLERS: Final = ("x", "\u00e9", "\u20ac", "\U0001f600")
"""Characters of 1, 2, 3 and 4 bytes in UTF-8."""


def _long() -> list[str]:
    """Runs of each filler, and pairs that differ only in their last character."""
    probes: list[str] = []
    for filler in _FILLERS:
        for length in (32, 33, 64, 65, 127, 128, 200, 255, MAX_SESSION_ID_LENGTH):
            probes.append(filler * length)
        for length in (64, MAX_SESSION_ID_LENGTH):
            probes += [filler * (length - 1) + "a", filler * (length - 1) + "b"]
    return probes


def _probes() -> tuple[str, ...]:
    candidates = [*CONFUSABLE_IDS, *(probe for c in SEPARATORS for probe in _around(c))]
    candidates += [*_CASES, *_NORMAL_FORMS, *_long()]
    candidates += [unicodedata.normalize("NFD", "caf\u00e9"), "caf\u00e9", "cafe"]
    unique = tuple(dict.fromkeys(candidates))
    for probe in unique:
        check_session_id(probe)  # the probes stay inside the contract, or the kit is wrong
    return unique


ID_PROBES: Final = _probes()
"""Every probe id, each once, in a fixed order."""
