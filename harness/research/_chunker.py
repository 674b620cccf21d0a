"""File context for research: find the file paths a task names and pull the passages that matter.

Text files are streamed in blocks and cut into ~1500-char chunks; only the best-scoring chunks (query-term
overlap) are kept in a bounded heap, so a multi-gigabyte log costs at most `max_bytes` of reading and a few
chunks of memory. PDF, DOCX, PPTX, XLSX and HTML go through MarkItDown first, then the same selection.
"""

from __future__ import annotations

import heapq
import math
import re
from pathlib import Path
from typing import Iterable, Iterator

from harness.text import STOPWORDS

TEXT_SUFFIXES = frozenset(
    ".md .markdown .txt .rst .py .pyi .json .jsonl .yaml .yml .toml .ini .cfg .csv .tsv .log .tex .xml .sql "
    ".sh .js .ts .c .h .cpp .hpp .go .rs .java .rb .r .ipynb".split()
)
CONVERT_SUFFIXES = frozenset(".pdf .docx .pptx .xlsx .html .htm .epub".split())
MAX_READ_BYTES = 8_000_000  # a text file is read up to here; converted formats are refused above 4x this
_KNOWN_SUFFIXES = TEXT_SUFFIXES | CONVERT_SUFFIXES

_WORD = re.compile(r"[A-Za-z0-9_]{2,}")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_QUOTED = re.compile(r"""(?:"([^"\n]{1,400})"|'([^'\n]{1,400})'|`([^`\n]{1,400})`)""")
_BARE = re.compile(r"(?<![\w@/.~-])((?:~|\.{1,2})?/?(?:[\w.\-]+/)*[\w\-][\w.\-]*\.[A-Za-z][A-Za-z0-9]{0,5})(?![\w/])")
_OUTPUT_CUE = re.compile(r"(?:save|write|export|store|output|dump)\w*(?:\s+(?:it|this|that|them|the\s+\w+|results?))?\s+(?:to|as|into|in)\s*$", re.IGNORECASE)


class ChunkerError(RuntimeError):
    """A file could not be read or converted. The message names the file and the reason."""


def find_paths(task: str) -> list[str]:
    """File paths a task names as inputs, in order of appearance, without duplicates.

    Quoted strings count when they look like a path; bare tokens count when they carry a known extension or
    exist on disk. URLs are ignored, and a path right after "save to" / "write to" (the task's output) is skipped.
    """
    text = _URL.sub(" ", task)
    found: list[tuple[int, str]] = []
    for m in _QUOTED.finditer(text):
        cand = next(g for g in m.groups() if g is not None).strip()
        if _looks_like_path(cand, quoted=True) and not _is_output(text, m.start()):
            found.append((m.start(), cand))
    masked = _QUOTED.sub(lambda m: " " * len(m.group(0)), text)
    for m in _BARE.finditer(masked):
        cand = m.group(1).rstrip(".")
        if _looks_like_path(cand, quoted=False) and not _is_output(masked, m.start()):
            found.append((m.start(), cand))
    out: list[str] = []
    for _, path in sorted(found):
        if path not in out:
            out.append(path)
    return out


def _looks_like_path(cand: str, *, quoted: bool) -> bool:
    if not cand or "\x00" in cand or len(cand) > 400:
        return False
    suffix = Path(cand).suffix.lower()
    if suffix in _KNOWN_SUFFIXES:
        return True
    if quoted and ("/" in cand or suffix) and " " not in cand.strip("/"):
        return _exists(cand)
    return bool(suffix) and _exists(cand)


def _exists(cand: str) -> bool:
    try:
        return Path(cand).expanduser().exists()
    except (OSError, ValueError, RuntimeError):  # RuntimeError: '~user' of an unknown user ("~0/" in a task)
        return False


def _is_output(text: str, start: int) -> bool:
    return bool(_OUTPUT_CUE.search(text[max(0, start - 40) : start]))


def query_terms(query: str) -> frozenset[str]:
    """Lower-cased content words of a query (stop words and 1-char tokens dropped)."""
    return frozenset(w for w in (t.lower() for t in _WORD.findall(query)) if w not in STOPWORDS)


def split_chunks(text: str, size: int = 1500) -> list[str]:
    """Cut text into chunks of about `size` chars, preferring paragraph, then line, then word boundaries."""
    return list(_pack(_pieces(text, size), size))


def _pieces(text: str, size: int) -> Iterator[str]:
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        while len(para) > size:
            cut = _cut_point(para, size)
            yield para[:cut].strip()
            para = para[cut:].strip()
        if para:
            yield para


def _cut_point(text: str, size: int) -> int:
    window = text[:size]
    for sep in ("\n", ". ", " "):
        idx = window.rfind(sep)
        if idx >= size // 2:
            return idx + len(sep)
    return size


