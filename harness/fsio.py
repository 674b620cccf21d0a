"""Atomic file writes: a reader sees the old file or the whole new one, never a half-written one.

The new content goes to a temp file in the target's own folder (so the final os.replace is a rename within one
file system), is flushed to disk, and is renamed over the target. The temp name is unique (mkstemp), so two
writers of one path (worker threads, sweep processes) never write into, or rename away, each other's temp file.
On any failure the temp file is removed and the target is left as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

__all__ = ["replacing", "atomic_write_bytes", "atomic_write_text", "atomic_write_json"]

FILE_MODE = 0o644  # mkstemp makes 0600; results stay readable like files written the ordinary way


@contextlib.contextmanager
def replacing(path: str | Path, *, mode: int = FILE_MODE) -> Iterator[Path]:
    """Yield a fresh temp path beside `path`; when the block ends normally it replaces `path` at once.

    For writers that need a path rather than a string (a SQLite database built in place, a tool's output file).
    The temp file exists (empty) when the block starts. When the block raises, it is removed with any SQLite
    journal beside it, and `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
            with contextlib.suppress(OSError):
                leftover.unlink()
        raise


def atomic_write_bytes(path: str | Path, data: bytes, *, mode: int = FILE_MODE) -> Path:
    """Write `data` to `path` atomically (see the module docstring); returns the path."""
    with replacing(path, mode=mode) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8", mode: int = FILE_MODE) -> Path:
    return atomic_write_bytes(path, text.encode(encoding), mode=mode)


def atomic_write_json(path: str | Path, obj: Any, *, mode: int = FILE_MODE, **dumps: Any) -> Path:
    """json.dumps(obj, **dumps) written atomically. The JSON is built before the file is touched: an object that
    cannot be serialised raises and leaves the old file in place."""
    return atomic_write_text(path, json.dumps(obj, **dumps), mode=mode)
