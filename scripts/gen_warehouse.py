"""Write the generated warehouse files under deploy/warehouse/ (DDL for DuckDB, BigQuery, Snowflake;
the Iceberg schemas) from stream_pairer/schemas/, the one definition of the output records.

Usage: python scripts/gen_warehouse.py [--check]   (--check: exit 1 if a file is not current)
tests/warehouse/test_generated.py runs the check, so a schema change must be regenerated.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stream_pairer.adapters.sinks.ddl import rendered  # noqa: E402 - after the path is set

TARGET = ROOT / "deploy" / "warehouse"


def main(argv: list[str]) -> int:
    stale = []
    for rel, text in rendered().items():
        path = TARGET / rel
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(rel)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"not current (run python scripts/gen_warehouse.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
