"""An A/B test's design from its config: tasks, arms, pre-registration, paths, and the checks that refuse a test
that cannot answer its question (before anything is written).

Config -> design: the benchmark tasks (ab.split), ab.replications, the arms ab.a / ab.b (dotted keys or group
options applied with apply_overrides and type-checked against the schema), seed = cfg.seed. check_ab_design
refuses (one-line ConfigError) a pre-registered metric this evaluator does not produce (ab.metric) and a design
whose primary test cannot reach ab.alpha with the tasks it has (unless ab.allow_underpowered).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from omegaconf import OmegaConf

from experiments.config import (ConfigError, ExperimentConfig, Task, apply_overrides, load_tasks, to_harness_config,
                                validate)
from experiments.stats import (MAX_TASKS, Design, Preregistration, look_level, mde, min_attainable_p,
                               tasks_for_effect)

from ._cells import SECONDARY, ABDesign, RunArm, arm_order, pair_seed, prereg_path

_ENV_KEYS = {  # config keys the environment overrides after every override (harness.config.apply_env)
    "planner.skip_prior_knowledge": "HARNESS_SKIP_PRIOR_KNOWLEDGE",
    "research.reuse_cache": "RESEARCH_CACHE",
    "backend.kind": "HARNESS_BACKEND",
    "results_dir": "HARNESS_RESULTS_DIR",
}


@dataclass(frozen=True)
class ABPaths:
    dir: Path

    @property
    def ledger(self) -> Path:
        return self.dir / "ledger.jsonl"

    @property
    def prereg(self) -> Path:
        return prereg_path(self.ledger)

    @property
    def outputs(self) -> Path:
        return self.dir / "outputs"

    @property
    def summary(self) -> Path:
        return self.dir / "summary.md"


def ab_paths(exp: ExperimentConfig) -> ABPaths:
    return ABPaths(Path(exp.results_dir) / "ab" / exp.sweep.name)


def select_tasks(exp: ExperimentConfig) -> tuple[Task, ...]:
    tasks = load_tasks(exp.benchmark)
    chosen = tasks if exp.ab.split == "all" else tuple(t for t in tasks if t.split == exp.ab.split)
    if not chosen:
        raise ConfigError(f"ab.split={exp.ab.split!r} selects no task of benchmark {exp.benchmark.name!r}; "
                          "expected at least one")
    return chosen


def preregistration(exp: ExperimentConfig, n_tasks: int) -> Preregistration:
    ab = exp.ab
    return Preregistration(
        hypothesis=" ".join(ab.hypothesis.split()), metric=ab.metric, min_effect=float(ab.min_effect),
        alpha=float(ab.alpha), direction=ab.direction, n_tasks=n_tasks, replications=int(ab.replications),
        sequential=int(ab.looks) if ab.sequential else 0, test=ab.test, compare=ab.compare,
        min_preference=float(ab.min_preference),
    )


def deterministic_criteria() -> tuple[str, ...]:
    """The deterministic evaluator's criteria (the cells carry them as det_<name>)."""
    from evaluators import deterministic_scores

    return tuple(deterministic_scores("", task=""))


def ab_metrics(exp: ExperimentConfig) -> tuple[str, ...]:
    """The names ab.metric may pre-register with this evaluator: composite, the rubric dimensions (none when
    evaluator.composite is deterministic: no rubric runs), det_<criterion> and the A/B's secondary metrics."""
    rubric = () if exp.evaluator.composite == "deterministic" else tuple(exp.evaluator.dimensions)
    return ("composite", *rubric, *(f"det_{c}" for c in deterministic_criteria()), *SECONDARY)


REFERENCE_BENCHMARK = "benchmark=asyncio_practices has 24"  # the default benchmark (conf/benchmark)


