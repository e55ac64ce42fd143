"""Files in, files out: the embedded default mode, with no broker.

Input lines are read as bytes (a record that is not UTF-8 must reach the dead-letter output intact,
not crash a text decoder); gzip is recognised by its magic bytes, not by the file name.

Reading (`FileRecords`, `expand_inputs`) is the part that knows what files look like on disk (the
outputs are written by adapters/outputs.py and the sinks):

* JSONL, read in chunks: a line is never buffered past the record size limit. A longer line is
  skipped to its end and reported as an `Oversize` (its size and first bytes), which becomes a
  `too_large` dead letter: a 1 GiB line costs the chunk size, not 2 GiB.
* A whole JSON document per file (a top-level array of messages; an object with `messages`,
  `contents`, `input`, `conversation`, `history`; an eval log with `samples[].messages`), pretty-
  printed or not, is detected from the first bytes and streamed item by item with `ijson` (only
  one message is held at a time, or one sample of an eval log). Each item is fed as one record;
  its `source.line` is its ordinal in the document and `source.item` its JSON path.
* Conversation ids: in file mode a record without its own conversation field belongs to its
  file's conversation (its name, see naming.py, or `--conversation-id`); a document's own id field at the top
  (gemini-cli `sessionId`...) and an eval sample's id/epoch refine it; a session id announced by a
  record (Codex `session_meta`) applies to the rest of the file.
* Directories are walked recursively and globs expanded, in sorted (stable) order.
"""

from __future__ import annotations

import gzip
import io
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

import orjson

from stream_pairer.adapters import bounded_json, cassettes
from stream_pairer.adapters.walk import Walk, display_name, probe, read_ahead
from stream_pairer.core.vocab import DeadLetterReason
from stream_pairer.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
CHUNK: Final = 1 << 16  # bytes read at a time from an input
CR: Final = 13  # b"\r"
OVERSIZE_HEAD: Final = 4096  # first bytes of an oversize line kept for its dead letter
DOCUMENT_REST_LIMIT: Final = 1 << 20  # bytes of a broken document's rest kept without --max-record-bytes
# Top-level keys of a document whose array value holds the messages, in the order tried.
DOCUMENT_KEYS: Final = ("messages", "contents", "input", "conversation", "history")


@dataclass(frozen=True, slots=True)
class Oversize:
    """A line longer than the record size limit: read to its end but not kept. `detail` is set
    for the other input that cannot become a record (a document that breaks off)."""

    size: int
    head: bytes
    reason: str = DeadLetterReason.TOO_LARGE.value
    detail: str | None = None


def expand_inputs(names: Sequence[str], skip_dir: Path | None = None, walk: Walk | None = None) -> list[str]:
    """Files named, directories walked recursively (files with an input suffix), globs expanded;
    `walk.Walk.add` says how, and counts what a walk skipped in `walk.skipped`."""
    return (walk or Walk(skip_dir)).add(names)


def open_input(name: str) -> IO[bytes]:
    if name == "-":
        raw: IO[bytes] = sys.stdin.buffer
    else:
        try:
            raw = open(name, "rb")  # noqa: SIM115 - returned to the caller, who closes it
        except OSError as err:
            raise InputError(f"cannot open {name}: {err.strerror or err}") from err
    buffered: IO[bytes] = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]
    try:
        gzipped = isinstance(buffered, io.BufferedReader) and buffered.peek(2)[:2] == GZIP_MAGIC
    except OSError as err:  # /proc/self/mem and other files that open but cannot be read
        raw.close()
        raise InputError(f"cannot read {display_name(name)}: {err.strerror or err}") from err
    if gzipped:
        return gzip.GzipFile(fileobj=buffered, mode="rb")  # type: ignore[return-value]
    return buffered


