"""`stream-pairer formats`: every reader, how a record is detected as its format, and a sample.

Read from the registry (`formats.FORMATS`, described by `formats/catalog.py` and each reader's own
`FORMAT_INFO`), so a reader added beside the others is listed without an edit here; a format with
no description is still listed, and says so.
"""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from stream_pairer.core.formats import FORMATS
from stream_pairer.core.formats.catalog import SAMPLE_MAPPING, describe

NAME = "formats"
HELP = "list every input format reader: how a record is detected as it, and a sample record"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="one JSON object per format (format, detected_by, sample)"
    )


def run(args: argparse.Namespace) -> int:
    described = describe()
    for fmt in FORMATS:
        info = described.get(fmt)
        if args.json:
            body: dict[str, Any] = {"format": fmt, "detected_by": None, "sample": None}
            if info is not None:
                body |= {"detected_by": info.detected_by, "sample": info.sample}
                if info.needs_mapping:
                    body["mapping"] = SAMPLE_MAPPING
            print(orjson.dumps(body).decode())
            continue
        print(fmt)
        if info is None:
            print("  detected by: (not described: add a FORMAT_INFO to its reader module)")
            continue
        print(f"  detected by: {info.detected_by}")
        print(f"  sample:      {orjson.dumps(info.sample).decode()}")
        if info.needs_mapping:
            print(f"  with --map:  {SAMPLE_MAPPING.replace(chr(10), ' ')}")
    return 0
