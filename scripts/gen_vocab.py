"""Writes the generated part of stream_pairer/core/vocab.py from stream_pairer/core/vocab.json.

Why generated: the vocabulary (kinds, reasons, outcomes, failure points, limits, the shared
constants) is defined once, as data, in vocab.json; the Rust core reads the same file at build
time (native/build.rs). Python gets real `StrEnum` classes and `Final` constants in source, so mypy
and readers see every member by name (an enum built at import time from the JSON would be `Any`
to mypy). tests/core/test_vocab_source.py fails when vocab.py is stale.

Usage: python3 scripts/gen_vocab.py [--check]
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "stream_pairer" / "core" / "vocab.json"
TARGET = ROOT / "stream_pairer" / "core" / "vocab.py"
BEGIN = "# ---- generated from vocab.json by scripts/gen_vocab.py (edit vocab.json, then run it) ----"
END = "# ---- end of the generated part ----"
WIDTH = 106


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(text, WIDTH - len(indent) - 2)]


def _str(s: str, indent: str) -> str:
    """A string literal, raw where that reads better (regexes), split to fit the line width."""
    raw = "\\" in s and '"' not in s
    q = 'r"' if raw else '"'
    body = s if raw else json.dumps(s, ensure_ascii=False)[1:-1]
    room = WIDTH - len(indent) - 4
    if len(body) <= room - 20:
        return f'{q}{body}"'
    chunks: list[str] = []
    while body:
        cut = min(room, len(body))
        while cut < len(body) and body[cut - 1] == "\\":  # never end a piece inside an escape
            cut -= 1
        chunks.append(f'{indent}    {q}{body[:cut]}"')
        body = body[cut:]
    return "(\n" + "\n".join(chunks) + f"\n{indent})"


def _value(c: dict[str, Any]) -> str:
    v = c["value"]
    if isinstance(v, list):
        items = ", ".join(json.dumps(x, ensure_ascii=False) for x in v)
        if c.get("python") == "frozenset":
            one = f"frozenset({{{items}}})"
            if len(one) + len(c["name"]) + 10 <= WIDTH:
                return one
            inner = "".join(f"        {json.dumps(x, ensure_ascii=False)},\n" for x in v)
            return "frozenset(\n    {\n" + inner + "    }\n)"
        one = f"({items})"
        if len(one) + len(c["name"]) + 10 <= WIDTH:
            return one if len(v) > 1 else f"({items},)"
        inner = "".join(f"    {json.dumps(x, ensure_ascii=False)},\n" for x in v)
        return "(\n" + inner + ")"
    if isinstance(v, str):
        return _str(v, "")
    if isinstance(v, float):
        return repr(v)
    return f"{v:_}" if abs(v) >= 10_000 else str(v)


def render(doc: dict[str, Any]) -> str:
    """The generated block of vocab.py, markers included."""
    out = [BEGIN, ""]
    for s in doc["sets"]:
        text = textwrap.wrap(s["doc"], WIDTH - 10)
        text[0] = f'"""{text[0]}'
        text[-1] = f'{text[-1]}"""'
        out += ["", f"class {s['name']}(StrEnum):", *(f"    {line}" for line in text), ""]
        for m in s["members"]:
            if "doc" in m:
                out += _comment(m["doc"], "    ")
            out.append(f'    {m["name"]} = "{m["value"]}"')
        out.append("")
        if "literal" in s:  # the same set as a type, for annotations that take the plain strings
            values = ", ".join(f'"{m["value"]}"' for m in s["members"])
            out += ["", f"{s['literal']}: TypeAlias = Literal[{values}]", ""]
    out.append("")
    for c in doc["constants"]:
        out += _comment(c["doc"], "")
        out.append(f"{c['name']}: Final = {_value(c)}")
    out += ["", END]
    return "\n".join(out)


def splice(text: str, block: str) -> str:
    """`text` with its generated block replaced by `block`."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + block + text[end:]


def main(argv: list[str]) -> int:
    doc = json.loads(SOURCE.read_text(encoding="utf-8"))
    current = TARGET.read_text(encoding="utf-8")
    wanted = splice(current, render(doc))
    if "--check" in argv:
        if wanted != current:
            print(f"{TARGET} is stale: run python3 scripts/gen_vocab.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