def read_lines(
    name: str, max_bytes: int | None = None, oversize: Callable[[int, Oversize], None] | None = None
) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line without its newline) for each non-blank line of a file read
    whole-line (output files, written by this tool); inputs go through `FileRecords`. A line
    longer than `max_bytes` is not held: it goes to `oversize` (line number, its size)."""
    stream = open_input(name)
    try:
        for lineno, item in split_lines(stream, b"", max_bytes):
            if isinstance(item, bytes):
                yield lineno, item
            elif oversize is not None:
                oversize(lineno, item)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise InputError(f"cannot read {display_name(name)}: {err}") from err
    finally:
        if name != "-":
            stream.close()


def split_lines(
    stream: IO[bytes], head: bytes, max_bytes: int | None
) -> Iterator[tuple[int, bytes | Oversize]]:
    """Lines of `head` + the rest of `stream`, read CHUNK bytes at a time, one by one: a line
    grows in memory only up to `max_bytes` (+1 for a CR); past it only its length is counted and
    it comes as an Oversize. `split_blocks` with its blocks taken apart."""
    limit = max_bytes if max_bytes is not None else -1
    for item in split_blocks(stream, head, max_bytes):
        if isinstance(item, Block):
            yield from block_lines(item, limit)
        else:
            yield item


def block_lines(block: Block, limit: int) -> Iterator[tuple[int, bytes | Oversize]]:
    """A Block's lines one by one, as the compiled core's `feed_block` reads them (`read_line`)."""
    n, data, start = block.lineno, block.data, 0
    while (nl := data.find(b"\n", start)) >= 0:
        n += 1
        rec = read_line(data[start:nl], limit)
        if rec is not None:
            yield n, rec
        start = nl + 1


@dataclass(frozen=True, slots=True)
class Block:
    """Whole lines cut from one read, each ending in a newline, handed over as one piece (the
    compiled core's `feed_block` reads them as `_line` does); `lineno` is the number of the line
    before the first."""

    lineno: int
    data: bytes


def split_blocks(
    stream: IO[bytes], head: bytes, max_bytes: int | None
) -> Iterator[tuple[int, bytes | Oversize] | Block]:
    """Lines of `head` + the rest of `stream`, read CHUNK bytes at a time: the lines that lie whole
    inside one read as one `Block` (one Python step per read, not per line; each line is then read
    by `read_line`), a line that spans reads alone, as `(line number, bytes or Oversize)`. A line
    grows in `pending` only up to `max_bytes` (+1 for a CR); past it only its length is counted."""
    limit = max_bytes if max_bytes is not None else -1
    pending = bytearray()
    over = -1  # >= 0: the current line is oversize; bytes counted so far
    over_head = b""
    prev_cr = False  # the previous read ended in a CR (an oversize line's size leaves it out)
    lineno = 0
    chunk = head or stream.read(CHUNK)
    while chunk:
        start = 0
        n = len(chunk)
        while start < n:
            if over < 0 and not pending:
                last = chunk.rfind(b"\n", start)
                if last >= 0:
                    yield Block(lineno, chunk[start : last + 1])
                    lineno += chunk.count(b"\n", start, last + 1)
                    start = last + 1
                    continue
            nl = chunk.find(b"\n", start)
            if nl < 0:  # the line goes on in the next chunk
                if over >= 0:
                    over += n - start
                elif limit >= 0 and len(pending) + n - start > limit + 1:  # +1: a CR before the LF
                    over = len(pending) + n - start
                    over_head = bytes(pending[:OVERSIZE_HEAD] or chunk[start : start + OVERSIZE_HEAD])
                    pending.clear()
                else:
                    pending += chunk[start:]
                break
            lineno += 1
            if over >= 0:  # its size without the line break (a CR before the LF included)
                cr = chunk[nl - 1] == CR if nl > start else prev_cr
                yield lineno, Oversize(over + nl - start - cr, over_head)
                over = -1
            else:
                pending += chunk[start:nl]
                item = read_line(bytes(pending), limit)
                pending.clear()
                if item is not None:
                    yield lineno, item
            start = nl + 1
        prev_cr = chunk[-1] == CR
        chunk = stream.read(CHUNK)
    if over >= 0:
        yield lineno + 1, Oversize(over - prev_cr, over_head)
    elif pending:
        item = read_line(bytes(pending), limit)
        if item is not None:
            yield lineno + 1, item


def read_line(line: bytes, limit: int) -> bytes | Oversize | None:
    """One line as a record: its trailing CR dropped; an Oversize past `limit` (-1: none); None
    when blank. The compiled core's `feed_block` reads a Block's lines the same way."""
    body = line[:-1] if line.endswith(b"\r") else line
    if 0 <= limit < len(body):
        return Oversize(len(body), body[:OVERSIZE_HEAD])
    return body if body.strip() else None


# ---------------------------------------------------------------------------------------------
# Whole JSON documents


Source = dict[str, Any]
_OPEN: Final = frozenset({"start_map", "start_array"})
_CLOSE: Final = frozenset({"end_map", "end_array"})


class FileRecords:
    """The records of one input file and the conversation id to fall back on for each.

    Iterating yields (source, record bytes or Oversize, key). `key` is the conversation id of
    records that carry none: `--conversation-id` when given (`forced`), else a session id
    announced earlier in the file (`set_session`, e.g. Codex `session_meta`), else a document's
    own id (its top-level conversation field, an eval sample's id), else the file's name `label`
    (its name in the outputs, also `source.file`: see naming.py)."""

    def __init__(
        self,
        name: str,
        *,
        max_bytes: int | None = None,
        conversation_id: str | None = None,
        conversation_fields: tuple[str, ...] = (),
        label: str | None = None,
    ) -> None:
        self.name = name
        # A name the OS gave as bytes that are not UTF-8 is read by those bytes and shown escaped.
        self.label = label if label is not None else "-" if name == "-" else display_name(name)
        self.max_bytes = max_bytes
        self.forced = conversation_id
        self.fields = frozenset(f for f in conversation_fields if "." not in f)
        self.session: str | None = None
        self.kind = "jsonl"  # or "document", once iteration has started
        self._n = 0  # items taken from a document so far
        self._head = b""  # the first bytes, when more than one CHUNK was read to tell the kind
        self._cap: bounded_json.StringCap | None = None  # cuts a document's long strings

    def _long_document(self, stream: IO[bytes], head: bytes) -> bool:
        """A compact one-line document longer than a chunk (`{"messages": [...]}` on one line):
        read ahead up to the record size limit; a first line that passes it and opens a message
        list is streamed as a document (as JSONL it could only be one `too_large` dead letter)."""
        if self.max_bytes is None or b"\n" in head or not head.lstrip(b"\xef\xbb\xbf \t\r").startswith(b"{"):
            return False
        self._head = read_ahead(stream, head, self.max_bytes + 2)
        return (
            b"\n" not in self._head
            and len(self._head) > self.max_bytes + 1
            and bounded_json.opens_list(self._head, (*DOCUMENT_KEYS, "samples"))
        )

    def set_session(self, session_id: str) -> None:
        self.session = session_id

    def __iter__(self) -> Iterator[tuple[Source, bytes | Oversize, str]]:
        """Every record, one by one: `blocks()` with its blocks taken apart."""
        return self.apart(self.blocks())

    def apart(
        self, items: Iterator[tuple[Source, bytes | Oversize, str] | Block]
    ) -> Iterator[tuple[Source, bytes | Oversize, str]]:
        """`items` of `blocks()` with each Block taken apart into its records (the key read per
        record: a session id announced in the block renames the records after it)."""
        limit = self.max_bytes if self.max_bytes is not None else -1
        for item in items:
            if isinstance(item, Block):
                for lineno, raw in block_lines(item, limit):
                    yield {"file": self.label, "line": lineno}, raw, self._key(None)
            else:
                yield item

    def blocks(self) -> Iterator[tuple[Source, bytes | Oversize, str] | Block]:
        """What `__iter__` gives, with JSONL lines that lie whole inside one read handed over as a
        `Block` (see `split_blocks`); a document's items, and lines that span reads, one by one."""
        stream = open_input(self.name)
        try:
            head = stream.read(CHUNK)
            if _is_document(head, len(head) < CHUNK) or self._long_document(stream, head):
                self.kind = "document"
                head = self._head or head
                body = head[3:] if head.startswith(b"\xef\xbb\xbf") else head  # a Windows editor's BOM
                yield from self._document(_Chained(body, stream, self.max_bytes or DOCUMENT_REST_LIMIT))
            elif cassettes.is_cassette(head):
                self.kind = "document"
                yield from self._cassette(head, stream)
            else:
                for item in split_blocks(stream, self._head or head, self.max_bytes):
                    if isinstance(item, Block):
                        yield item
                    else:
                        lineno, raw = item
                        yield {"file": self.label, "line": lineno}, raw, self._key(None)
        except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as err:
            raise InputError(f"cannot read {display_name(self.name)}: {err}") from err
        finally:
            if self.name != "-":
                stream.close()

    @property
    def key(self) -> str:
        """The conversation id of the records that carry none, as it stands now."""
        return self._key(None)

    def _cassette(self, head: bytes, stream: IO[bytes]) -> Iterator[tuple[Source, bytes | Oversize, str]]:
        """A VCR.py cassette (adapters/cassettes.py): one record per interaction; a cassette that
        cannot be read is one dead letter with its first bytes."""
        try:
            for i, item in cassettes.interactions(head, stream):
                yield self._item(i + 1, f"interactions[{i}]", item, None)
        except ValueError as err:
            source: Source = {"file": self.label, "line": 1, "item": "(cassette)"}
            yield (
                source,
                Oversize(len(head), head[:OVERSIZE_HEAD], DeadLetterReason.INVALID_JSON.value, str(err)),
                self._key(None),
            )

    def _key(self, doc_key: str | None) -> str:
        return self.forced or self.session or doc_key or self.label

    def _document(self, reader: _Chained) -> Iterator[tuple[Source, bytes | Oversize, str]]:
        """Every top-level JSON value of the file, one after the other: one document, or several
        written back to back (`jq .` output, concatenated transcripts, a stray value before JSONL
        lines). Nothing after the first value is left unread: it is records or a dead letter."""
        import ijson  # noqa: PLC0415 - only documents need it

        self._n = 0
        try:
            if self.max_bytes is not None:
                self._cap = bounded_json.StringCap(reader, max(self.max_bytes, CHUNK))
            events = bounded_json.events(self._cap or reader)
            for v, (_, first, value) in enumerate(events):
                at = f"({v})" if v else ""  # item paths of the second value on say which value
                if first == "start_array":
                    for i, item in _items(events, self.max_bytes):
                        yield self._next(f"{at}[{i}]", item, None, reader)
                elif first == "start_map":
                    yield from self._object(at, events, reader)
                else:  # a bare number or string between documents: a record that is no object
                    yield self._next(at or "(0)", value, None, reader)
        except ijson.JSONError as err:
            # The document breaks off: what was streamed stays; the rest of the file (from the
            # last block read before the break, so it may repeat the end of the last item) is one
            # dead letter with those bytes as its raw, up to the record size limit.
            rest, size = reader.rest()
            detail = f"the document is not valid JSON after its {self._n} items read: {_reason(err)}"
            yield (
                {"file": self.label, "line": self._n + 1, "item": "(rest of document)"},
                Oversize(size, rest, DeadLetterReason.INVALID_JSON.value, detail),
                self._key(None),
            )

    def _object(
        self, at: str, events: Iterator[tuple[str, str, Any]], reader: _Chained
    ) -> Iterator[tuple[Source, bytes | Oversize, str]]:
        """A top-level object whose start_map was just read: its message list streamed item by
        item, or (no message list) the object itself as one record written over several lines."""
        doc_key: str | None = None
        rest: dict[str, Any] = {}
        size = 2  # the encoded size of `rest`, estimated: it is held to the record size limit
        refused: bounded_json.Refused | None = None
        streamed = False
        for prefix, event, value in events:
            if event == "end_map" and prefix == "":
                break
            key = value  # a top-level map_key: the next event opens its value
            _, vevent, vvalue = next(events)
            if vevent == "start_array" and key in DOCUMENT_KEYS:
                streamed = True
                for i, item in _items(events, self.max_bytes):
                    yield self._next(f"{at}{key}[{i}]", item, doc_key, reader)
            elif vevent == "start_array" and key == "samples":
                streamed = True
                for s, sample in _items(events, None):  # a sample holds many messages: no size limit
                    for where, item, sample_key in _sample_messages(s, sample, self.label):
                        yield self._next(at + where, item, sample_key, reader)
            else:
                room = None if self.max_bytes is None else max(self.max_bytes - size, 0)
                built, cost = bounded_json.build_sized(vevent, vvalue, events, room)
                size += cost + len(key) + 3
                if isinstance(built, bounded_json.Refused):
                    refused = refused or bounded_json.Refused(size, built.depth, built.detail)
                elif refused is None:
                    rest[key] = built
                named = key in self.fields and doc_key is None and type(built) in (str, int)
                if named and str(built).strip():
                    doc_key = str(built).strip()
        if streamed:
            return  # its other fields are no record (a refused one no dead letter), as before
        if refused is not None:  # its fields were dropped as they came: report the whole size
            yield self._next(at, bounded_json.Refused(size, refused.depth, refused.detail), None, reader)
        else:
            yield self._next(at, rest, None, reader)

    def _next(
        self, where: str, item: Any, doc_key: str | None, reader: _Chained
    ) -> tuple[Source, bytes | Oversize, str]:
        self._n += 1
        reader.mark()
        return self._item(self._n, where, item, doc_key)

    def _item(
        self, n: int, where: str, item: Any, doc_key: str | None
    ) -> tuple[Source, bytes | Oversize, str]:
        source: Source = {"file": self.label, "line": n, "item": where}
        dropped = 0
        if self._cap is not None:  # the bytes of long strings cut since the last item: this one's
            dropped, self._cap.dropped = self._cap.dropped, 0
        if isinstance(item, bounded_json.Refused):
            detail = item.detail.replace(f"at least {item.size} ", f"at least {item.size + dropped} ")
            return (
                source,
                Oversize(item.size + dropped, b"", DeadLetterReason.TOO_LARGE.value, detail),
                self._key(doc_key),
            )
        try:
            raw = orjson.dumps(item)
        except orjson.JSONEncodeError as err:  # e.g. an integer past 64 bits: not a record
            return (
                source,
                Oversize(0, b"", DeadLetterReason.INVALID_JSON.value, f"the item cannot be encoded: {err}"),
                self._key(doc_key),
            )
        if self.max_bytes is not None and len(raw) > self.max_bytes:
            return source, Oversize(len(raw), raw[:OVERSIZE_HEAD]), self._key(doc_key)
        return source, raw, self._key(doc_key)


class _Chained:
    """`head` (already read to detect the file kind) followed by the rest of `stream`.

    It also keeps the bytes read since the last item was taken (`mark`), up to `limit`, so that a
    document that breaks off can be dead-lettered with its rest as raw (`rest`): the parser reads
    whole blocks, so an item taken ends somewhere in the last block read; what follows the item
    lies in that block or after it."""

    def __init__(self, head: bytes, stream: IO[bytes], limit: int) -> None:
        self.head = head
        self.stream = stream
        self.limit = limit
        self._kept: list[bytes] = []
        self._kept_bytes = 0
        self._since = 0  # bytes read since the mark, kept or not
        self._last = b""

    def read(self, n: int = -1) -> bytes:
        if n == 0:
            return b""  # ijson probes the type of the stream with read(0)
        if self.head:
            out, self.head = self.head, b""
        else:
            out = self.stream.read(n)
        self._keep(out)
        self._last = out
        return out

    def _keep(self, block: bytes) -> None:
        self._since += len(block)
        room = self.limit - self._kept_bytes
        if room > 0 and block:
            self._kept.append(block[:room])
            self._kept_bytes += min(room, len(block))

    def mark(self) -> None:
        """An item was taken: only the last block read (and what comes after) may hold the rest."""
        self._kept, self._kept_bytes, self._since = [], 0, 0
        self._keep(self._last)

    def rest(self) -> tuple[bytes, int]:
        """The bytes from the mark to the end of the input (read now), at most `limit` of them, and
        how many there are in all."""
        while block := self.stream.read(CHUNK):
            self._keep(block)
        return b"".join(self._kept), self._since


def _reason(err: Exception) -> str:
    """yajl's message without its bytes repr and its multi-line pointer."""
    arg = err.args[0] if err.args else err
    text = arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
    return " ".join(text.split("\n", 1)[0].split()) or type(err).__name__


def _is_document(head: bytes, whole: bool) -> bool:
    """Whether a file is one JSON document rather than JSONL, from its first bytes.

    `[` first: an array document. `{` first: JSONL when its first line is a complete JSON value
    (a record), unless that line is the whole file and holds a message list; a first line that is
    not complete JSON and breaks after a bracket or a comma (pretty-printed) is a document. A
    first line longer than `head` is JSONL (a long record; the size limit applies)."""
    body = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
    text = body.lstrip()
    if text[:1] == b"[":
        return True
    if text[:1] != b"{":
        return False
    nl = text.find(b"\n")
    if nl < 0:
        if not whole:
            return False
        first = text
    else:
        first = text[:nl]
    try:
        value = orjson.loads(first)
    except orjson.JSONDecodeError:
        # Pretty-printed JSON breaks its first line after an opening bracket or a comma; a broken
        # JSONL record (cut, not UTF-8...) does not: it stays a record, and a dead letter.
        return nl >= 0 and first.rstrip().endswith((b"{", b"[", b",", b":"))
    if text[nl + 1 :].strip() if nl >= 0 else False:
        return False  # more lines follow a complete record: JSONL
    return type(value) is dict and any(type(value.get(k)) is list for k in (*DOCUMENT_KEYS, "samples"))


def _items(events: Iterator[tuple[str, str, Any]], max_bytes: int | None) -> Iterator[tuple[int, Any]]:
    """The items of the array whose start_array was just read, each built whole, one at a time
    (or a `bounded_json.Refused` for one too deep or too large: its neighbours are still read)."""
    for i, (_, event, value) in enumerate(events):
        if event == "end_array":
            return
        yield i, bounded_json.build(event, value, events, max_bytes)


def _sample_messages(s: int, sample: Any, label: str) -> Iterator[tuple[str, Any, str | None]]:
    """An eval log sample (Inspect AI): its messages, in a conversation of its own."""
    if type(sample) is not dict:
        yield f"samples[{s}]", sample, None
        return
    sid = sample.get("id", s)
    epoch = sample.get("epoch")
    key = f"{label}#sample={sid}" + (f",epoch={epoch}" if epoch is not None else "")
    messages = sample.get("messages")
    if type(messages) is not list:
        return
    for i, m in enumerate(messages):
        yield f"samples[{s}].messages[{i}]", m, key


def check_inputs(inputs: Sequence[str]) -> None:
    """Every input exists and can be read (`walk.probe`), checked before any output is written:
    a typo in the last input name must not cost a long run and leave outputs behind."""
    for name in inputs:
        if name != "-":
            probe(name)