def reachability_problem(n: int, *, test: str, sequential: bool, alpha: float, where: str = "",
                         also: Sequence[str] = (), pairwise: bool = False, looks: int = 1) -> str | None:
    """Why the A/B's primary test cannot reach alpha with n task pairs, or None when it can.

    The primary test is two-sided whatever the direction (experiments.stats); replications are averaged per task,
    so n counts tasks. Every test has the exact floor 2 / 2^n (min_attainable_p of the exact Wilcoxon): the
    Wilcoxon and a pairwise A/B's sign-flip test by construction, the A/B's paired t because its p is never below
    it (experiments.stats.paired_ttest(exact_floor=True): below it the t rests on a normal spread alone, and n
    equal differences gave p 0). A sequential design decides at each look on a t-based CI at the look's level,
    which must exceed the same floor; its largest level is the last look's (O'Brien-Fleming spending).
    """
    floor = min_attainable_p(n, test="wilcoxon", alternative="two-sided")  # exact: 2 / 2^n, whatever the test
    if sequential:
        level, at = look_level(max(1, looks), max(1, looks), alpha), "the last look's level"
    else:
        level, at = alpha, "alpha"
    if floor < level:
        return None
    what = ("exact two-sided sign-flip p (compare=pairwise)" if pairwise else "t-based sequential look's p" if sequential
            else "exact two-sided Wilcoxon p" if test == "wilcoxon" else "two-sided paired t p (never below the "
            "exact sign-flip floor 2/2^n)")
    need = n + 1
    while min_attainable_p(need, test="wilcoxon", alternative="two-sided") >= level:
        need += 1
    fixes = [f"use a benchmark with >= {need} tasks ({REFERENCE_BENCHMARK})", *also]
    fix = fixes[0] if len(fixes) == 1 else f"{', '.join(fixes[:-1])}, or {fixes[-1]}"
    pairs = f"{n} task pair{'s' if n != 1 else ''}{f' ({where})' if where else ''}"
    return (f"with {pairs} the smallest {what} is {floor:.4g} >= {at} {level:.4g}: 'supported' is unreachable; "
            f"{fix}")


def check_ab_design(exp: ExperimentConfig) -> None:
    """Refuse an A/B that cannot answer its question, before anything is written (one-line ConfigError).

    ab.metric must be a metric this evaluator produces (ab_metrics); the primary test must be able to reach
    ab.alpha with the tasks ab.split selects (reachability_problem), unless ab.allow_underpowered, in which case
    run_ab_from_config prints the same finding as a note.
    """
    ab = exp.ab
    allowed = ab_metrics(exp)
    if ab.metric not in allowed:
        why = (" (evaluator.composite=deterministic: no rubric runs, so no rubric dimension is scored)"
               if ab.metric in exp.evaluator.dimensions else "")
        raise ConfigError(f"ab.metric={ab.metric!r} is not allowed{why}; expected one of: {', '.join(allowed)}")
    n = len(select_tasks(exp))
    problem = reachability_problem(n, test=ab.test, sequential=ab.sequential, alpha=float(ab.alpha),
                                   where=f"benchmark {exp.benchmark.name!r}, ab.split={ab.split}",
                                   also=("ab.allow_underpowered=true",), pairwise=ab.compare == "pairwise",
                                   looks=int(ab.looks) if ab.sequential else 1)
    if problem and not ab.allow_underpowered:
        raise ConfigError(f"ab: {problem}")


def selection_note(arms: Mapping[str, Mapping[str, Any]], tasks: Sequence[Task], *, benchmark: str,
                   split: str) -> str | None:
    """The caveat a verdict carries when an arm runs the registry's champion (synth.source ...@champion) on tasks of
    the kind that chose it, or None.

    A promoting sweep chooses the champion on its benchmark's train tasks and promotes it only past a confirmation
    on its holdout tasks (experiments.sweep): on those tasks its edge is biased upward (a winner's curse on the
    train tasks, a gate it passed on the holdout ones), so a 'supported' there repeats the selection instead of
    confirming it. The registry does not say which benchmark chose it: the note counts this benchmark's tasks.
    """
    from harness.synthesis import CHAMPION, parse_source

    champions = []
    for arm, overrides in arms.items():
        source = overrides.get("synth.source")
        try:
            if isinstance(source, str) and parse_source(source).alias == CHAMPION:
                champions.append(f"{arm} ({source.strip()})")
        except ConfigError:  # not a prompt URI: arm_configs refuses it with the reason
            continue
    train = sum(1 for t in tasks if t.split == "train")
    holdout = sum(1 for t in tasks if t.split == "holdout")
    if not champions or not (train or holdout):
        return None
    used = [f"{n} {kind}" for n, kind in ((train, "train tasks, which chose it"),
                                          (holdout, "holdout tasks, which confirmed it")) if n]
    better = ("ab.split=holdout avoids the tasks that chose it, " if train and split != "holdout" else "")
    return (f"caveat: arm {' and arm '.join(champions)} was promoted by a sweep; if that sweep ran on benchmark "
            f"{benchmark!r}, {' and '.join(used)} are among the {len(tasks)} tasks here (ab.split={split}), so its "
            f"edge is biased upward and a 'supported' is not an independent confirmation; {better}tasks no sweep "
            f"saw (another benchmark) give one")


