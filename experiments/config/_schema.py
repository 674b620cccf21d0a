"""Structured experiment configuration: the schema Hydra validates conf/*.yaml against.

`ExperimentConfig` extends harness.config.HarnessConfig (every harness node, inherited) with the experiment
nodes (benchmark, sweep, ab, calibrate, mlflow). DictConfig stops at ._convert: `to_experiment` turns a composed
config into plain dataclasses, `to_harness_config` hands the harness its part.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from harness.compose import compose_hydra
from harness.config import HarnessConfig, MLflowConfig

SPLITS = ("train", "holdout")
SWEEP_KINDS = ("single", "synth_mutation", "ab", "calibrate", "import_tasks", "generate_tasks")
TASK_KINDS = ("import_tasks", "generate_tasks")  # experiments.tasks: write a benchmark, run nothing on it
# no "median": MedianPruner compares a trial's best task so far with other trials at the same step, and the
# steps are task ids (WilcoxonPruner's contract), evaluated in a shuffled order: the comparison would mean nothing.
PRUNERS = ("wilcoxon", "none")
SAMPLERS = ("tpe", "random")
DEFAULT_OPERATORS = ("opro", "reflect", "crossover", "add_constraint", "drop_sentence", "reorder")


@dataclass
class TaskSpec:
    id: str = "???"
    task: str = "???"
    task_type: str = "research"
    expected_count: int | None = None
    required_terms: list[str] = field(default_factory=list)
    split: str = "train"
    # where the task came from (experiments.tasks: the imported file and row, or the generator model, prompt
    # version and seed); not part of the task (experiments.config.Task) and so not of the fingerprint
    provenance: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchmarkConfig:
    name: str = "smoke"
    description: str = ""
    tasks: list[TaskSpec] = field(default_factory=list)


@dataclass
class SweepConfig:
    kind: str = "single"  # single | synth_mutation | ab
    name: str = "single"  # study name, MLflow experiment, results/<name>/
    n_trials: int = 12  # total for the study, baseline trial included (resume continues to this count)
    timeout_s: float | None = None  # wall-clock limit for this invocation
    max_llm_calls: int | None = None  # uncached LLM calls allowed in this invocation
    storage: str | None = None  # any Optuna RDB URL; default sqlite:///<results_dir>/optuna.db
    sampler: str = "tpe"  # tpe | random
    pruner: str = "wilcoxon"  # wilcoxon | none
    pruner_p: float = 0.1  # WilcoxonPruner p_threshold
    pruner_startup_steps: int = 2
    pruner_correction: str = "none"  # none | pocock: p per look that keeps pruner_p over one trial's repeated looks
    parent_selection: str = "best"  # best (best train mean) | pareto (per-task front, drawn by tasks led)
    # joint: a candidate is judged whole (one mean over every task type); per_type: each task type's instruction is
    # accepted on its own type's tasks, the parent composes the best text of each type, racing, the gate and the
    # pruner are off (a child runs every train task), and the last trial runs that composition afresh for the holdout; round_robin:
    # per_type with one task type edited a trial, in turn (GEPA's round robin over components): the other types'
    # texts run again with it, so each kept text is measured anew by the trials that edit the others
    search: str = "joint"
    # what reflection reads: worst (the judge's words on the parent's 3 worst tasks) | all (every task of the type,
    # the same words counted, and the edits already tried from this parent that did not help) | counted (all
    # without the edits already tried)
    reflect_feedback: str = "worst"
    # per_type and round_robin: how a type's text is chosen for the parent and the composition: pooled (the mean of
    # every run of the text) | edits (experiments/search/_edit_model.py: each trial's mean read as the sum of its
    # sentences' effects, fitted over every trial and shrunk, so a lucky edit falls back as its descendants run)
    estimate: str = "pooled"
    # reflect_feedback all: an edit already tried from the parent is listed as turned down only when its mean was
    # below the parent's by more than rejected_z standard errors of a difference (0: any edit that did not beat it)
    rejected_z: float = 0.0
    operator_choice: str = "tpe"  # tpe (on the operator asked for) | bandit (Thompson on the operator used)
    gate_tasks: int = 0  # minibatch gate: train tasks a new candidate runs first (0 = off; off on a smaller train split)
    gate_z: float = 1.0  # gate out when mean(child - parent) + gate_z * sigma * sqrt(2 / gate_tasks) < 0
    # racing: a proposal runs its train tasks in blocks of race_block tasks, or of a quarter of
    # the train split when that is larger (experiments.stats.look_block), and is raced out after a block (not the
    # last) when mean(child - leader) + race_z * sd / sqrt(m) < 0 over its m tasks so far (sd of those differences;
    # the leader: the best complete train mean). > 0 replaces the gate (gate_tasks unused); 0 = off
    race_block: int = 0
    race_z: float = 1.0
    max_merges: int = 0  # merges of two front candidates over a common ancestor, after a trial beat its parent
    operators: list[str] = field(default_factory=lambda: list(DEFAULT_OPERATORS))
    mutate_task_types: list[str] = field(default_factory=list)  # empty: every task_type in the train split
    max_chars: int = 1200  # instruction length bound passed to mutators
    baseline_repeats: int = 3  # r: baseline runs (different seeds) that measure the noise floor
    alpha: float = 0.05  # paired Wilcoxon (one-sided, over tasks) significance level
    allow_underpowered: bool = False  # run a design whose test cannot reach alpha (a first look; it can never promote)
    race_top: int = 0  # final race: the top race_top candidates run once more on the train split before the holdout
    holdout_top_k: int = 2
    # tasks (paired t over holdout tasks with its skew-calibrated twin, Holm) | bound | floor (fixed-task: never promote)
    holdout_test: str = "tasks"
    holdout_baseline_runs: int = 3  # baseline runs on the holdout (seeds seed, seed+1, ...): its per-task mean
    holdout_candidate_runs: int = 2  # runs of each top-k candidate on the holdout
    # train filter: which top-k candidates the holdout tests. wilcoxon: train mean difference above the
    # noise floor and one-sided Wilcoxon p < alpha (experiments.stats.compare); positive: train mean above the
    # baseline's on the tasks both have; none: every top-k candidate. The holdout alone confirms. Pinned.
    train_filter: str = "wilcoxon"
    # futility stop: the holdout runs in blocks (both arms, all their runs) of this many tasks,
    # or of a quarter of the holdout when that is larger (experiments.stats.look_block); after each block but the
    # last a candidate stops when the conditional power of the final test, under the effect the design detects, is
    # below 0.1 given its paired t so far (experiments.promotion._futility.futility_stop; not confirmed, the look counts; the
    # claim is made at the last block only). 0 = off. Pinned in the decision rule.
    holdout_futility_block: int = 0
    # how the holdout confirms: pointwise (the paired t over tasks on the per-task mean score
    # differences) | pairwise (the judge compares each candidate run's answer with the baseline run's of the same
    # task and seed, both orders; the one-sided sign-flip test over tasks on the mean preference). Pinned.
    holdout_compare: str = "pointwise"
    # cost guard (experiments.stats.CostGuard): promote only a candidate whose holdout cost increase over the baseline
    # is below max_cost_increase (a fraction; None = off) at the quality claim's level
    cost_metric: str = "completion_tokens"  # completion_tokens | prompt_tokens | llm_calls | wall_s
    max_cost_increase: float | None = None
    # worst-task guard: hold back a confirmed candidate that loses more than this many composite points
    # on any holdout task (its per-task mean difference); None = off. Pinned in the decision rule.
    max_task_loss: float | None = None
    reuse_context: bool = True  # plan + research per task computed once per study and reused by every trial
    freeze_memory: bool = True  # memory read-only for the study
    failure_rate_stop: float = 0.5  # stop when this share of finished trials failed
    min_trials_for_failure_stop: int = 3
    plots: bool = True  # PNG plots under <sweep_dir>/plots (history, operators, task heatmap); false: none
    heartbeat_s: int = 60  # Optuna heartbeat; trials silent for 2x this are failed by other workers
    seed: int = 0


@dataclass
class ABConfig:
    # Arm overrides: a mapping of dotted keys or group options ({planner.skip_prior_knowledge: true},
    # {synth: concise}) or the same as a "key=value,key=value" string. Typed Any so that a command-line
    # `ab.a={synth:concise}` replaces a string default instead of merging into it; to_experiment makes it a dict.
    a: Any = None
    b: Any = None
    a_name: str = "A"
    b_name: str = "B"
    replications: int = 3
    alpha: float = 0.05
    min_effect: float = 0.3
    metric: str = "composite"  # composite, or a dimension / secondary metric name
    hypothesis: str = ""
    direction: str = "two-sided"  # sign of mean(B - A) the hypothesis predicts: greater | less | two-sided
    test: str = "t"  # primary test: t | wilcoxon (t, 3 replications, as the shipped A/B configs)
    sequential: bool = False  # O'Brien-Fleming interim looks over tasks
    looks: int = 3  # number of looks when sequential
    split: str = "all"  # benchmark tasks in the test: all | train | holdout
    allow_underpowered: bool = False  # run a design whose test cannot reach alpha ('supported' unreachable)
    # pointwise: each cell's own judge score, the test above over tasks; pairwise: the judge also compares the two
    # arms' answers of every (task, replication) side by side in both orders (2 judge calls a pair; a disagreement is
    # a tie), and the verdict rests on the sign-flip test of B's mean preference over tasks (experiments.ab)
    compare: str = "pointwise"
    min_preference: float = 0.1  # pairwise: the mean preference of B (in [-1, 1]) 'supported' must reach


@dataclass
class CalibrateConfig:
    """`+sweep=calibrate` (experiments.calibration): judge variance, generator variance, an A/A test and a positive
    control on a few benchmark tasks; conf/sweep/calibrate.yaml states the budget arithmetic."""

    tasks: int = 4  # benchmark tasks used (train first, spread over task types); 0 = every task
    generator_repeats: int = 2  # r: runs of the baseline configuration with different seeds (r >= 2)
    judge_repeats: int = 3  # k: re-scores of each fixed output by the evaluator (k >= 2)
    replications: int = 1  # runs of the harmful instruction per task (positive control)
    alpha: float = 0.05
    power: float = 0.8
    test: str = "t"  # A/A and positive control over tasks: t (paired t) | wilcoxon (exact; needs >= 6 tasks)
    target_effect: float = 0.5  # composite points: tasks / replications needed to detect it are reported
    harmful_instruction: str = "Do not answer the task. Reply with one sentence saying that you cannot help with it."
    allow_underpowered: bool = False  # run A/A and control tests that cannot reach alpha (they check nothing)
    sims: int = 4000  # Monte Carlo samples per power estimate (minimum detectable effect, tasks needed)
    # the A/A' arm, a meaning-preserving rewrite of the baseline instruction run at the baseline's seeds
    # ("" = experiments.calibration.rewrite_of per task type); decodings: sampled (the producer's temperature) and/or
    # greedy (producer temperature 0); pairwise: an A/A and the positive control judged side by side (2 calls a pair)
    rewrite_instruction: str = ""
    decodings: list[str] = field(default_factory=lambda: ["sampled"])
    pairwise: bool = False
    # the edits arm (experiments/calibration/_edits.py): k proposals of the sweep's mutators (reflect on the generator
    # runs' feedback) from the baseline, each run once per task; their spread across tasks beyond the run noise sizes
    # tasks.count=auto when it is the largest measured. 0 = off; at most 8
    edits: int = 0


@dataclass
class TaskSupplyConfig:
    """`+sweep=import_tasks` / `+sweep=generate_tasks` (experiments.tasks): a benchmark written from the user's file
    or by a generator model, deduplicated and split before any run. On the command line `tasks.<key>` (the
    experiment's `tasks(split)` method keeps the name `tasks`; experiments.run reads `tasks.` as `task_supply.`)."""

    name: str = ""  # the benchmark written: conf/benchmark/<name>.yaml (benchmark=<name> then runs it)
    out: str = ""  # another file to write instead (a config folder on hydra.searchpath)
    overwrite: bool = False  # replace a file the command did not write, or one edited since it wrote it
    source: str = ""  # import: a .jsonl or .csv file (a `task` column; id, task_type, expected_count, ...)
    count: Any = 20  # generate: tasks to keep, or "auto" (holdout + train sized by a stored calibration)
    description: str = ""  # generate: what the tasks are about
    examples: str = ""  # generate: a .jsonl / .csv of seed tasks shown to the generator
    own_holdout: bool = False  # generate: the examples (the user's own tasks) join the benchmark, all in the holdout
    corpus: str = ""  # generate: a folder of .txt / .md files the tasks (and required terms) are drawn from
    generator_models: list[str] = field(default_factory=list)  # empty: the backend's planner model; several: mixed
    batch: int = 5  # tasks asked per generator call
    max_failed_batches: int = 3  # unusable generator replies in a row before it stops (exit 3; a rerun resumes)
    holdout_share: float = 0.5  # share of each task type assigned to the holdout
    near_duplicate: float = 0.78  # MiniLM cosine from which two texts may be one task (then counts and template)
    effect: float = 0.3  # count=auto: the mean effect (composite points) the holdout must confirm at `power`
    power: float = 0.8
    calibration: str = ""  # count=auto: a stored calibration's key or file; empty: the configured benchmark's
    sweep_trials: int = 0  # count=auto: the sweep.n_trials the cost projection assumes (0: the shipped design's)
    seed: int = 0
    headroom: bool = False  # generate: one baseline run per task; tasks that fail or score at the ceiling dropped
    headroom_ceiling: float = 9.5  # generate: a baseline composite (0-10) at or above it leaves no room for a gain


@dataclass
class ExperimentConfig(HarnessConfig):
    """The harness's config (HarnessConfig: backend, planner, ..., results_dir, output_dir, seed; inherited, not
    declared again) and the experiment's nodes. The YAML stays flat: `backend=fake`, `planner.mode=...`."""

    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    ab: ABConfig = field(default_factory=ABConfig)
    calibrate: CalibrateConfig = field(default_factory=CalibrateConfig)
    task_supply: TaskSupplyConfig = field(default_factory=TaskSupplyConfig)
    mlflow: MLflowConfig = field(default_factory=MLflowConfig)

    @property
    def sweep_dir(self) -> Path:
        return Path(self.results_dir) / self.sweep.name

    @property
    def storage_url(self) -> str:
        return self.sweep.storage or f"sqlite:///{Path(self.results_dir).resolve() / 'optuna.db'}"

    def tasks(self, split: str) -> list[TaskSpec]:
        return [t for t in self.benchmark.tasks if t.split == split]


def register_configs() -> None:
    """Register the schema in Hydra's ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="experiment_schema", node=ExperimentConfig)


register_configs()


# -- composing outside @hydra.main (tests, notebooks, the A/B runner) ----------------------------------


def compose_config(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Compose conf/ with overrides against ExperimentConfig (harness.compose: the one composition both command
    lines use); an unknown group option becomes a one-line ConfigError. `tasks.<key>` is read as
    `task_supply.<key>` (task_supply_keys)."""
    return compose_hydra(task_supply_keys(overrides), config_name, schema=ExperimentConfig)


def task_supply_keys(argv: Sequence[str]) -> list[str]:
    """Overrides with `tasks.<key>=...` read as `task_supply.<key>=...`: the task supply's node is written `tasks`
    on the command line, and `tasks` is the experiment's method that lists a split's tasks."""
    out = []
    for a in argv:
        for p in ("++", "+", "~", ""):
            if a.startswith(f"{p}tasks."):
                a = f"{p}task_supply.{a[len(p) + len('tasks.'):]}"
                break
        out.append(a)
    return out


def results_dir_from_env(default: str = "results") -> str:
    return os.environ.get("HARNESS_RESULTS_DIR") or default


PARENT_SELECTIONS = ("best", "pareto")
SEARCHES = ("joint", "per_type", "round_robin")
ESTIMATES = ("pooled", "edits")
REFLECT_FEEDBACKS = ("worst", "all", "counted")


OPERATOR_CHOICES = ("tpe", "bandit")


PRUNER_CORRECTIONS = ("none", "pocock")


HOLDOUT_TESTS = ("tasks", "bound", "floor")


TRAIN_FILTERS = ("wilcoxon", "positive", "none")  # sweep.train_filter (experiments.promotion.train_filtered)


BASELINE = "baseline"


