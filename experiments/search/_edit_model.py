"""Which of a task type's texts to keep, estimated from its edits rather than read off the maximum of noisy means.

A per-type search makes one text a trial from the parent's: a few sentences added or dropped. Each trial's mean over
the type's train tasks is one noisy look at its text, and the text with the highest such mean is, more often than
not, the luckiest one (the winner's curse): a neutral or harmful edit that drew good runs leads, and every later
child is measured against its lucky mean.

The edit model reads every trial at once. A text's mean is modelled as a constant plus the sum of the effects of the
sentences it holds (sentences present in every text fold into the constant):

    m_e = c + sum_s x_es b_s + e_e,   e_e ~ N(0, v),   b_s ~ N(0, tau^2)

and fitted by ridge regression (the posterior mean under that prior). A sentence kept through many trials is
estimated from all of them, so a lucky text's edit is measured again by each of its descendants and falls back as
they accumulate; an edit seen once is shrunk toward nothing by tau^2 / (tau^2 + v). v, the noise of one trial's mean,
is read from the residuals of the two-way fit task + trial over the trials' per-task scores (run noise and how an
edit's gain varies over tasks: both are noise for a claim about new tasks); tau^2 from how far each text's mean moves
from that of the earlier text nearest it in sentences, beyond that noise. Both from the trials alone: no floor, no
calibration needed.

When texts are rewritten wholesale (every sentence new), no sentence is shared and the model is plain shrinkage of
each text toward the mean of all of them: still not the maximum of noisy means.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np


def sentence_keys(text: str) -> frozenset[str]:
    """The sentences of a text as the model's features: split as the mutators split them, compared case-folded."""
    from mutators.base import split_sentences

    return frozenset(s.casefold() for s in split_sentences(text or ""))


def noise_of_mean(rows: Sequence[Mapping[str, float]], task_ids: Sequence[str]) -> float | None:
    """v: the variance of one trial's mean over task_ids around its expectation, from the residuals of the two-way
    fit score = task + trial over the trials' per-task scores (run noise and how a text's effect varies over tasks:
    both are noise for a claim about new tasks), divided by the number of tasks. None with fewer than two trials or
    two tasks that every trial ran."""
    ids = [t for t in task_ids if all(t in r for r in rows)]
    if len(rows) < 2 or len(ids) < 2:
        return None
    y = np.array([[r[t] for t in ids] for r in rows], dtype=float)
    resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    df = (y.shape[0] - 1) * (y.shape[1] - 1)
    return float((resid ** 2).sum() / df) / len(ids)


def edit_estimates(texts: Sequence[str], means: Sequence[float], v: float) -> list[float]:
    """The posterior mean of each observation's text value (c + x b) under the additive sentence model.

    texts[i] and means[i] are one trial's text and its mean over the type's tasks, in trial order (a text may repeat:
    each trial is one observation); v the noise of one mean. tau^2, the prior variance of one sentence's effect, is
    read from the moves: each text against the earlier text nearest it in sentences (its parent, or as good as), the
    squared difference of their means less the 2v noise, over the sentences that differ; floored at v / 4 so the fit
    stays defined when edits look like noise."""
    if len(texts) != len(means) or not texts:
        raise ValueError(f"edit_estimates needs one mean per text; got {len(texts)} texts, {len(means)} means")
    if not (v > 0 and np.isfinite(v)):
        raise ValueError(f"edit_estimates needs the noise v > 0; got {v!r}")
    keys = [sentence_keys(t) for t in texts]
    every = frozenset.intersection(*keys)
    feats = sorted(set().union(*keys) - every)
    y = np.asarray(means, dtype=float)
    if not feats:
        return [float(y.mean())] * len(texts)
    moves = []
    for i in range(1, len(keys)):
        j = min(range(i), key=lambda j: (len(keys[i] ^ keys[j]), -j))
        k = len(keys[i] ^ keys[j])
        if k:
            moves.append(((y[i] - y[j]) ** 2 - 2 * v) / k)
    tau2 = max(float(np.mean(moves)) if moves else 0.0, v / 4)
    x = np.array([[1.0] + [1.0 if f in k else 0.0 for f in feats] for k in keys])
    penalty = np.diag([0.0] + [v / tau2] * len(feats))
    beta = np.linalg.solve(x.T @ x + penalty + 1e-12 * np.eye(len(feats) + 1), x.T @ y)
    return [float(r) for r in x @ beta]
