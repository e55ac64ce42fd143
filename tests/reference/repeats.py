"""The identity of a (tool, arguments) pair for the reference tagger's repeat check: equal for the
same tool and the same arguments in canonical form (the compiled core: native/src/tagging.rs).

Why apart: tagging.py keeps the tagging rules; this is how "the same call" is told."""

from __future__ import annotations

from typing import Any, Final

import orjson


def call_key(name: str | None, args: Any) -> int:
    """Identity of (tool, arguments) for the repeat check: equal for the same tool name and the
    same arguments in canonical form (object keys in any order; 1, 1.0, true and "1" all differ).

    A 64-bit structural hash instead of a BLAKE2b digest of the canonical JSON text: that cost
    ~3.6-5 us per call (now ~1.6-1.9), and serializing a non-ASCII `str` makes CPython keep a UTF-8 copy
    inside the string for as long as the held call lives (836 B of the ~6.1 KB held per open
    conversation in BENCHMARKS.md part 4). `hash(str)` reads the string's own storage and caches
    only the hash, in a field every string already has. Two different argument sets share a key
    with probability ~2^-64 per stored call; the hash is not built to resist crafted collisions,
    and all that one could cause is a wrong `termination` tag."""
    tool = name or ""
    try:
        return hash((tool, _fingerprint(args)))
    except RecursionError:  # nesting deeper than the walk can go: the type only
        return hash((tool, _OTHER, type(args).__name__))


_STR_KEYED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
_INT, _FLOAT, _LIST, _DICT, _JSON, _OTHER = range(6)
# Containers up to this size are walked in Python (no serialization); larger ones (a list of
# numbers, a large object) are serialized in C, which is faster there, and hashed as text (their
# non-ASCII strings then keep a UTF-8 copy, as all did before). Which way a value goes depends on
# its own length only, so equal values always take the same way.
_WALK_MAX: Final = 16
_EXACT_INT: Final = 2**60  # below it, and >= 0, hash(int) is the int itself: no collision


def _fingerprint(v: Any) -> int:
    t = type(v)
    if t is str:
        return hash(v)
    if t is dict:
        if len(v) > _WALK_MAX:
            canon = _canonical(v)
            if canon is not None:
                return hash((_JSON, canon))
        # Sorted (key, value) hashes: the same for any key order. Not their sum: CPython's tuple
        # hash is close to linear, so {"a": 1, "b": 2} and {"a": 2, "b": 1} would sum alike.
        pairs = [hash((k if type(k) is str else _fingerprint(k), _fingerprint(x))) for k, x in v.items()]
        pairs.sort()
        return hash((_DICT, *pairs))
    if t is int:
        # hash(-1) == hash(-2) and hashes wrap modulo 2^61 - 1: those ints go through their text.
        return hash((_INT, v)) if 0 <= v < _EXACT_INT else hash((_INT, str(v)))
    if v is None or t is bool:
        return hash((_OTHER, v))
    if t is list or t is tuple:
        if len(v) > _WALK_MAX:
            canon = _canonical(v)
            if canon is not None:
                return hash((_JSON, canon))
        return hash((_LIST, *[_fingerprint(x) for x in v]))
    if t is float:
        return hash((_FLOAT, v.hex()))  # exact, and tells -0.0 from 0.0 as the JSON text does
    return hash((_OTHER, t.__name__, repr(v)))


def _canonical(v: Any) -> bytes | None:
    try:
        return orjson.dumps(v, option=_STR_KEYED)
    except (TypeError, orjson.JSONEncodeError):
        return None  # not JSON (or deeper than orjson writes): walked instead
