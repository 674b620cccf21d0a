"""File context: path detection, chunking, bounded reading of huge files, MarkItDown conversion."""

from __future__ import annotations

import tracemalloc

import pytest

from harness.research import split_chunks
from harness.research._chunker import (
    ChunkerError,
    find_paths,
    iter_file_chunks,
    query_terms,
    read_file_context,
    select_chunks,
)


@pytest.mark.parametrize(
    "task, expected",
    [
        ("Summarise ./docs/report.pdf for me", ["./docs/report.pdf"]),
        ('Compare "my notes/plan.md" and data/results.csv', ["my notes/plan.md", "data/results.csv"]),
        ("Read /abs/path/paper.docx then notes.txt", ["/abs/path/paper.docx", "notes.txt"]),
        ("Review `src/app.py` and ~/todo.md.", ["src/app.py", "~/todo.md"]),
        ("List 5 best practices for Python asyncio and save to output.md", []),
        ("Write the summary to report.md using input.md", ["input.md"]),
        ("See https://example.org/guide.html and e.g. Python 3.11 on v1.0", []),
        ("Email me at a.b@example.com", []),
        ("Check a.md, a.md and b.rst", ["a.md", "b.rst"]),
        ("No files here at all", []),
    ],
)
def test_find_paths_table(task, expected):
    assert find_paths(task) == expected


def test_find_paths_accepts_existing_files_with_unknown_suffix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.weird").write_text("x")
    assert find_paths("analyse data.weird and ghost.weird") == ["data.weird"]


@pytest.mark.parametrize("size", [200, 800, 1500])
def test_split_chunks_bounded_and_lossless_in_words(size):
    text = "\n\n".join(f"Paragraph {i}. " + "word " * (i * 37 % 400) for i in range(60)) + "x" * 5000
    chunks = split_chunks(text, size)
    assert all(len(c) <= size for c in chunks)
    assert " ".join(chunks).split() == text.split() or "".join("".join(chunks).split()) == "".join(text.split())


def test_query_terms_drop_stop_words():
    assert query_terms("List the best practices for Python asyncio") == frozenset({"practices", "python", "asyncio"})


def test_select_prefers_matching_chunks_in_document_order():
    chunks = [f"filler {i} " * 20 for i in range(50)]
    chunks[10] = "asyncio gather collects results " * 5
    chunks[40] = "asyncio semaphore limits concurrency " * 5
    chosen, scanned = select_chunks(chunks, "asyncio gather semaphore", 500)
    assert scanned == 50
    assert [i for i, _ in chosen] == [10, 40]


def test_select_without_matches_keeps_the_head():
    chosen, _ = select_chunks(["alpha " * 50, "beta " * 50, "gamma " * 50], "zzz", 600)
    assert [i for i, _ in chosen] == [0, 1]


def test_huge_file_is_read_bounded(tmp_path):
    path = tmp_path / "huge.log"
    block = "INFO routine heartbeat message with nothing interesting in it\n" * 10_000
    with open(path, "w") as fh:
        for i in range(40):  # ~25 MB
            fh.write(block)
            if i == 1:
                fh.write("ERROR asyncio deadlock detected in worker pool\n")
            if i == 30:
                fh.write("ERROR asyncio needle beyond the read limit\n")
    assert path.stat().st_size > 20_000_000
    tracemalloc.start()
    text = read_file_context(path, "asyncio deadlock error", max_chars=2000, max_bytes=4_000_000)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(text) <= 2000
    assert "deadlock detected" in text
    assert "beyond the read limit" not in text  # past max_bytes: never read
    assert peak < 8_000_000, f"peak {peak} bytes while reading a 25 MB file"
    assert text.startswith("[file huge.log: chunks ")


def test_iter_file_chunks_handles_split_multibyte(tmp_path):
    path = tmp_path / "u.txt"
    path.write_text("é" * 200_000, encoding="utf-8")
    chunks = list(iter_file_chunks(path, 1500, max_bytes=10_000_000))
    assert "".join(chunks) == "é" * 200_000


def test_html_goes_through_markitdown(tmp_path):
    path = tmp_path / "page.html"
    path.write_text("<html><body><h1>Guide</h1><p>Use asyncio.TaskGroup for structured concurrency.</p>"
                    "<script>ignore()</script></body></html>")
    text = read_file_context(path, "TaskGroup concurrency", 1000)
    assert "TaskGroup" in text and "ignore()" not in text


def test_docx_goes_through_markitdown(tmp_path):
    pytest.importorskip("mammoth")  # markitdown[docx]
    docx = pytest.importorskip("docx")
    doc = docx.Document()
    doc.add_paragraph("Quarterly revenue grew by 12 percent in the northern region.")
    path = tmp_path / "r.docx"
    doc.save(path)
    assert "revenue grew" in read_file_context(path, "revenue", 1000)


@pytest.mark.parametrize(
    "name, content, error, message",
    [
        ("missing.txt", None, FileNotFoundError, "missing.txt: no such file"),
        ("blob.bin", b"\x00\x01\x02binary", ChunkerError, "binary file of unknown type .bin"),
    ],
)
def test_read_errors(tmp_path, name, content, error, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(error, match=message):
        read_file_context(path, "x", 500)


def test_max_chars_is_respected_for_small_budgets(tmp_path):
    path = tmp_path / "a.md"
    path.write_text("asyncio " * 2000)
    assert len(read_file_context(path, "asyncio", 300)) <= 300
