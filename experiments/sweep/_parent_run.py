"""The MLflow parent run's record of a concluded sweep: the metrics and tags its verdict rests on."""

from __future__ import annotations

from typing import Any

from experiments.promotion import HoldoutRow

from ._registry import holdout_test_words
from ._summary import SweepSummary, promoted_row


def verdict_row(s: SweepSummary) -> HoldoutRow | None:
    """The holdout row the sweep's verdict rests on: the promoted one (a standing winner's when it was carried
    forward); else, of the rows this look tested, the one closest to confirming (the smallest p); else, of the
    candidates the futility stop stopped on the holdout, the one with the largest difference so far (it reached the
    holdout and was stopped: the verdict rests on that); None when no candidate reached the holdout."""
    row = promoted_row(s) if s.promoted else None
    if row is not None:
        return row
    tested = [r for r in s.holdout if r.holdout_level is not None and r.holdout_p is not None]
    if tested:
        return min(tested, key=lambda r: r.holdout_p)
    stopped = [r for r in s.holdout if r.stopped_after is not None and r.holdout_diff is not None]
    return max(stopped, key=lambda r: r.holdout_diff, default=None)


def parent_record(s: SweepSummary, look: Any, *, calibrated: bool, calls_per_trial: float | None,
                  train_filter: str) -> tuple[dict[str, float], dict[str, str]]:
    """The MLflow parent run's metrics and tags: what the verdict rests on, each name saying its split. train_*:
    the baseline and the best candidate on the train split (train_best_p is the train filter's Wilcoxon, which
    only sweep.train_filter=wilcoxon uses; tag train_filter says which ran); train_noise_*: the noise floor, absent
    when nothing measured it (never 0). holdout_*: the verdict row (verdict_row): its difference, p, the level it
    had to reach (Holm's share of the look), the look's level, its tasks, and for a pairwise confirmation its mean
    preference; tags holdout_test (what the p is and claims), holdout_trial, holdout_look and design_power (the
    summary's lines). A candidate the futility stop stopped: its difference and tasks so far, holdout_stopped_after
    and holdout_futility_of, and holdout_test saying where it stopped (no p: the stop is not a test). A value not
    measured is left out."""
    metrics: dict[str, float | None] = {
        "train_baseline_mean": s.baseline_train, "train_best_mean": s.best_value,
        "holdout_baseline_mean": s.baseline_holdout, "noise_from_calibration": float(calibrated),
        "promoted": float(s.promoted), "llm_calls": s.llm_calls, "calls_per_trial": calls_per_trial,
        "selection_bias": s.selection_bias, **{f"trials_{k}": v for k, v in s.trials.items()}}
    if s.noise.repeats >= 2:
        metrics |= {"train_noise_floor": s.train_floor, "train_noise_sigma": s.noise.sigma}
    if s.best_comparison is not None and s.best_comparison.n:
        metrics |= {"train_best_diff": s.best_comparison.diff, "train_best_p": s.best_comparison.p_value}
    tags = {"train_filter": train_filter, "verdict": (f"promoted trial #{s.promoted_trial}" if s.promoted
                                                      else "baseline kept"),
            "holdout_look": s.holdout_look, "design_power": s.confirmable}
    if look is not None:
        metrics["holdout_look_level"] = look.level
    row = verdict_row(s)
    if row is not None:
        metrics |= {"holdout_diff": row.holdout_diff, "holdout_p": row.holdout_p, "holdout_level": row.holdout_level,
                    "holdout_n_tasks": float(row.holdout_n) if row.holdout_n else None,
                    "holdout_preference": row.preference, "holdout_wins": float(row.wins)}
        tags |= {"holdout_trial": str(row.trial), "holdout_test": holdout_test_words(row)}
        if row.stopped_after is not None:
            metrics |= {"holdout_stopped_after": float(row.stopped_after),
                        "holdout_futility_of": float(row.futility_of)}
            tags["holdout_test"] = (f"{row.futility_text}: not tested (the final test's conditional power had "
                                    f"fallen below the futility floor; no p)")
    return ({k: float(v) for k, v in metrics.items() if v is not None and v == v},
            {k: v for k, v in tags.items() if v})
