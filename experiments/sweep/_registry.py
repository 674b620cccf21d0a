"""MLflow Prompt Registry for the synthesis instructions: one prompt per task type, `<prefix>-synth-<task_type>`.

prefix is mlflow.prompt_prefix, "harness" unless set: one lineage of champions whatever study found them, so
`synth.source=prompts:/harness@champion` keeps meaning "the last promoted instructions" across sweeps (each
version's tags name its study and fingerprint). Set another prefix for a separate lineage (another benchmark or
model family).

Write side, the sweep's two steps (SweepRegistry; neither raises, a registry that cannot be written is one line):
- study start: the baseline texts, registered idempotently (a text already stored is that version, not a new one);
- promotion: the texts the winner changed as versions tagged with the evidence (study, trial, operator, parent
  version, train and holdout means with CIs, p-values, what the holdout test was and claims (holdout_test: the
  paired t over tasks with its skew-calibrated twin, or the sign-flip over judge preferences), backend and models,
  study fingerprint); alias
  `champion` moves to them and `previous` to the former champion (the baseline version at the first promotion),
  per task type only past a comparison with the champion: where the study's baseline text is the current
  champion's (or there is no champion yet). A task type the winner left unchanged moves nothing; a win over
  another text is registered with the reason (tag `champion_refused`, the summary's registry line) and moves
  nothing; a changed type whose own holdout tasks showed harm (experiments.promotion.HoldoutRow.held_types)
  is registered with tag `champion_held` and moves nothing. Nothing else moves an alias, so a sweep that promotes
  nothing leaves both where they were; a resumed study that keeps its standing winner finds it already champion.

Read side, synth.source (resolve_synth, called when experiments.config builds the config):
  prompts:/<prefix>-synth-<task_type>@<alias>    one task type at an alias
  prompts:/<prefix>-synth-<task_type>/<version>  one task type, pinned
  prompts:/<prefix>@<alias>                      every task type whose <prefix>-synth-<type> has that alias
The texts fill synth.instructions; synth.resolved keeps task_type -> prompts:/<name>/<version> for the run record.
An unknown prompt, alias or version is a one-line ConfigError naming the versions and aliases that exist.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping

from experiments.config import ExperimentConfig, registry_uri
from harness.synthesis import (
    CHAMPION, PREVIOUS, lookup_source, parse_source, prompt_name, prompt_version, prompt_versions, registry_client,
    short_reason, with_texts,
)

# -- read side: synth.source -> instructions ------------------------------------------------------------


def pin_source(study: Any, exp: ExperimentConfig) -> tuple[ExperimentConfig, str | None]:
    """A study keeps the prompt versions its synth.source first resolved to: stored on a new study; on a resume
    with the same source after its alias moved (e.g. this study promoted), exp with the stored versions' texts and
    a one-line note. Another source string is left to the fingerprint check."""
    if not exp.synth.source:
        return exp, None
    stored = study.user_attrs.get("synth_source")
    if stored is None:
        study.set_user_attr("synth_source", {"source": exp.synth.source, "resolved": dict(exp.synth.resolved)})
        return exp, None
    if stored["source"] != exp.synth.source or stored["resolved"] == exp.synth.resolved:
        return exp, None
    client = registry_client(registry_uri(exp))
    found = {tt: lookup_source(client, parse_source(uri))[tt] for tt, uri in stored["resolved"].items()}

    def short(resolved: Mapping[str, str]) -> str:  # prompts:/<name>/<version> -> <name> v<version>
        return ", ".join(" v".join(uri[len("prompts:/"):].rsplit("/", 1)) for uri in resolved.values())

    return dataclasses.replace(exp, synth=with_texts(exp.synth, found)), (
        f"synth.source={exp.synth.source} now resolves to {short(exp.synth.resolved)}; this study started from "
        f"{short(stored['resolved'])} and continues with those (a new sweep.name starts from the new ones)")


# -- write side: the sweep's baseline and promotion -----------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """Why a candidate was promoted; the tags of the versions it becomes."""

    study: str
    trial: int
    operator: str
    candidate_hash: str
    train: Any  # experiments.promotion.SplitScores against the baseline reference
    holdout: Any
    train_p: float | None  # one-sided paired Wilcoxon over the train tasks (the promotion test)
    holdout_p: float | None  # the holdout test's one-sided p (HoldoutRow.holdout_p: the paired t's, or the
    # sign-flip's over preferences; a Wilcoxon over the holdout tasks when the rule gave none)
    backend: Mapping[str, Any]  # the runner's identity: role -> backend, model, file, ...
    fingerprint: Mapping[str, Any]  # the study's pinned objective fingerprint
    holdout_test: str = ""  # what the holdout p answers (experiments.promotion: over tasks, at the look's level)
    cost: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # metric -> experiments.stats.CostDiff (holdout)
    cost_guard: str = ""  # the cost guard's verdict on it (experiments.stats.GuardResult.reason)
    held: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)  # task type -> (the winner's text,
    # why its alias is held back: its own holdout tasks showed harm; experiments.promotion.HoldoutRow.held_types)
    holdout_preference: float | None = None  # sweep.holdout_compare=pairwise: the mean preference the p tests

    def tags(self) -> dict[str, str]:
        roles = sorted(self.backend)
        tags = {"study": self.study, "trial": str(self.trial), "operator": self.operator,
                "candidate_hash": self.candidate_hash,
                "backend": ",".join(sorted({str(self.backend[r].get("backend")) for r in roles})),
                "models": " ".join(f"{r}={self.backend[r].get('model')}" for r in roles),
                "study_fingerprint": _digest(self.fingerprint),
                "fingerprint_json": json.dumps(self.fingerprint, sort_keys=True, default=str),
                "train_p_value": _num(self.train_p), "holdout_p_value": _num(self.holdout_p),
                # the train p is a filter's: the best of the candidates compared, not corrected for that choice
                "train_p_value_kind": "filter (uncorrected for the number of candidates compared)",
                "holdout_test": self.holdout_test}
        for sc in (self.train, self.holdout):
            tags |= {f"{sc.split}_n": str(sc.n), f"{sc.split}_mean": _num(sc.mean), f"{sc.split}_ci": _ci(sc.ci),
                     f"{sc.split}_baseline_mean": _num(sc.baseline_mean), f"{sc.split}_diff": _num(sc.diff),
                     f"{sc.split}_diff_ci": _ci(sc.diff_ci)}
        for m, d in self.cost.items():  # holdout cost vs the baseline per task, paired over tasks
            tags |= {f"cost_diff.{m}": _num(d.diff), f"cost_diff.{m}_ci": _ci(d.ci), f"cost_ratio.{m}": _num(d.ratio)}
        if self.cost_guard:
            tags["cost_guard"] = self.cost_guard
        if self.holdout_preference is not None:
            tags["holdout_preference"] = _num(self.holdout_preference)
        return tags


def sweep_evidence(study: Any, trial: Any, row: Any, ref: Mapping[str, float], backend: Mapping[str, Any]) -> Evidence:
    """Evidence for a promoted trial (FrozenTrial) and its HoldoutRow, from what the study stored."""
    from experiments.promotion import split_scores
    from experiments.stats import compare

    from ._study import stored_holdout

    h = trial.user_attrs.get("instruction_hash", "")
    cand, base = (getattr(stored_holdout(study.user_attrs, k), "scores", None)
                  for k in (h, study.user_attrs.get("baseline_hash")))
    return Evidence(
        study.study_name, trial.number, trial.user_attrs.get("operator", "?"), h,
        split_scores("train", trial.user_attrs.get("task_scores"), ref), split_scores("holdout", cand, base),
        row.train.p_value if row.train is not None else None,
        row.holdout_p if row.holdout_p is not None
        else compare(cand, base, floor=0.0, alpha=1.0).p_value if cand and base else None,
        dict(backend), dict(study.user_attrs.get("fingerprint", {})),
        holdout_test_words(row),
        dict(getattr(row, "cost_diffs", {}) or {}), getattr(getattr(row, "cost", None), "reason", ""),
        {tt: (str(trial.user_attrs.get("instructions", {}).get(tt, "")), why)
         for tt, why in dict(getattr(row, "held_types", {}) or {}).items()},
        row.preference)


def holdout_test_words(row: Any) -> str:
    """What a holdout row's confirmation rests on and claims (HoldoutRow): the registry's holdout_test tag and the
    MLflow parent run's. A pairwise row (sweep.holdout_compare=pairwise) was confirmed by the exact sign-flip test
    over the tasks' mean judge preferences, which claims 'preferred on more tasks', not a higher mean score."""
    rule, level = row.holdout_rule or "none", _num(row.holdout_level)
    if rule != "tasks":
        return f"{rule} (fixed-task statement)"
    if row.preference is not None:
        return (f"{rule}: one-sided exact sign-flip test over the mean judge preferences of {row.holdout_n} holdout "
                f"tasks (sweep.holdout_compare=pairwise: each answer judged against the baseline's side by side, in "
                f"both orders; mean preference {row.preference:+.3f}) at level {level} (this look's share of the "
                f"study's alpha); it claims the answers are preferred on more tasks like these, not a higher mean "
                f"score")
    return (f"{rule}: one-sided paired t over {row.holdout_n} holdout tasks with its skew-calibrated twin (p the "
            f"larger of the two, so a left-skewed spread holds the level) at level {level} (this look's share of the "
            f"study's alpha)")


