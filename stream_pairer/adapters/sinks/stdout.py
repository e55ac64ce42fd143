"""`--out -`: every output record as one JSON line on stdout, so a run pipes into another tool.

Why one stream: a pipe has one end; each record starts with its `kind`, so the reader splits it
(`stream-pairer pair logs/ --out - | duckdb -c "select kind, count(*) from read_json('/dev/stdin')
group by all"`). The summary goes to stderr (pair.py). Records are written as they are produced,
not held to the end: a pipe is not a file that can be completed by a rename.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO

from stream_pairer.adapters.sinks import Closing, encoded
from stream_pairer.core.vocab import RecordKind


class StdoutSink(Closing):
    def __init__(self, stream: IO[bytes] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout.buffer
        self.bytes_by_kind: dict[str, int] = dict.fromkeys((k.value for k in RecordKind), 0)

    def write(self, records: Sequence[bytes]) -> None:
        sizes = self.bytes_by_kind
        write = self.stream.write
        for kind, rec in encoded(records):
            write(rec + b"\n")
            sizes[kind] += len(rec)

    def close(self) -> None:
        self.stream.flush()

    def abort(self) -> None:
        """A failed run: what was written is out (a pipe cannot take it back); flush the rest so
        the reader sees every complete line, and the exit status says the run failed."""
        self.stream.flush()