def design_from_config(exp: ExperimentConfig) -> tuple[ABDesign, Preregistration]:
    """The paired design (tasks, arms, replications, seed) and the pre-registration of an ab config."""
    tasks = select_tasks(exp)
    arms = {exp.ab.a_name: dict(exp.ab.a), exp.ab.b_name: dict(exp.ab.b)}
    design = ABDesign(tasks=tasks, arms=arms, replications=int(exp.ab.replications), seed=int(exp.seed))
    return design, preregistration(exp, len(tasks))


def _touches(overrides: Mapping[str, Any], section: str) -> bool:
    return any(k == section or k.startswith(section + ".") for k in overrides)


def _check_applied(arm: ExperimentConfig, name: str, overrides: Mapping[str, Any]) -> None:
    """Every scalar dotted override must show in the arm's config; the environment can silently undo one."""
    node = OmegaConf.structured(arm)
    for key, want in overrides.items():
        if "." not in key or isinstance(want, (Mapping, list)):
            continue
        got = OmegaConf.select(node, key)
        if got != want and not (isinstance(got, float) and isinstance(want, int) and got == float(want)):
            env = _ENV_KEYS.get(key)
            why = f" because the environment sets {env}={os.environ.get(env)!r}; unset it" if env and env in os.environ else ""
            raise ConfigError(f"arm {name}: {key}={want!r} did not take effect (the config has {got!r}){why}")


def arm_configs(exp: ExperimentConfig) -> dict[str, ExperimentConfig]:
    """Each arm's full experiment config: the base with the arm's overrides, then the A/B controls.

    Controls: memory frozen (sweep.freeze_memory), research cache off unless the arm sets research.* itself,
    outputs under results/ab/<name>/outputs. Raises ConfigError for a bad key or value (naming the arm), an
    override the environment undid, or two arms that resolve to the same harness config.
    """
    out: dict[str, ExperimentConfig] = {}
    outputs = str(ab_paths(exp).outputs)
    for name, key in ((exp.ab.a_name, "ab.a"), (exp.ab.b_name, "ab.b")):
        overrides = dict(getattr(exp.ab, key[-1]))
        try:
            arm = validate(apply_overrides(exp, overrides))
        except ConfigError as exc:
            raise ConfigError(f"{key} (arm {name}): {exc}") from exc
        _check_applied(arm, name, overrides)
        if exp.sweep.freeze_memory:
            arm.memory = dataclasses.replace(arm.memory, frozen=True)
        if not _touches(overrides, "research"):
            arm.research = dataclasses.replace(arm.research, reuse_cache=False)
        if not _touches(overrides, "output_dir"):
            arm.output_dir = outputs
        out[name] = arm
    (na, ea), (nb, eb) = out.items()
    ha, hb = (dataclasses.asdict(to_harness_config(e, environ={})) for e in (ea, eb))
    if ha == hb:
        raise ConfigError(f"ab.a={dict(exp.ab.a)!r} and ab.b={dict(exp.ab.b)!r} give the same harness config; "
                          "expected two arms that differ")
    return out


def power_note(prereg: Preregistration, n_tasks: int) -> str | None:
    """A warning when the pre-registered test cannot reach alpha with this many task pairs (see check_ab_design)."""
    return reachability_problem(n_tasks, test=prereg.test, sequential=prereg.sequential > 1, alpha=prereg.alpha,
                                pairwise=prereg.compare == "pairwise", looks=max(1, prereg.sequential))