class SweepRegistry:
    """The sweep's registry steps: register_baseline at study start, conclude at the end. Neither raises."""

    def __init__(self, exp: ExperimentConfig, backend: Mapping[str, Any]) -> None:
        self.exp, self.backend = exp, dict(backend)
        self.prefix = exp.mlflow.prompt_prefix
        self.uri = registry_uri(exp) if exp.mlflow.enabled else ""

    def register_baseline(self, baseline: Mapping[str, str], fingerprint: Mapping[str, Any]) -> str | None:
        """The baseline texts (idempotent); a warning line when the registry cannot be written."""
        if not self.uri:
            return None
        try:
            client = registry_client(self.uri)
            with _lock(self.uri):  # two workers starting one study register one version per text
                self._baseline(client, baseline, fingerprint)
        except Exception as exc:  # the sweep goes on; conclude() tries again and the summary says what happened
            return f"registry: baseline not registered at {self.uri}: {short_reason(exc)}"
        return None

    def conclude(self, baseline: Mapping[str, str], winner: Mapping[str, str], evidence: Evidence | None) -> str:
        """The summary's registry line: the winner registered and aliased, or what was not registered and why."""
        what = f"trial #{evidence.trial}'s instructions" if evidence else "the baseline instructions"
        if not self.uri:
            return f"{what} not registered (mlflow.enabled=false); promoted_synth.yaml has them"
        try:
            client = registry_client(self.uri)
            with _lock(self.uri):  # two workers concluding one study read and move the aliases one at a time
                parents = self._baseline(client, baseline, evidence.fingerprint if evidence else {})
                if evidence is None:
                    return (f"baseline {_listing(self.prefix, parents)}; no alias moved (nothing promoted)")
                return self._promote(client, winner, parents, evidence, baseline)
        except Exception as exc:
            return f"NOT registered: {what} at {self.uri}: {short_reason(exc)}; promoted_synth.yaml has them"

    def _baseline(self, client: Any, baseline: Mapping[str, str], fingerprint: Mapping[str, Any]) -> dict[str, int]:
        tags = {"study": self.exp.sweep.name, "role": "baseline", "study_fingerprint": _digest(fingerprint)}
        got = register_texts(client, self.prefix, baseline, message=f"baseline of study {self.exp.sweep.name}",
                             tags=lambda tt: tags)
        return {tt: v for tt, (v, _) in got.items()}

    def _promote(self, client: Any, winner: Mapping[str, str], parents: Mapping[str, int], ev: Evidence,
                 baseline: Mapping[str, str]) -> str:
        """Register the texts the winner changed and move `champion` to them where the study compared against the
        champion: per task type, the study's baseline text is the current champion's (or there is none yet). A task
        type the winner left unchanged moves nothing; one compared against another text is registered (tag
        `champion_refused` says why) and the alias stays."""
        changed = {tt: text for tt, text in winner.items() if text.strip() != str(baseline.get(tt, "")).strip()}
        held = {tt: (text, why) for tt, (text, why) in ev.held.items() if text.strip()}
        changed |= {tt: text for tt, (text, _) in held.items()}  # registered as evidence; the alias stays
        if not changed:
            return f"baseline {_listing(self.prefix, parents)}; no alias moved (the winner changed no instruction)"
        champions = {tt: prompt_version(client, prompt_name(self.prefix, tt), CHAMPION, None) for tt in changed}
        refused = {tt: (f"this study compared against v{parents.get(tt, '?')} (its baseline), not the champion "
                        f"v{old.version}")
                   for tt, old in champions.items()
                   if old is not None and str(old.template).strip() != str(baseline.get(tt, "")).strip()
                   and str(old.template).strip() != changed[tt].strip()}  # already champion (a standing winner)
        tags = ev.tags()
        msg = (f"study {ev.study} trial #{ev.trial} ({ev.operator}): holdout {_num(ev.holdout.mean)} vs baseline "
               f"{_num(ev.holdout.baseline_mean)}, train p={_num(ev.train_p)}")
        got = register_texts(client, self.prefix, changed, message=msg,
                             tags=lambda tt: {**tags, "parent_version": str(parents.get(tt, "")),
                                              **({"champion_refused": refused[tt]} if tt in refused else {}),
                                              **({"champion_held": held[tt][1]} if tt in held else {})})
        moved, kept = [], []
        for tt, (v, _) in sorted(got.items()):
            name, old = prompt_name(self.prefix, tt), champions[tt]
            if tt in held:  # a pooled win that hurt this type's own holdout tasks moves nothing for it
                stays = f"v{old.version}" if old is not None else "unset"
                kept.append(f"{name} v{v} registered, champion stays {stays}: held back: {held[tt][1]}")
                continue
            if tt in refused:  # a win over another text says nothing about this one
                kept.append(f"{name} v{v} registered, champion stays v{old.version}: {refused[tt]}")
                continue
            old_v = int(old.version) if old is not None else parents.get(tt, v)
            if old is not None and old_v == v:
                moved.append(f"{name} v{v} (already champion)")
                continue
            client.set_prompt_alias(name, PREVIOUS, old_v)  # first: a failure in between leaves champion as it was
            client.set_prompt_alias(name, CHAMPION, v)
            moved.append(f"{name} v{v} (previous v{old_v})")
        unchanged = sorted(set(winner) - set(changed))
        parts = ([f"champion -> {', '.join(moved)}"] if moved else []) + kept
        if unchanged:
            parts.append(f"unchanged, alias not moved: {', '.join(prompt_name(self.prefix, tt) for tt in unchanged)}")
        if not moved:
            parts.append(f"no alias moved; to promote over the champion run from synth.source=prompts:/"
                         f"{self.prefix}@{CHAMPION}")
            return "; ".join(parts)
        return "; ".join(parts) + f"; run it with synth.source=prompts:/{self.prefix}@{CHAMPION}"


