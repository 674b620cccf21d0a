"""Promotion as a pure function: ranked candidates, holdout scores and floors in, the verdict out."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from experiments.promotion import Candidate, HoldoutScores, candidates, decide

TRAIN = [f"t{i}" for i in range(8)]
HOLD = ["h0", "h1", "h2", "h3"]
REF = {t: 5.0 for t in TRAIN}  # the baseline's per-task train reference


def cand(number: int, train: float, h: str) -> Candidate:
    scores = {t: train + 0.01 * i for i, t in enumerate(TRAIN)}  # every task above the reference: p = 1/256
    return Candidate(number, h, "op", sum(scores.values()) / len(scores), scores, {"research": f"text {h}"})


def hold(value: float) -> HoldoutScores:
    return HoldoutScores({t: value for t in HOLD})


def _decide(top, holdout, base=hold(5.0), **kw):
    args = dict(train_floor=0.3, holdout_floor=0.2, alpha=0.05) | kw
    return decide(top, REF, base, holdout, **args)


@pytest.mark.parametrize(
    "train, held, wins",
    [
        (7.0, 6.0, True),  # claimed on train, +1.0 on the holdout > floor 0.2
        (7.0, 5.1, False),  # claimed on train, holdout +0.1 within its floor
        (5.1, 7.0, False),  # holdout far ahead, but train +0.1 + within the train floor 0.3
    ],
)
def test_a_candidate_wins_only_when_train_claims_and_holdout_clears_its_floor(train, held, wins):
    verdict = _decide([cand(3, train, "a")], {"a": hold(held)})
    (row,) = verdict.rows
    assert row.wins is wins and (verdict.winner is row) is wins
    assert row.holdout_diff == pytest.approx(held - 5.0) and row.train.claimed is (train > 5.3)


def test_among_winners_the_best_holdout_mean_is_promoted_and_the_earlier_trial_on_a_tie():
    top = [cand(2, 7.5, "a"), cand(5, 7.2, "b"), cand(4, 7.0, "c")]
    verdict = _decide(top, {"a": hold(6.0), "b": hold(6.5), "c": hold(6.5)})
    assert [r.trial for r in verdict.rows] == [2, 5, 4] and all(r.wins for r in verdict.rows)
    assert verdict.winner.trial == 4  # b and c tie at 6.5 on the holdout: the earlier trial


def test_no_holdout_or_no_candidate_promotes_nothing_and_a_failed_baseline_holdout_fails_every_row():
    assert _decide([cand(1, 7.0, "a")], {}, base=None).rows == ()
    assert _decide([], {}).winner is None
    verdict = _decide([cand(1, 7.0, "a")], {"a": hold(9.0)}, base=HoldoutScores(None, "task 'h0' failed: boom"))
    (row,) = verdict.rows
    assert verdict.winner is None and not row.wins and row.holdout_mean is None and row.error == "task 'h0' failed: boom"


def test_candidates_are_complete_distinct_non_baseline_trials_best_first():
    def trial(number, value, state="COMPLETE", **attrs):
        attrs.setdefault("instruction_hash", f"h{number}")
        return SimpleNamespace(number=number, value=value, state=SimpleNamespace(name=state),
                               user_attrs={"operator": "op", **attrs})

    trials = [trial(0, 5.0, operator="baseline", instruction_hash="base"), trial(1, 6.0), trial(2, 7.0),
              trial(3, 7.0), trial(4, 9.0, state="PRUNED"), trial(5, 7.0, duplicate_of=2),
              trial(6, 8.0, instruction_hash="base")]
    assert [c.number for c in candidates(trials, "base")] == [2, 3, 1]
