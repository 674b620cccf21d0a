"""Data types and text helpers shared by the mutation operators.

Pure functions on strings: hashing, sentence splitting, length bounding, and the clean-up of what a model
returns when asked for an instruction (fences, wrapping quotes, "Here is the improved instruction:").
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Iterable, Protocol

from harness.inference import LLM
from harness.text import drop_lone_fence, unwrap_fence

__all__ = [
    "Candidate",
    "MutationContext",
    "MutationFailed",
    "Operator",
    "instruction_hash",
    "normalize",
    "split_sentences",
    "join_sentences",
    "is_multiline",
    "bound_length",
    "clean_instruction",
    "degenerate_reason",
    "placeholders",
]

MIN_CHARS = 20
MIN_WORDS = 4


class MutationFailed(RuntimeError):
    """An operator could not produce a candidate (no model, nothing to work on, unusable reply)."""


def normalize(text: str) -> str:
    """Whitespace-normalised text: runs of whitespace become one space, ends stripped."""
    return " ".join(text.split())


def instruction_hash(text: str) -> str:
    """sha256 of the whitespace-normalised instruction, first 12 hex chars."""
    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class Candidate:
    """A proposed instruction. `parents` are instruction hashes; `note` says how it was made."""

    text: str
    operator: str
    parents: tuple[str, ...]
    hash: str
    note: str = ""

    @classmethod
    def make(cls, text: str, operator: str, parents: tuple[str, ...], note: str = "") -> "Candidate":
        return cls(text=text, operator=operator, parents=tuple(parents), hash=instruction_hash(text), note=note)


@dataclass(frozen=True)
class MutationContext:
    """Everything an operator may look at. Lists are accepted and stored as tuples.

    history: (instruction, score) pairs seen so far, any order; feedback: the evaluator's feedback on the
    parent's worst tasks; pool: good candidates for crossover; other and ancestor: the second parent of a merge
    and the ancestor both descend from (empty for single-parent operators).
    """

    base: str
    history: tuple[tuple[str, float], ...] = ()
    feedback: tuple[str, ...] = ()
    pool: tuple[str, ...] = ()
    task_type: str = "enumerated"
    seed: int = 0
    max_chars: int = 1200
    other: str = ""
    ancestor: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.base, str) or not self.base.strip():
            raise ValueError(f"MutationContext.base must be a non-empty instruction string, got {self.base!r}")
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, int) or self.max_chars < 40:
            raise ValueError(f"MutationContext.max_chars must be an int >= 40, got {self.max_chars!r}")
        history = []
        for i, pair in enumerate(self.history):
            try:
                text, score = pair
                score = float(score)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"MutationContext.history[{i}] must be an (instruction, score) pair, got {pair!r}"
                ) from exc
            if not isinstance(text, str) or math.isnan(score):
                raise ValueError(f"MutationContext.history[{i}] must be (str, number), got {pair!r}")
            history.append((text, score))
        for name in ("feedback", "pool"):
            values = getattr(self, name)
            if isinstance(values, str):
                raise ValueError(f"MutationContext.{name} must be a sequence of strings, got one string")
            if not all(isinstance(v, str) for v in values):
                raise ValueError(f"MutationContext.{name} must hold strings, got {values!r}")
            object.__setattr__(self, name, tuple(values))
        for name in ("other", "ancestor"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"MutationContext.{name} must be an instruction string, got {getattr(self, name)!r}")
        object.__setattr__(self, "history", tuple(history))
        object.__setattr__(self, "seed", int(self.seed))

    @property
    def base_hash(self) -> str:
        return instruction_hash(self.base)


class Operator(Protocol):
    def __call__(self, ctx: MutationContext, llm: LLM | None) -> Candidate: ...



# -- sentences ---------------------------------------------------------------------------------------

_SENT_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[*`-]?[A-Z0-9])")
_ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|fig|no|eq|resp)\.|\b[A-Z]\.)$", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def split_sentences(text: str) -> list[str]:
    """Sentences and list lines of an instruction, in order, whitespace-normalised, empties dropped.

    Each non-empty line is split at sentence ends (a period, ! or ? followed by a capital or digit), except
    after common abbreviations (e.g., i.e., vs.). A bulleted line keeps its bullet marker on its first sentence.
    """
    out: list[str] = []
    for line in text.splitlines():
        line = normalize(line)
        if not line:
            continue
        parts: list[str] = []
        pos = 0
        for m in _SENT_END.finditer(line):
            piece = line[pos : m.start()] + line[m.start() : m.end()].rstrip()
            if _ABBREV.search(piece.rstrip("\"')]")):
                continue
            parts.append(piece.strip())
            pos = m.end()
        parts.append(line[pos:].strip())
        out.extend(p for p in parts if p)
    return out


def counted_feedback(items: Iterable[tuple[str, float, str]]) -> list[str]:
    """The judge's words over many tasks as reflection reads them: (task id, score, words) per task, the same words
    counted once with the tasks they came from (the first six named) and their mean score, most tasks first, then
    the lowest mean. Tasks without words are left out."""
    groups: dict[str, list[tuple[str, float]]] = {}
    for task_id, score, words in items:
        if str(words).strip():
            groups.setdefault(str(words).strip(), []).append((str(task_id), float(score)))
    n = sum(len(v) for v in groups.values())

    def mean(v: list[tuple[str, float]]) -> float:
        return sum(s for _, s in v) / len(v)

    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), mean(kv[1])))
    return [f"[{len(v)} of {n} tasks ({', '.join(t for t, _ in v[:6])}{', ...' if len(v) > 6 else ''}), mean score "
            f"{mean(v):.1f}] {words}" for words, v in ranked]


def join_sentences(sentences: list[str] | tuple[str, ...], *, multiline: bool = False) -> str:
    """Inverse of split_sentences: one line per sentence when multiline, else one paragraph."""
    parts = [s.strip() for s in sentences if s.strip()]
    return ("\n" if multiline else " ").join(parts)


def is_multiline(text: str) -> bool:
    """True when the instruction is laid out as lines (list items, one rule per line)."""
    return sum(1 for line in text.splitlines() if line.strip()) > 1


# -- bounding and clean-up ---------------------------------------------------------------------------


def bound_length(text: str, max_chars: int) -> tuple[str, bool]:
    """Cut text to at most max_chars at a sentence boundary -> (text, was_cut).

    Whole sentences are kept while they fit; if even the first one does not, it is cut at the last word
    boundary and closed with a period.
    """
    text = text.strip()
    if len(text) <= max_chars:
        return text, False
    multiline = is_multiline(text)
    kept: list[str] = []
    for sent in split_sentences(text):
        if len(join_sentences(kept + [sent], multiline=multiline)) > max_chars:
            break
        kept.append(sent)
    if kept:
        return join_sentences(kept, multiline=multiline), True
    head = normalize(text)[: max_chars - 1]
    cut = head.rfind(" ")
    head = head[:cut] if cut > max_chars // 2 else head
    return head.rstrip(" ,;:-") + ".", True


_PREAMBLES = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"^(?:sure|okay|ok|certainly|absolutely|of course)\b[^\n:]{0,60}?[.!,:]\s*",
        r"^here(?:'s| is| are)\b[^\n:]{0,120}:\s*",
        r"^(?:the |my |a )?(?:new|improved|revised|updated|final|merged|edited|better|rewritten)?\s*"
        r"(?:synthesis )?instruction(?: text)?\s*(?:\(\s*\w+\s*\))?\s*:\s*",
        r"^(?:text|edit|edited|revision|answer|output)\s*:\s*",
        r"^<ins>\s*",
    )
]
_POSTSCRIPTS = re.compile(
    r"\n\s*(?:score\s*[:=]|explanation\s*:|this (?:new |revised |improved )?instruction\b|"
    r"\(?(?:i|we) (?:added|removed|changed|kept)\b).*$",
    re.IGNORECASE | re.DOTALL,
)
_QUOTES = [('"', '"'), ("'", "'"), ("\u201c", "\u201d"), ("\u2018", "\u2019"), ("`", "`"), ("<INS>", "</INS>")]


def clean_instruction(text: str) -> str:
    """Strip what models wrap an instruction in: fences, preambles, wrapping quotes, <INS> tags, postscripts.

    Idempotent on ordinary instructions.
    """
    prev = None
    text = text.strip()
    while text != prev:
        prev = text
        text = unwrap_fence(text).strip()
        text = drop_lone_fence(text).strip()  # a fence opened and cut off at max_tokens, or a stray closing one
        for pat in _PREAMBLES:
            text = pat.sub("", text, count=1).strip()
        text = re.sub(r"\s*</ins>\s*$", "", text, flags=re.IGNORECASE).strip()
        text = _POSTSCRIPTS.sub("", text).strip()
        for left, right in _QUOTES:
            if len(text) > len(left) + len(right) and text.startswith(left) and text.endswith(right):
                inner = text[len(left) : len(text) - len(right)]
                if left not in inner or left != right:
                    text = inner.strip()
    return text


_REFUSAL = re.compile(
    r"^(?:i(?:'m| am) sorry|sorry\b|i (?:cannot|can't|can not|won't|am unable|'m unable)|as an ai\b|"
    r"unfortunately,? i\b)",
    re.IGNORECASE,
)
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


def placeholders(text: str) -> frozenset[str]:
    """Template fields such as {count} that the synthesis step fills in; mutations must keep them."""
    return frozenset(_PLACEHOLDER.findall(text))


def degenerate_reason(text: str, base: str = "") -> str | None:
    """Why text cannot serve as an instruction, or None when it can.

    Rejects empty or tiny text, leftover JSON, mostly non-letters, heavy repetition, schema echoes, and loss
    of a template placeholder the base has.
    """
    flat = normalize(text)
    if not flat:
        return "empty"
    words = flat.split()
    if len(flat) < MIN_CHARS or len(words) < MIN_WORDS:
        return f"too short ({len(words)} words, {len(flat)} chars)"
    if flat[0] in "{[" or re.search(r'"\w+"\s*:', flat):
        return "looks like JSON, not an instruction"
    letters = sum(ch.isalpha() for ch in flat)
    if letters / len(flat) < 0.6:
        return f"mostly non-letters ({letters}/{len(flat)} letters)"
    lowered = [w.lower().strip(".,;:!?\"'") for w in words]
    if len(words) >= 12 and len(set(lowered)) / len(lowered) < 0.35:
        return f"repetitive ({len(set(lowered))} distinct of {len(lowered)} words)"
    if _REFUSAL.search(flat):
        return "a refusal or apology, not an instruction"
    if re.search(r"\bmaxLength\b|\"type\"\s*:|<instruction>|\binstruction\s*:\s*string\b", flat, re.IGNORECASE):
        return "echoes the schema or prompt"
    missing = placeholders(base) - placeholders(text)
    if missing:
        return f"drops template field(s) {', '.join(sorted(missing))}"
    return None
