"""Which candidate tasks are kept and where each goes: exact and near-duplicates dropped (the first kept), then the
split assigned before any run, stratified by task type and spread over topics, with no holdout task a
near-duplicate of a train task (experiments.config.split_leaks, the loader's own check, run on the result)."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Sequence

from experiments.config import PAIR_BLOCK, ConfigError, TaskTexts, embed, split_leaks
from harness.config import TASK_TYPES

from ._rows import Candidate


@dataclass(frozen=True)
class Dropped:
    task: Candidate
    kept_id: str  # the kept task it repeats
    similarity: float  # 1.0: the same text


@dataclass(frozen=True)
class Selection:
    kept: tuple[Candidate, ...]
    dropped: tuple[Dropped, ...]
    closest: tuple[tuple[str, str, float], ...]  # the closest pairs kept (id, id, similarity), closest first
    threshold: float

    @property
    def exact(self) -> int:
        return sum(1 for d in self.dropped if d.similarity >= 1.0)

    @property
    def near(self) -> int:
        return len(self.dropped) - self.exact


def deduplicate(cands: Sequence[Candidate], threshold: float, *, against: Sequence[Candidate] = ()) -> Selection:
    """Keep each candidate unless it is one task with one kept before it or one of `against` (tasks already
    accepted): the same text (normalized), or a near-duplicate under experiments.config.same_task at `threshold` (a
    paraphrase; a sibling with another subject or count is kept). Ids made unique. All texts are embedded once and
    compared a block of rows at a time, so 10,000 candidates fit in memory and minutes."""
    import numpy as np

    base = list(against)
    texts = TaskTexts([c.task for c in base] + [c.task for c in cands])
    alive = np.zeros(len(texts), dtype=bool)  # kept so far, in the order of `texts`
    alive[: len(base)] = True
    owner: list[str] = [c.id for c in base] + [""] * len(cands)
    dropped: list[Dropped] = []
    ids = Counter(c.id for c in base)
    new: list[Candidate] = []
    for start in range(len(base), len(texts), PAIR_BLOCK):
        stop = min(start + PAIR_BLOCK, len(texts))
        near, sims = texts.judge(slice(start, stop), slice(0, stop), threshold)
        for r in range(start, stop):
            hit = near[r - start, :r] & alive[:r]
            c = cands[r - len(base)]
            if hit.any():
                j = int(np.where(hit, sims[r - start, :r], -np.inf).argmax())
                dropped.append(Dropped(c, owner[j], float(min(sims[r - start, j], 1.0))))
                continue
            if ids[c.id]:  # two rows with one id (or a generated id again): the later one gets a suffix
                c = Candidate(f"{c.id}-{ids[c.id] + 1}", c.task, c.task_type, c.expected_count, c.required_terms,
                              c.split, c.topic, c.provenance)
            ids[c.id] += 1
            alive[r] = True
            owner[r] = c.id
            new.append(c)
    kept = base + new
    return Selection(tuple(new), tuple(dropped), closest_pairs(kept), threshold)


def closest_pairs(cands: Sequence[Candidate], k: int = 3) -> tuple[tuple[str, str, float], ...]:
    """The k most similar pairs (MiniLM cosine) among the kept tasks: what the rule let through."""
    if len(cands) < 2:
        return ()
    import numpy as np

    vecs = embed([c.task for c in cands])
    best: list[tuple[float, int, int]] = []
    for start in range(0, len(cands), PAIR_BLOCK):
        m = vecs[start : start + PAIR_BLOCK] @ vecs.T
        rows = np.arange(start, start + m.shape[0])
        m[np.arange(m.shape[0])[:, None] >= (np.arange(len(cands))[None, :] - start)] = -np.inf  # j > i only
        flat = np.argpartition(-m, min(k, m.size - 1), axis=None)[:k]
        best += [(float(m.flat[f]), int(rows[f // m.shape[1]]), int(f % m.shape[1])) for f in flat
                 if np.isfinite(m.flat[f])]
    best.sort(key=lambda t: -t[0])
    return tuple((cands[i].id, cands[j].id, s) for s, i, j in best[:k])


def assign_split(cands: Sequence[Candidate], holdout_share: float, seed: int, threshold: float) -> list[tuple[Candidate, str]]:
    """(task, split) for every task: a split the source gave is kept; the rest are assigned per task type so that
    each type has holdout_share of its tasks in the holdout (counting those given), spread evenly over the type's
    topics (ordered by topic, shuffled within it by `seed`). Near-duplicates were dropped before, so no group of
    them can straddle the split; split_leaks checks the result (a given split can still put a reworded task
    across it) and a leak is refused in one line."""
    rng = random.Random(seed)
    out: dict[str, str] = {c.id: c.split for c in cands if c.split}
    by_type: dict[str, list[Candidate]] = defaultdict(list)
    for c in cands:
        by_type[c.task_type].append(c)
    types = [t for t in TASK_TYPES if t in by_type]
    for tt in types:
        group = by_type[tt]
        free = [c for c in group if not c.split]
        rng.shuffle(free)
        free.sort(key=lambda c: c.topic)  # stable: shuffled within a topic, topics in turn
        want = quotas(cands, types, by_type, holdout_share)[tt] - sum(1 for c in group if c.split == "holdout")
        want = min(max(want, 0), len(free))
        # every (len(free) / want)-th free task goes to the holdout: each topic's tasks fall on both sides
        picks = {int((i + 0.5) * len(free) / want) for i in range(want)} if want else set()
        for i, c in enumerate(free):
            out[c.id] = "holdout" if i in picks else "train"
    pairs = [(c, out[c.id]) for c in cands]
    leaks = split_leaks([{"id": c.id, "task": c.task, "split": s} for c, s in pairs], threshold)
    if leaks:
        tr, ho, sim = leaks[0]
        raise ConfigError(f"the source puts holdout task {ho!r} beside train task {tr!r}, the same task (a "
                          f"paraphrase: MiniLM cosine {sim:.2f} >= {threshold:g}); drop one, or give both one split")
    return pairs


def quotas(cands: Sequence[Candidate], types: Sequence[str], by_type: dict, share: float) -> dict[str, int]:
    """Holdout tasks per type: round(share x all tasks) in all, shared out over the types in proportion to their
    size (largest remainder first), so the holdout has the size asked for and each type its share of it."""
    total = int(len(cands) * share + 0.5)
    raw = {tt: len(by_type[tt]) * share for tt in types}
    out = {tt: int(raw[tt]) for tt in types}
    for tt in sorted(types, key=lambda t: raw[t] - out[t], reverse=True)[:max(total - sum(out.values()), 0)]:
        out[tt] += 1
    return out
