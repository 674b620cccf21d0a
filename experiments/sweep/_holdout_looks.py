"""The holdout looks of a study and of every other study in its storage that shares a holdout task with it: where
they are stored, the level of the next look, and which studies overlap (the error budget the conclusion spends:
experiments.stats.next_look)."""

from __future__ import annotations

from typing import Any, Mapping

from experiments.config import ExperimentConfig

HOLDOUT_SET_ATTR = "holdout_set"  # a study's holdout tasks' fingerprint (experiments.config.holdout_set)
LOOKS_ATTR = "holdout_looks"  # a study's holdout looks (experiments.stats.Look entries: the error budget)
NEXT_FAMILY = "(the next candidates)"  # a family no stored look has: the level of a new look


def first_level(exp: ExperimentConfig) -> float:
    """The level of a new study's first holdout look (no look stored here or by another study):
    experiments.stats.first_level of sweep.alpha, the level the futility stop and the sizing take too."""
    from experiments.stats import first_level as level_of_first_look

    return level_of_first_look(exp.sweep.alpha)


def next_level(exp: ExperimentConfig, study: Any) -> float:
    """The level the study's next new holdout look tests at: its own stored looks and those of every other study
    in the storage whose holdout shares a task with this one (other_looks), as the conclusion counts them
    (experiments.stats.next_look). What the preflight prints: counting this study's looks only would print, for a
    new study on a used holdout set, the power of a level it would not test at."""
    from experiments.config import holdout_set, load_tasks
    from experiments.stats import next_look

    others = other_looks(exp.storage_url, study.study_name, holdout_set(load_tasks(exp.benchmark)))
    return next_look(list(study.user_attrs.get(LOOKS_ATTR, [])), (NEXT_FAMILY,), exp.sweep.alpha, others).level


def other_looks(storage_url: str, study_name: str, key: Mapping[str, Any]) -> list[dict]:
    """The looks (LOOKS_ATTR entries) other studies in the storage made on a holdout that
    overlaps `key` (experiments.config.holdout_set of this study's tasks: holdout_overlaps)."""
    import optuna

    out: list[dict] = []
    for other in optuna.get_all_study_summaries(storage_url, include_best_trial=False):
        if other.study_name != study_name and holdout_overlaps(other.user_attrs, key):
            out += [dict(e) for e in other.user_attrs.get(LOOKS_ATTR, [])]
    return out


def holdout_overlaps(attrs: Mapping[str, Any], key: Mapping[str, Any]) -> bool:
    """Whether a study's user attrs say its holdout shares a task with the holdout set `key`: one task in common by
    id and content (holdout_set's "tasks"), not only the same set (by the set alone, moving 4 tasks between the
    splits would make a new set, and a fresh budget, of 12 holdout tasks 8 of which had been looked at). A study
    stored before the per-task keys existed counts when a holdout task id is in common (its contents were not
    stored: never fewer looks); one stored before the holdout set was, by its fingerprint's holdout task ids."""
    stored = attrs.get(HOLDOUT_SET_ATTR)
    if isinstance(stored, Mapping):
        if stored.get("sha256") and stored.get("sha256") == key.get("sha256"):
            return True
        if stored.get("tasks") and key.get("tasks"):
            return bool(set(map(str, stored["tasks"])) & set(map(str, key["tasks"])))
        ids = list(stored.get("ids") or [])
    else:
        fp = attrs.get("fingerprint") or {}
        ids = [i for i in (fp.get("benchmark", {}) if isinstance(fp, Mapping) else {}).get("ids") or []
               if str(i).endswith(":holdout")]
    return bool(set(map(str, ids)) & set(map(str, key.get("ids", []))))
