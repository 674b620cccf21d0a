"""Damage done to a SQLite store file between two runs, for the tests that check it is named, not swallowed."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def garble_pages(path: Path) -> None:
    """Overwrite the start of every page after the first (the header and schema page read, the tables do not)."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    for off in range(page, len(data), page):
        data[off:off + 64] = b"\xa5" * 64
    path.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
