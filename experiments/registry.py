"""MLflow Prompt Registry for the synthesis instructions: one prompt per task type, `<prefix>-synth-<task_type>`.

prefix is mlflow.prompt_prefix, "harness" unless set: one lineage of champions whatever study found them, so
`synth.source=prompts:/harness@champion` keeps meaning "the last promoted instructions" across sweeps (each
version's tags name its study and fingerprint). Set another prefix for a separate lineage (another benchmark or
model family).

Write side, the sweep's two steps (SweepRegistry; neither raises, a registry that cannot be written is one line):
- study start: the baseline texts, registered idempotently (a text already stored is that version, not a new one);
- promotion: the texts the winner changed as versions tagged with the evidence (study, trial, operator, parent
  version, train and holdout means with CIs, p-values, backend and models, study fingerprint); alias `champion`
  moves to them and `previous` to the former champion (the baseline version at the first promotion), per task
  type only past a comparison with the champion: where the study's baseline text is the current champion's (or
  there is no champion yet). A task type the winner left unchanged moves nothing; a win over another text is
  registered with the reason (tag `champion_refused`, the summary's registry line) and moves nothing. Nothing
  else moves an alias, so a sweep that promotes nothing leaves both where they were.

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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from experiments.config import TASK_TYPES, ConfigError, ExperimentConfig
from harness.config import SynthConfig

CHAMPION, PREVIOUS = "champion", "previous"
PREFIX_RULE = re.compile(r"^[A-Za-z0-9_.-]+$")  # MLflow's prompt-name rule
_URI = re.compile(r"^prompts:/([A-Za-z0-9_.-]+)(?:@([A-Za-z0-9_.-]+)|/(\d+))$")
_TYPED = re.compile(rf"^(.+)-synth-({'|'.join(TASK_TYPES)})$")


def prompt_name(prefix: str, task_type: str) -> str:
    return f"{prefix}-synth-{task_type}"


# -- read side: synth.source -> instructions ------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """A parsed synth.source: one prompt (task_type set) or every task type under a prefix (task_type None)."""

    uri: str
    name: str  # the prompt's name, or the prefix
    task_type: str | None
    alias: str | None = None
    version: int | None = None


def parse_source(uri: str) -> Source:
    m = _URI.match(uri.strip())
    if m is None:
        raise ConfigError(f"synth.source={uri!r} is not a prompt URI; expected prompts:/<name>@<alias>, "
                          f"prompts:/<name>/<version> or prompts:/<prefix>@<alias>")
    name, alias, version = m.groups()
    typed = _TYPED.match(name)
    if typed is None and version is not None:
        raise ConfigError(f"synth.source={uri!r}: a version pins one prompt; expected prompts:/<prefix>-synth-"
                          f"<task_type>/<version> with task_type one of {', '.join(TASK_TYPES)}")
    return Source(uri.strip(), name, typed.group(2) if typed else None, alias, int(version) if version else None)


def resolve_synth(synth: SynthConfig, exp: ExperimentConfig) -> SynthConfig:
    """synth with the texts synth.source names in `instructions` and their pinned URIs in `resolved`."""
    src = parse_source(synth.source or "")
    uri = registry_uri(exp)
    db = _sqlite_file(uri)
    if db is not None and not db.exists():
        raise ConfigError(f"synth.source={src.uri}: no prompt registry at {uri} (no such file); a sweep with "
                          f"mlflow.enabled=true registers its prompts there")
    try:
        found = _lookup(_client(uri), src)
    except ConfigError:
        raise
    except Exception as exc:  # server down, unreadable file: the config cannot be built
        raise ConfigError(f"synth.source={src.uri}: cannot read the prompt registry at {uri}: {_why(exc)}") from exc
    return _with_texts(synth, found)


def _with_texts(synth: SynthConfig, found: Mapping[str, Any]) -> SynthConfig:
    """synth with these prompt versions' texts in `instructions` and their pinned URIs in `resolved`."""
    return dataclasses.replace(
        synth, instructions={**synth.instructions, **{tt: v.template for tt, v in found.items()}},
        resolved={tt: f"prompts:/{v.name}/{v.version}" for tt, v in sorted(found.items())})


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
    client = _client(registry_uri(exp))
    found = {tt: _lookup(client, parse_source(uri))[tt] for tt, uri in stored["resolved"].items()}

    def short(resolved: Mapping[str, str]) -> str:  # prompts:/<name>/<version> -> <name> v<version>
        return ", ".join(" v".join(uri[len("prompts:/"):].rsplit("/", 1)) for uri in resolved.values())

    return dataclasses.replace(exp, synth=_with_texts(exp.synth, found)), (
        f"synth.source={exp.synth.source} now resolves to {short(exp.synth.resolved)}; this study started from "
        f"{short(stored['resolved'])} and continues with those (a new sweep.name starts from the new ones)")