def register_texts(client: Any, prefix: str, instructions: Mapping[str, str], *, message: str,
                   tags: Any) -> dict[str, tuple[int, bool]]:
    """task_type -> (version, created). A text already stored under the prompt is that version (tags untouched);
    a new text is a new version with tags(task_type)."""
    out: dict[str, tuple[int, bool]] = {}
    for tt, text in sorted(instructions.items()):
        name, text = prompt_name(prefix, tt), text.strip()
        same = [int(v.version) for v in (prompt_versions(client, name) if client.get_prompt(name) else [])
                if str(v.template).strip() == text]
        if same:
            out[tt] = (max(same), False)
            continue
        out[tt] = (int(client.register_prompt(name, text, commit_message=message, tags=tags(tt)).version), True)
    return out


# -- plumbing -------------------------------------------------------------------------------------------


def _lock(uri: str) -> Any:
    from harness.stores import sqlite_db, store_lock

    return store_lock(sqlite_db(uri))


def _listing(prefix: str, versions: Mapping[str, int]) -> str:
    return ", ".join(f"{prompt_name(prefix, tt)} v{v}" for tt, v in sorted(versions.items()))


def _digest(obj: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16] if obj else ""


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.4g}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f"[{ci[0]:.4g}, {ci[1]:.4g}]"