def _pack(pieces: Iterable[str], size: int) -> Iterator[str]:
    buf = ""
    for piece in pieces:
        if buf and len(buf) + 2 + len(piece) > size:
            yield buf
            buf = piece
        else:
            buf = f"{buf}\n\n{piece}" if buf else piece
    if buf:
        yield buf


def iter_file_chunks(path: str | Path, size: int = 1500, max_bytes: int = MAX_READ_BYTES) -> Iterator[str]:
    """Stream a text file as chunks of about `size` chars, reading at most `max_bytes` bytes."""
    import codecs

    block = max(size * 8, 65536)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    read = 0
    carry = ""
    with open(path, "rb") as fh:
        while read < max_bytes:
            data = fh.read(min(block, max_bytes - read))
            if not data:
                break
            read += len(data)
            carry += decoder.decode(data)
            pos = 0
            while len(carry) - pos >= 2 * size:
                cut = pos + _cut_point(carry[pos : pos + size], size)
                piece = carry[pos:cut].strip()
                pos = cut
                if piece:
                    yield piece
            carry = carry[pos:]
    carry += decoder.decode(b"", final=True)
    for piece in split_chunks(carry, size):
        yield piece


def _score(chunk: str, terms: frozenset[str]) -> float:
    if not terms:
        return 0.0
    lower = chunk.lower()
    return sum(1.0 + math.log(c) for c in (lower.count(t) for t in terms) if c)


def select_chunks(chunks: Iterable[str], query: str, max_chars: int) -> tuple[list[tuple[int, str]], int]:
    """Keep the best chunks (by query-term overlap) that fit in max_chars; returns ([(index, chunk)], scanned).

    Memory stays bounded: a heap holds only as many candidates as could fit. With no matching term the file's
    first chunks are kept. The result is in document order.
    """
    terms = query_terms(query)
    heap: list[tuple[float, int, str]] = []
    head: list[tuple[int, str]] = []
    head_chars = 0
    scanned = 0
    capacity = 64
    for i, chunk in enumerate(chunks):
        scanned += 1
        if head_chars < max_chars:
            head.append((i, chunk))
            head_chars += len(chunk)
        score = _score(chunk, terms)
        if score <= 0:
            continue
        item = (score, -i, chunk)
        if len(heap) < capacity:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
    ranked = [(-neg_i, c) for _, neg_i, c in sorted(heap, reverse=True)] or head
    chosen: list[tuple[int, str]] = []
    used = 0
    for idx, chunk in ranked:
        cost = len(chunk) + 2
        if used + cost > max_chars:
            if not chosen:
                chosen.append((idx, chunk[: max(max_chars - 2, 0)]))
            continue
        chosen.append((idx, chunk))
        used += cost
    chosen.sort()
    return chosen, scanned


def _convert(path: Path, max_bytes: int) -> str:
    size = path.stat().st_size
    if size > max_bytes:
        raise ChunkerError(f"{path}: {size} bytes is over the {max_bytes}-byte limit for converted formats")
    if path.suffix.lower() in {".html", ".htm"}:
        from harness.security import html_to_text

        return html_to_text(path.read_text(encoding="utf-8", errors="replace"))
    try:
        from markitdown import MarkItDown

        return MarkItDown().convert(str(path)).text_content or ""
    except Exception as exc:  # MarkItDown raises many types (missing optional deps, corrupt files)
        raise ChunkerError(f"{path}: MarkItDown could not convert it ({type(exc).__name__}: {exc})") from exc


def _is_binary(path: Path) -> bool:
    with open(path, "rb") as fh:
        return b"\x00" in fh.read(8192)


def read_file_context(
    path: str | Path,
    query: str,
    max_chars: int = 4000,
    *,
    chunk_chars: int = 1500,
    max_bytes: int = MAX_READ_BYTES,
) -> str:
    """The passages of a file most relevant to `query`, at most max_chars long, with a one-line header.

    Raises FileNotFoundError for a missing file and ChunkerError for an unreadable or unconvertible one.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such file")
    suffix = p.suffix.lower()
    if suffix in CONVERT_SUFFIXES:
        chunks: Iterable[str] = split_chunks(_convert(p, max_bytes * 4), chunk_chars)
    elif suffix in TEXT_SUFFIXES or not _is_binary(p):
        chunks = iter_file_chunks(p, chunk_chars, max_bytes)
    else:
        raise ChunkerError(f"{p}: binary file of unknown type {suffix or '(no extension)'}; expected text or {sorted(CONVERT_SUFFIXES)}")
    header_budget = 120
    chosen, scanned = select_chunks(chunks, query, max(max_chars - header_budget, 200))
    ids = ",".join(str(i + 1) for i, _ in chosen[:12]) + ("..." if len(chosen) > 12 else "")
    header = f"[file {p.name}: chunks {ids} of {scanned}]"
    body = "\n[...]\n".join(c for _, c in chosen)
    return f"{header}\n{body}"[:max_chars]