def _lookup(client: Any, src: Source) -> dict[str, Any]:
    if src.task_type is not None:
        if client.get_prompt(src.name) is None:
            raise ConfigError(f"synth.source={src.uri}: no prompt named {src.name!r}; registered synthesis prompts: "
                              f"{_known(client)}")
        got = _version(client, src.name, src.alias, src.version)
        if got is None:
            what = f"alias {src.alias!r}" if src.alias else f"version {src.version}"
            raise ConfigError(f"synth.source={src.uri}: prompt {src.name!r} has no {what}; "
                              f"{_inventory(client, src.name)}")
        return {src.task_type: got}
    names = {tt: prompt_name(src.name, tt) for tt in TASK_TYPES}
    names = {tt: n for tt, n in names.items() if client.get_prompt(n) is not None}
    if not names:
        raise ConfigError(f"synth.source={src.uri}: no prompt {src.name}-synth-<task_type> is registered; registered "
                          f"synthesis prompts: {_known(client)}")
    found = {tt: v for tt, n in names.items() if (v := _version(client, n, src.alias, None)) is not None}
    if not found:
        raise ConfigError(f"synth.source={src.uri}: none of {', '.join(names.values())} has alias {src.alias!r}; "
                          + "; ".join(f"{n}: {_inventory(client, n)}" for n in names.values()))
    return found


def _version(client: Any, name: str, alias: str | None, version: int | None) -> Any:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_prompt_version_by_alias(name, alias) if alias else client.get_prompt_version(name, version)
    except MlflowException:
        return None


def _versions(client: Any, name: str) -> list[Any]:
    out, token = [], None
    while True:
        page = client.search_prompt_versions(name, max_results=1000, page_token=token)
        out.extend(page)
        token = getattr(page, "token", None)
        if not token:
            return sorted(out, key=lambda v: int(v.version))


def _inventory(client: Any, name: str) -> str:
    versions = [int(v.version) for v in _versions(client, name)]
    aliases = sorted((a, v) for v in versions for a in client.get_prompt_version(name, v).aliases)
    return (f"versions: {', '.join(map(str, versions)) or '(none)'}; aliases: "
            f"{', '.join(f'{a} -> v{v}' for a, v in aliases) or '(none)'}")


def _known(client: Any) -> str:
    names = sorted(p.name for p in client.search_prompts(filter_string="name LIKE '%-synth-%'"))
    return ", ".join(names) or "(none)"


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
    holdout_p: float | None  # the holdout test's one-sided p (HoldoutRow.holdout_p; a Wilcoxon over the holdout
    # tasks when the rule gave none)
    backend: Mapping[str, Any]  # the runner's identity: role -> backend, model, file, ...
    fingerprint: Mapping[str, Any]  # the study's pinned objective fingerprint
    holdout_test: str = ""  # what the holdout p answers (experiments.promotion: over tasks, at the look's level)
    cost: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # metric -> experiments.cost.CostDiff (holdout)
    cost_guard: str = ""  # the cost guard's verdict on it (experiments.cost.GuardResult.reason)

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
        for m, d in self.cost.items():  # holdout cost vs the baseline per task, paired over tasks (issue 34)
            tags |= {f"cost_diff.{m}": _num(d.diff), f"cost_diff.{m}_ci": _ci(d.ci), f"cost_ratio.{m}": _num(d.ratio)}
        if self.cost_guard:
            tags["cost_guard"] = self.cost_guard
        return tags


