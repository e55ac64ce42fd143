"""VCR.py cassettes: the YAML files in which test suites record the HTTP traffic of provider
APIs (`interactions: [{request: {method, uri, body, headers}, response: {status, headers, body:
{string}}}]`). Each interaction becomes one record, an HTTP exchange that the wire reader pairs
(core/formats/wire.py and recordings.py); its `source.item` is `interactions[i]`.

YAML is read with PyYAML's safe loader (no tags beyond YAML's own; `!!binary` bodies, which VCR
writes for bytes, gzip-compressed or not, become text). A cassette is recognised by its first
meaningful line, `interactions:`; anything else is not a cassette and is read as before.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from typing import IO, Any, Final

_START: Final = b"interactions:"


def is_cassette(head: bytes) -> bool:
    """Whether the first bytes of a file open a VCR.py cassette (comments and `---` skipped)."""
    body = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith(b"#") or s == b"---":
            continue
        return s.startswith(_START)
    return False


def interactions(head: bytes, stream: IO[bytes]) -> Iterator[tuple[int, Any]]:
    """(index, interaction) for each recorded exchange, bodies as text. A file that is not
    valid YAML raises ValueError with the parser's message (the caller dead-letters it)."""
    import yaml  # noqa: PLC0415 - only cassettes need it

    text = head + stream.read()
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValueError(f"the cassette is not valid YAML: {' '.join(str(err).split())[:300]}") from None
    items = doc.get("interactions") if type(doc) is dict else None
    if type(items) is not list:
        raise ValueError("the cassette has no `interactions` list")
    for i, item in enumerate(items):
        yield i, _text(item)


def _text(v: Any) -> Any:
    """Bytes (VCR's `!!binary` bodies) as text, decompressed when gzip / deflate: the reader
    needs the JSON inside; other values as they are."""
    if type(v) is dict:
        return {str(k): _text(x) for k, x in v.items()}
    if type(v) is list:
        return [_text(x) for x in v]
    if type(v) is bytes:
        raw = v
        try:
            if raw[:2] == b"\x1f\x8b":
                raw = gzip.decompress(raw)
            elif raw[:1] == b"\x78":
                raw = zlib.decompress(raw)
        except (OSError, zlib.error, EOFError):
            raw = v
        return raw.decode("utf-8", "replace")
    if v is None or type(v) in (str, int, float, bool):
        return v
    return str(v)  # a date or another YAML scalar type: JSON has no such value