def observed_power_line(stats: Any, prereg: Preregistration, *, power: float, target: float, sims: int) -> str | None:
    """The summary's design power, from this A/B's own per-task differences (their sd holds run noise over the
    replications and the task x variant spread together): the mean effect its rule ('supported': two-sided test
    at alpha in the right direction, the skew-calibrated p on that side below alpha / 2 AND mean >= min_effect)
    detects with probability `power`, that sd taken as an estimate on n - 1 df, and the tasks `target` would need
    at these replications. None below 3 pairs or with no spread measured. A sequential design is sized as one
    fixed-sample look (its last)."""
    n, sd = int(stats.n), float(stats.sd_diff)
    if n < 3 or not math.isfinite(sd) or sd <= 0:
        return None
    if min_attainable_p(n, test="wilcoxon", alternative="two-sided") >= prereg.alpha:  # the t's exact floor
        return (f"design power: this A/B detects no effect ({n} tasks: no two-sided p can go below 2/2^{n} = "
                f"{min_attainable_p(n):.4g} >= alpha {prereg.alpha:g})")
    design = Design("ab_observed", n, sd, prereg.alpha, "two-sided", prereg.test, 0.0, sigma_df=n - 1,
                    min_mean=prereg.min_effect, skew_side=True)
    m = mde(design, power=power, sims=sims)
    need = tasks_for_effect(dataclasses.replace(design, sigma_df=None), target, power=power, sims=sims)
    size = (f"a mean effect of {m:.3f}" if math.isfinite(m) else
            "no effect (its test cannot reach alpha on these tasks)")
    more = (f"an effect of {target:g} needs {need} tasks at these replications" if need is not None else
            f"an effect of {target:g} needs more than {MAX_TASKS} tasks" + (
                f" (or cannot be called 'supported' with probability {power:g}: the mean must reach min_effect "
                f"{prereg.min_effect:g})" if target <= prereg.min_effect else ""))
    return (f"design power: this A/B detects {size} with probability {power:g} ({n} tasks, two-sided "
            f"{prereg.test} at {prereg.alpha:g}, skew-calibrated p below {prereg.alpha / 2:g} and mean >= min_effect "
            f"{prereg.min_effect:g}; sd of the per-task differences {sd:.3f}, this A/B's own, run noise and task x variant spread together); {more}")


def objective_of(exp: ExperimentConfig, arms: Mapping[str, ExperimentConfig], design: ABDesign) -> dict[str, Any]:
    """What a score of this A/B means, pinned with its pre-registration (write_or_check_prereg): the benchmark's
    name with its tasks' ids and a hash of their content, and per arm the evaluator config (the judge's settings:
    rubric_weight, temperature, ...) and the hash of the harness config that decides the scores
    (experiments.config.study_fingerprint, the sweep's own; paths, server addresses and slots left out)."""
    from experiments.config import study_fingerprint

    prints = {name: study_fingerprint(arm, {}, design.tasks) for name, arm in arms.items()}
    first = next(iter(prints.values()))
    return {"benchmark": first["benchmark"],
            "arms": {name: {"evaluator": fp["evaluator"], "harness_config": fp["harness_config"]}
                     for name, fp in prints.items()}}


def cell_plan(design: ABDesign) -> list[tuple[str, str, int]]:
    """(task_id, arm, replication) in the order run_ab visits the cells."""
    out = []
    for tid in design.task_ids:
        for rep in range(design.replications):
            for arm in arm_order(design.arm_names, pair_seed(design.seed, tid, rep), design.randomise_order):
                out.append((tid, arm, rep))
    return out


def arm_backends(design: ABDesign, cells: Any, run_arm: RunArm | None,
                 roles: Any) -> dict[str, Any] | None:
    """{arm: {role: backend identity}} to register, or None when nothing will run on the harness (no check)."""
    from experiments.config import backend_identity

    if run_arm is not None:
        return {arm: backend_identity(roles) for arm in design.arm_names} if roles is not None else {}
    if cells is None:
        return None
    return {arm: backend_identity(cells.roles_for(arm)) for arm in design.arm_names}