def sweep_evidence(study: Any, trial: Any, row: Any, ref: Mapping[str, float], backend: Mapping[str, Any]) -> Evidence:
    """Evidence for a promoted trial (FrozenTrial) and its HoldoutRow, from what the study stored."""
    from experiments.promotion import split_scores
    from experiments.stats import compare
    from experiments.study import stored_holdout

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
        f"{row.holdout_rule or 'none'}: one-sided paired t over {row.holdout_n} holdout tasks at level "
        f"{_num(row.holdout_level)} (this look's share of the study's alpha)" if row.holdout_rule == "tasks"
        else f"{row.holdout_rule or 'none'} (fixed-task statement)",
        dict(getattr(row, "cost_diffs", {}) or {}), getattr(getattr(row, "cost", None), "reason", ""))


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
            client = _client(self.uri)
            with _lock(self.uri):  # two workers starting one study register one version per text
                self._baseline(client, baseline, fingerprint)
        except Exception as exc:  # the sweep goes on; conclude() tries again and the summary says what happened
            return f"registry: baseline not registered at {self.uri}: {_why(exc)}"
        return None

    def conclude(self, baseline: Mapping[str, str], winner: Mapping[str, str], evidence: Evidence | None) -> str:
        """The summary's registry line: the winner registered and aliased, or what was not registered and why."""
        what = f"trial #{evidence.trial}'s instructions" if evidence else "the baseline instructions"
        if not self.uri:
            return f"{what} not registered (mlflow.enabled=false); promoted_synth.yaml has them"
        try:
            client = _client(self.uri)
            with _lock(self.uri):  # two workers concluding one study read and move the aliases one at a time
                parents = self._baseline(client, baseline, evidence.fingerprint if evidence else {})
                if evidence is None:
                    return (f"baseline {_listing(self.prefix, parents)}; no alias moved (nothing promoted)")
                return self._promote(client, winner, parents, evidence, baseline)
        except Exception as exc:
            return f"NOT registered: {what} at {self.uri}: {_why(exc)}; promoted_synth.yaml has them"

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
        if not changed:
            return f"baseline {_listing(self.prefix, parents)}; no alias moved (the winner changed no instruction)"
        champions = {tt: _version(client, prompt_name(self.prefix, tt), CHAMPION, None) for tt in changed}
        refused = {tt: (f"this study compared against v{parents.get(tt, '?')} (its baseline), not the champion "
                        f"v{old.version}")
                   for tt, old in champions.items()
                   if old is not None and str(old.template).strip() != str(baseline.get(tt, "")).strip()}
        tags = ev.tags()
        msg = (f"study {ev.study} trial #{ev.trial} ({ev.operator}): holdout {_num(ev.holdout.mean)} vs baseline "
               f"{_num(ev.holdout.baseline_mean)}, train p={_num(ev.train_p)}")
        got = register_texts(client, self.prefix, changed, message=msg,
                             tags=lambda tt: {**tags, "parent_version": str(parents.get(tt, "")),
                                              **({"champion_refused": refused[tt]} if tt in refused else {})})
        moved, kept = [], []
        for tt, (v, _) in sorted(got.items()):
            name, old = prompt_name(self.prefix, tt), champions[tt]
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
        same = [int(v.version) for v in (_versions(client, name) if client.get_prompt(name) else [])
                if str(v.template).strip() == text]
        if same:
            out[tt] = (max(same), False)
            continue
        out[tt] = (int(client.register_prompt(name, text, commit_message=message, tags=tags(tt)).version), True)
    return out


# -- plumbing -------------------------------------------------------------------------------------------


def registry_uri(exp: ExperimentConfig) -> str:
    """The registry lives in the tracking store: experiments.tracking.tracking_uri."""
    from experiments.tracking import tracking_uri

    return tracking_uri(exp)


def _sqlite_file(uri: str) -> Path | None:
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def _client(uri: str) -> Any:
    from mlflow import MlflowClient

    from experiments.tracking import enable_wal, sqlite_db, store_lock

    db = sqlite_db(uri)
    with store_lock(db):  # a SQLite store's tables are created once, on a WAL database (as the tracker does)
        if db is not None:
            enable_wal(db)
        return MlflowClient(tracking_uri=uri)


def _lock(uri: str) -> Any:
    from experiments.tracking import sqlite_db, store_lock

    return store_lock(sqlite_db(uri))


def _listing(prefix: str, versions: Mapping[str, int]) -> str:
    return ", ".join(f"{prompt_name(prefix, tt)} v{v}" for tt, v in sorted(versions.items()))


def _digest(obj: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16] if obj else ""


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.4g}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def _why(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")
