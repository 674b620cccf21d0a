"""harness.stores' atomic writes (_files): a reader sees the old file or the whole new one; a failed write leaves no temp file behind."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import threading
import time
from pathlib import Path

import pytest

from harness.stores import _files as fsio
from harness.stores import atomic_write_json, atomic_write_text, replacing
from harness.stores._files import atomic_write_bytes
from workers import run_workers


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """A folder of its own: the suite's autouse fixtures put results/ under tmp_path."""
    own = tmp_path / "own"
    own.mkdir()
    return own


def test_writes_replace_the_file_and_leave_only_it(folder):
    path = folder / "deep" / "er" / "out.md"  # folders are created
    assert atomic_write_text(path, "first ü\n") == path
    assert path.read_text(encoding="utf-8") == "first ü\n"
    atomic_write_bytes(path, b"\x00second")
    assert path.read_bytes() == b"\x00second"
    atomic_write_json(path, {"a": [1, "é"]}, ensure_ascii=False, indent=1)
    assert path.read_text(encoding="utf-8") == '{\n "a": [\n  1,\n  "é"\n ]\n}'
    assert _names(path.parent) == ["out.md"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's 0600


def test_a_failed_rename_keeps_the_old_file_and_removes_the_temp(folder, monkeypatch):
    path = folder / "cache.json"
    atomic_write_json(path, {"v": 1})

    def refuse(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(fsio.os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_json(path, {"v": 2})
    assert json.loads(path.read_text()) == {"v": 1}
    assert _names(folder) == ["cache.json"]


def test_a_writer_failing_half_way_keeps_the_old_file(folder):
    path = folder / "out.txt"
    atomic_write_text(path, "old")
    with pytest.raises(RuntimeError, match="killed"):
        with replacing(path) as tmp:
            with open(tmp, "w") as fh:
                fh.write("half of the ne")
            raise RuntimeError("killed mid-write")
    assert path.read_text() == "old"
    assert _names(folder) == ["out.txt"]


def test_json_that_cannot_be_serialised_never_touches_the_file(folder):
    path = folder / "state.json"
    atomic_write_json(path, [1])
    with pytest.raises(TypeError):
        atomic_write_json(path, {"x": object()})
    assert json.loads(path.read_text()) == [1]
    assert _names(folder) == ["state.json"]


def test_a_sqlite_database_built_in_place_is_swapped_in_whole(folder):
    """The search index build: a database written through `replacing`; a failed build leaves the old index and
    neither the temp file nor its rollback journal."""
    path = folder / "index.sqlite"
    with replacing(path) as tmp, contextlib.closing(sqlite3.connect(tmp)) as conn:
        conn.execute("CREATE TABLE t (v)")
        conn.execute("INSERT INTO t VALUES ('old')")
        conn.commit()
    with pytest.raises(RuntimeError):
        with replacing(path) as tmp, contextlib.closing(sqlite3.connect(tmp)) as conn:
            conn.execute("CREATE TABLE t (v)")
            conn.execute("INSERT INTO t VALUES ('new')")  # open transaction: a -journal file exists now
            assert Path(f"{tmp}-journal").exists()
            raise RuntimeError("build failed")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT v FROM t").fetchall() == [("old",)]
    assert _names(folder) == ["index.sqlite"]


def _payload(worker: int, i: int) -> str:
    return json.dumps({"worker": worker, "i": i, "pad": str(worker) * (400_000 + 1000 * i)})


def _rewrite(worker: int, path: str, n: int) -> None:
    for i in range(n):
        atomic_write_text(path, _payload(worker, i))


def test_readers_never_see_a_half_file_while_processes_rewrite_it(folder):
    """Four processes rewrite one ~400 KB file 20 times each (one temp name per writer, so none renames another's
    temp away) while this process reads it in a loop: every read is one writer's whole payload."""
    path = folder / "shared.json"
    atomic_write_text(path, _payload(9, 0))
    done = threading.Event()
    reads: list[str] = []

    def read_loop() -> None:
        while not done.is_set():
            reads.append(path.read_text())
            time.sleep(0.001)

    reader = threading.Thread(target=read_loop)
    reader.start()
    try:
        run_workers(_rewrite, str(path), 20)
    finally:
        done.set()
        reader.join(30)
    assert len(reads) > 10
    for text in reads:
        record = json.loads(text)  # a torn file would not parse
        assert text == _payload(record["worker"], record["i"])
    assert _names(folder) == ["shared.json"]
    assert os.stat(path).st_size == len(_payload(json.loads(path.read_text())["worker"], 19))
