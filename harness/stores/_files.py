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

from ._sqlite import no_space

__all__ = ["replacing", "atomic_write_bytes", "atomic_write_text", "atomic_write_json", "claim_new_file",
           "claim_output"]

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
    except BaseException as exc:
        for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
            with contextlib.suppress(OSError):
                leftover.unlink()
        if isinstance(exc, OSError):  # a full disk stops the run, naming the file (harness.stores.DiskFull)
            with no_space(path):
                raise
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


def claim_new_file(path: str | Path, *, mode: int = FILE_MODE) -> bool:
    """Create `path` empty if no file has that name (O_CREAT | O_EXCL, so of two writers racing for one name exactly
    one wins); False when it exists. The claimant then writes it with the atomic writes above."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def claim_output(path: str | Path, owner: str) -> Path:
    """The file a run writes its output to: `path` when no file has that name yet, else `<stem>-<owner><suffix>`
    beside it (owner: the run id, so the name says which run wrote it). Two runs asking for one name (two tasks
    that both say "save to output.md") each keep their own file; nothing a run wrote is overwritten by another."""
    path = Path(path)
    if claim_new_file(path):
        return path
    tag = "".join(c if c.isalnum() or c in "-_." else "_" for c in owner).strip(".") or "run"
    return path.with_name(f"{path.stem}-{tag}{path.suffix}")
