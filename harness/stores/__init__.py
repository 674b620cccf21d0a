"""The stores' plumbing, in one place: SQLite files, atomic file writes, JSON Lines, and the locks and WAL that let
several threads and processes share a store.

- _sqlite: `connect` and `ThreadLocalSQLite` (WAL, busy timeout, the lock retry) and the store faults that stop a
  run naming the file (`StoreError`, `DiskFull`, `StoreLocked`, `StoreReadOnly`; `fault_in`, `no_space` ...).
- _files: atomic writes (`atomic_write_text` / `_bytes` / `_json`, `replacing`) and `claim_output`.
- _jsonl: `append_jsonl` (whole lines, once per run id) and `read_jsonl` (a torn last line skipped).
- _sharing: a store file several processes share: `sqlite_file`, `sqlite_db`, `resolve_tracking_uri`, `file_lock`,
  `store_lock`, `enable_wal`.
"""

from ._files import atomic_write_json, atomic_write_text, claim_output, replacing
from ._jsonl import append_jsonl, read_jsonl
from ._sharing import enable_wal, file_lock, resolve_tracking_uri, sqlite_db, sqlite_file, store_lock
from ._sqlite import (
    DiskFull,
    StoreError,
    StoreGone,
    StoreLocked,
    StoreReadOnly,
    ThreadLocalSQLite,
    busy_timeout_s,
    check_store,
    damaged,
    fault_in,
    full_in,
    locked_in,
    named_faults,
    no_space,
    unsafe_to_close,
    watch,
)

__all__ = [
    "StoreError",
    "StoreGone",
    "DiskFull",
    "StoreLocked",
    "StoreReadOnly",
    "busy_timeout_s",
    "ThreadLocalSQLite",
    "check_store",
    "damaged",
    "fault_in",
    "full_in",
    "locked_in",
    "named_faults",
    "no_space",
    "unsafe_to_close",
    "watch",
    "replacing",
    "atomic_write_text",
    "atomic_write_json",
    "claim_output",
    "append_jsonl",
    "read_jsonl",
    "file_lock",
    "sqlite_file",
    "sqlite_db",
    "resolve_tracking_uri",
    "store_lock",
    "enable_wal",
]
