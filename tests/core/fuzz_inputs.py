"""The fuzzer's inputs: seed records of every supported format (tests/samples) and the mutators
that break them (byte flips, truncation, invalid UTF-8, odd values in any field, deleted and renamed
keys, deep nesting, huge payloads, parallel blocks, splices of two records, odd message keys).

Why apart from test_fuzz.py: what is fed is one concern, the run that feeds it and checks every
property (FuzzRun, the audit, the script) another.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson

from tests.core.formats_helpers import family_records

SAMPLES = Path(__file__).parents[1] / "samples"

# Values of every JSON type, and the edges parsers trip on.
ODD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1.5,
    2**63,
    -(2**63) - 1,
    1e308,
    -1e-308,
    "",
    " ",
    "\t\n",
    "\u0000",
    "\ud7ff\ue000\U0010ffff",
    "🙂" * 3,
    "x" * 300,
    [],
    [None],
    {},
    {"": None},
    [[[]]],
    "NaN",
    "2025-13-45T99:99:99Z",
    "-1",
    "1e400",
    10**30,
]
NEST_LEVELS = [50, 240, 260, 500, 1000, 1100]
INVALID_UTF8 = [b"\xff", b"\xfe\xfe", b"\xc3", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"]


def load_seeds() -> list[bytes]:
    """Every line of every sample file: the formats helper's realistic records of each format."""
    seeds = [
        line
        for path in sorted(SAMPLES.glob("*.jsonl"))
        for line in path.read_bytes().splitlines()
        if line.strip()
    ]
    assert len(seeds) >= 50, f"expected the sample files in {SAMPLES}"
    return seeds + [r for r in family_records() if r.startswith(b"{")]  # JSON: mutated as such


SEEDS = load_seeds()
SEED_FORMATS = sorted(p.stem for p in SAMPLES.glob("*.jsonl"))


# --------------------------------------------------------------------------------------------- mutators


def _nodes(obj: Any, depth: int = 0) -> list[tuple[Any, Any]]:
    """(container, key or index) for every value inside obj, to pick a mutation point from."""
    out: list[tuple[Any, Any]] = []
    if depth > 40:
        return out
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((obj, k))
            out += _nodes(v, depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append((obj, i))
            out += _nodes(v, depth + 1)
    return out


_NEST = "\u0000nest\u0000"


def _nested(value: Any, levels: int, rng: random.Random) -> bytes:
    """`value` under `levels` arrays/objects, built as text: orjson.dumps stops at 254 levels."""
    kinds = [rng.random() < 0.5 for _ in range(levels)]  # True: an array, False: an object
    opens = b"".join(b"[" if k else b'{"k":' for k in kinds)
    closes = b"".join(b"]" if k else b"}" for k in reversed(kinds))
    return opens + orjson.dumps(value) + closes


def _dumps(obj: Any) -> bytes:
    """The stdlib encoder for mutated records: it writes integers beyond 64 bits, orjson refuses."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def mutate_structure(obj: Any, rng: random.Random) -> bytes:
    """Change one thing inside a decoded record and re-encode it (still valid JSON, usually)."""
    nodes = _nodes(obj)
    if not nodes:
        return _dumps(rng.choice(ODD_VALUES))
    container, key = rng.choice(nodes)
    op = rng.randrange(9)
    if op == 0:  # a value of another type
        container[key] = rng.choice(ODD_VALUES)
    elif op == 1 and isinstance(container, dict):  # a key removed
        del container[key]
    elif op == 2 and isinstance(container, dict):  # a key renamed
        container[key + rng.choice(["_", "X", " "])] = container.pop(key)
    elif op == 3:  # deep nesting: under orjson's 1024 parse limit, or over it
        inner = container[key]
        container[key] = _NEST
        levels = rng.choice(NEST_LEVELS)
        return _dumps(obj).replace(_dumps(_NEST), _nested(inner, levels, rng), 1)
    elif op == 4:  # a huge payload: under the record limit, or over it
        container[key] = "A" * rng.choice([10_000, 300_000, 1_100_000])
    elif op == 5 and isinstance(container[key], list) and container[key]:  # many parallel blocks
        container[key] = container[key] * rng.choice([50, 2000])
    elif op == 6:  # ids and names that collide, are blank, or are numbers
        container[key] = rng.choice(["x", "", "   ", 7, "toolu_01A09q90qw90lq917835lq9"])
    elif op == 7 and isinstance(container, list):  # a block dropped or duplicated
        if rng.random() < 0.5:
            del container[key]
        else:
            container.insert(key, container[key])
    else:  # the value wrapped in JSON-in-a-string, as loggers sometimes do
        container[key] = _dumps(container[key]).decode()
    return _dumps(obj)


def mutate_bytes(raw: bytes, rng: random.Random) -> bytes:
    b = bytearray(raw)
    op = rng.randrange(6)
    if op == 0 and b:  # bit flips
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif op == 1:  # truncation
        del b[rng.randrange(len(b) + 1) :]
    elif op == 2:  # invalid UTF-8, inside a string or anywhere
        quote = raw.find(b'"', rng.randrange(len(raw) + 1))
        at = quote + 1 if quote >= 0 else rng.randrange(len(b) + 1)
        b[at:at] = rng.choice(INVALID_UTF8)
    elif op == 3:  # random bytes inserted
        at = rng.randrange(len(b) + 1)
        b[at:at] = rng.randbytes(rng.randint(1, 16))
    elif op == 4 and b:  # a range deleted or repeated
        i = rng.randrange(len(b))
        j = min(len(b), i + rng.randint(1, 64))
        if rng.random() < 0.5:
            del b[i:j]
        else:
            b[j:j] = b[i:j]
    else:  # a UTF-8 BOM, NULs, or CR LF noise around the record
        b = bytearray(rng.choice([b"\xef\xbb\xbf", b"\x00", b" \r", b"\t"])) + b
    return bytes(b)


def mutate(seed: bytes, rng: random.Random) -> bytes:
    """One fuzz record from one seed: 20% unchanged (so there are good events to pair)."""
    r = rng.random()
    if r < 0.2:
        return seed
    if r < 0.55:
        return mutate_structure(orjson.loads(seed), rng)
    if r < 0.9:
        return mutate_bytes(seed, rng)
    if r < 0.95:  # two records spliced together
        other = rng.choice(SEEDS)
        return seed[: rng.randrange(len(seed) + 1)] + other[rng.randrange(len(other) + 1) :]
    return mutate_bytes(mutate_structure(orjson.loads(seed), rng), rng)


def message_key(rng: random.Random) -> str | None:
    """The Kafka message key (the conversation id fallback): absent, blank, odd, or ordinary."""
    return rng.choice([None, None, None, "", "  ", "k1", "\u0000", "🙂", "conv_anth_01"])
