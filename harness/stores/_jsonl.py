"""JSON Lines files: runs.jsonl, the ledgers.

Appends are whole-line, single `write` calls on an O_APPEND descriptor under an exclusive flock, so several
processes appending at once never interleave or tear a line. A run id is one line, except that a failed run redone
by a resume appends its successful record after the failed one (the last record counts).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path
from typing import Any

from ._sqlite import no_space


_seen: dict[str, tuple[int, int, dict[str, bool]]] = {}  # path -> (inode, bytes read, unique value -> a record of it did not fail)
_seen_lock = threading.Lock()


def _failed(record: Any) -> bool:
    return isinstance(record, dict) and record.get("status") == "failed"


def _recorded(fd: int, path: Path, key: str) -> dict[str, bool]:
    """The values of `key` in the file's records, each with whether a record of it did not fail (the caller holds
    its flock): read once, then only what was appended since (by any process)."""
    st = os.fstat(fd)
    name = f"{path.resolve()}#{key}"
    inode, offset, values = _seen.get(name, (st.st_ino, 0, {}))
    if inode != st.st_ino or st.st_size < offset:  # replaced or truncated: read it again
        offset, values = 0, {}
    if st.st_size > offset:
        chunk = os.pread(fd, st.st_size - offset, offset)
        end = chunk.rfind(b"\n") + 1  # a torn last line is not a record
        for raw in chunk[:end].splitlines():
            try:
                record = json.loads(raw)
                value = record.get(key)
            except (ValueError, AttributeError):
                continue
            if value is not None:
                values[str(value)] = values.get(str(value), False) or not _failed(record)
        offset += end
    _seen[name] = (st.st_ino, offset, values)
    return values


def append_jsonl(path: str | Path, record: dict[str, Any], *, unique: str | None = None) -> bool:
    """Append one record as one line, atomically with respect to other appenders. With `unique` (runs.jsonl:
    "run_id"), a record whose value there is already in the file is not appended again (a step a killed process
    had half done runs again on resume under the same run ids, and each run stays one line), unless every earlier
    record of that value failed (`status` "failed") and this one did not: a failed run redone on resume (a server
    that failed, then answered) supersedes its failure, and a reader takes the last record of a run id. False: not
    appended."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, default=str, ensure_ascii=False) + "\n").encode()
    value = None if unique is None or record.get(unique) is None else str(record[unique])
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if value is not None:
                with _seen_lock:
                    recorded = _recorded(fd, path, unique)
                    if value in recorded and (recorded[value] or _failed(record)):
                        return False
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a torn last line (killed mid-write) must not swallow this record
            view = memoryview(line)
            with no_space(path):  # a full disk stops the run (harness.stores.DiskFull), not one record
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return True


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read every valid record; a torn final line (e.g. power loss) is skipped, not fatal."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
