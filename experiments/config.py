"""Structured experiment configuration: the schema Hydra validates conf/*.yaml against.

`ExperimentConfig` extends harness.config.HarnessConfig (every harness node, inherited) with the experiment
nodes (benchmark, sweep, ab, calibrate, mlflow). DictConfig stops here: `to_experiment` turns a composed config
into plain dataclasses with the seeds' environment toggles folded in, and `to_harness_config` hands the harness
its part (HarnessConfig.of).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from harness.config import HarnessConfig, apply_env

TASK_TYPES = ("enumerated", "best_practices", "research")
SPLITS = ("train", "holdout")
SWEEP_KINDS = ("single", "synth_mutation", "ab", "calibrate")
# "median" was removed: MedianPruner compares a trial's best task so far with other trials at the same step, and
# the steps are task ids (WilcoxonPruner's contract), evaluated in a shuffled order: the comparison meant nothing.
PRUNERS = ("wilcoxon", "none")
SAMPLERS = ("tpe", "random")
PLANNER_MODES = ("two_pass", "single_pass")
SEARCH_PROVIDERS = ("auto", "ddgs", "local")
COMPOSITES = ("rubric", "deterministic", "blend")
ORCHESTRATOR_MODES = ("off", "auto", "always")
DEFAULT_OPERATORS = ("opro", "reflect", "crossover", "add_constraint", "drop_sentence", "reorder")


class ConfigError(ValueError):
    """An invalid configuration value. The message is one line naming the key, the value and what is allowed."""


@dataclass
class TaskSpec:
    id: str = "???"
    task: str = "???"
    task_type: str = "research"
    expected_count: int | None = None
    required_terms: list[str] = field(default_factory=list)
    split: str = "train"


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
    operator_choice: str = "tpe"  # tpe (on the operator asked for) | bandit (Thompson on the operator used)
    gate_tasks: int = 0  # minibatch gate: train tasks a new candidate runs first (0 = off; off on a smaller train split)
    gate_z: float = 1.0  # gate out when mean(child - parent) + gate_z * sigma * sqrt(2 / gate_tasks) < 0
    max_merges: int = 0  # merges of two front candidates over a common ancestor, after a trial beat its parent
    operators: list[str] = field(default_factory=lambda: list(DEFAULT_OPERATORS))
    mutate_task_types: list[str] = field(default_factory=list)  # empty: every task_type in the train split
    max_chars: int = 1200  # instruction length bound passed to mutators
    baseline_repeats: int = 3  # r: baseline runs (different seeds) that measure the noise floor
    alpha: float = 0.05  # paired Wilcoxon (one-sided, over tasks) significance level
    allow_underpowered: bool = False  # run a design whose test cannot reach alpha (a first look; it can never promote)
    holdout_top_k: int = 2
    reuse_context: bool = True  # plan + research per task computed once per study and reused by every trial
    freeze_memory: bool = True  # memory read-only for the study
    failure_rate_stop: float = 0.5  # stop when this share of finished trials failed
    min_trials_for_failure_stop: int = 3
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
    replications: int = 2
    alpha: float = 0.05
    min_effect: float = 0.3
    metric: str = "composite"  # composite, or a dimension / secondary metric name
    hypothesis: str = ""
    direction: str = "two-sided"  # sign of mean(B - A) the hypothesis predicts: greater | less | two-sided
    test: str = "wilcoxon"  # primary test: wilcoxon | t
    sequential: bool = False  # O'Brien-Fleming interim looks over tasks
    looks: int = 3  # number of looks when sequential
    split: str = "all"  # benchmark tasks in the test: all | train | holdout
    allow_underpowered: bool = False  # run a design whose test cannot reach alpha ('supported' unreachable)


@dataclass
class CalibrateConfig:
    """`+sweep=calibrate` (experiments.calibrate): judge variance, generator variance, an A/A test and a positive
    control on a few benchmark tasks; conf/sweep/calibrate.yaml states the budget arithmetic."""

    tasks: int = 4  # benchmark tasks used (train first, spread over task types); 0 = every task
    generator_repeats: int = 2  # r: runs of the baseline configuration with different seeds (r >= 2)
    judge_repeats: int = 3  # k: re-scores of each fixed output by the evaluator (k >= 2)
    replications: int = 1  # runs of the harmful instruction per task (positive control)
    alpha: float = 0.05
    power: float = 0.8
    test: str = "t"  # A/A and positive control over tasks: t (paired t) | wilcoxon (exact; needs >= 6 tasks)
    target_effect: float = 0.5  # composite points: tasks / replications needed to detect it are reported
    harmful_instruction: str = "Answer in one short sentence. No list, no headings, no specifics, no sources."
    allow_underpowered: bool = False  # run A/A and control tests that cannot reach alpha (they check nothing)
    sims: int = 4000  # Monte Carlo samples per power estimate (minimum detectable effect, tasks needed)


@dataclass
class MLflowConfig:
    enabled: bool = True
    tracking_uri: str | None = None  # default: $MLFLOW_TRACKING_URI, else sqlite:///<results_dir>/mlflow.db
    experiment: str | None = None  # default: the sweep name
    # Prompt Registry names <prefix>-synth-<task_type> (experiments/registry.py): one champion lineage per prefix
    prompt_prefix: str = "harness"


@dataclass
class ExperimentConfig(HarnessConfig):
    """The harness's config (HarnessConfig: backend, planner, ..., results_dir, output_dir, seed; inherited, not
    declared again) and the experiment's nodes. The YAML stays flat: `backend=fake`, `planner.mode=...`."""

    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    ab: ABConfig = field(default_factory=ABConfig)
    calibrate: CalibrateConfig = field(default_factory=CalibrateConfig)
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


# -- DictConfig -> dataclasses -----------------------------------------------------------------------


def to_experiment(cfg: DictConfig | ExperimentConfig, environ: dict[str, str] | None = None) -> ExperimentConfig:
    """Composed config -> ExperimentConfig with HARNESS_SKIP_PRIOR_KNOWLEDGE / RESEARCH_CACHE / ... applied.

    For synth_mutation sweeps with freeze_memory, memory.frozen is forced on (and so shows in the logged config).
    """
    if isinstance(cfg, DictConfig):
        obj = OmegaConf.to_object(cfg)
        if not isinstance(obj, ExperimentConfig):
            merged = OmegaConf.merge(OmegaConf.structured(ExperimentConfig), cfg)
            obj = OmegaConf.to_object(merged)
    else:
        obj = dataclasses.replace(cfg)
    assert isinstance(obj, ExperimentConfig)
    obj = apply_env(obj, environ)  # the environment toggles, on the harness fields it inherits
    if obj.sweep.kind in ("synth_mutation", "ab") and obj.sweep.freeze_memory:
        obj.memory = dataclasses.replace(obj.memory, frozen=True)
    if obj.synth.source and not obj.synth.resolved:  # prompts:/... -> the registered texts (once per config)
        from experiments.registry import resolve_synth

        obj.synth = resolve_synth(obj.synth, obj)
    obj.ab = dataclasses.replace(obj.ab, a=arm_overrides(obj.ab.a, "ab.a"), b=arm_overrides(obj.ab.b, "ab.b"))
    return obj


def arm_overrides(value: Any, key: str = "ab.a") -> dict[str, Any]:
    """An A/B arm's overrides as a dict: None -> {}, a mapping as is, "k=v,k2=v2" parsed (values as YAML)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if not isinstance(value, str):
        raise ConfigError(f"{key}={value!r} is not allowed; expected a mapping like {{synth: concise}} or 'key=value,...'")
    import yaml

    out: dict[str, Any] = {}
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        name, eq, raw = part.partition("=")
        if not eq or not name.strip():
            raise ConfigError(f"{key}={value!r} is not allowed; expected 'key=value' pairs separated by commas, got {part!r}")
        out[name.strip()] = yaml.safe_load(raw) if raw.strip() else ""
    return out


def to_harness_config(cfg: DictConfig | ExperimentConfig, environ: dict[str, str] | None = None) -> HarnessConfig:
    """The harness's part of an experiment config, env toggles applied (what gets logged is what runs)."""
    exp = cfg if isinstance(cfg, ExperimentConfig) and environ is None else to_experiment(cfg, environ)
    return apply_env(HarnessConfig.of(exp), environ)


def experiment_dict(exp: ExperimentConfig) -> dict[str, Any]:
    return dataclasses.asdict(exp)


# -- validation --------------------------------------------------------------------------------------


def _check(key: str, value: Any, allowed: Sequence[Any]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}={value!r} is not allowed; expected one of: {', '.join(map(str, allowed))}")


def _check_range(key: str, value: float, lo: float | None = None, hi: float | None = None) -> None:
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
        raise ConfigError(f"{key}={value!r} is out of range; expected a value in {span}")


def known_operators() -> list[str] | None:
    """Operator names from mutators/, or None when that package does not provide them yet."""
    try:
        from mutators import operator_names
    except ImportError:
        return None
    return list(operator_names())


def validate(exp: ExperimentConfig) -> ExperimentConfig:
    """Raise ConfigError (one line: key, value, allowed values) on the first invalid setting."""
    from harness.inference import backend_names

    _check("backend.kind", exp.backend.kind, backend_names())
    _check_range("backend.n_ctx", exp.backend.n_ctx, 256)
    _check_range("backend.embedded_slots", exp.backend.embedded_slots, 1)
    _check_range("backend.parallel_default", exp.backend.parallel_default, 1)
    _check_range("backend.embedded_repeat_penalty", exp.backend.embedded_repeat_penalty, 1.0, 2.0)
    _check_range("backend.embedded_cache_ram_mib", exp.backend.embedded_cache_ram_mib, 0)
    try:
        from experiments.pool import resolve_concurrency

        resolve_concurrency(exp.backend.concurrency, "fake", environ={})
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    _check("planner.mode", exp.planner.mode, PLANNER_MODES)
    _check("search.provider", exp.search.provider, SEARCH_PROVIDERS)
    _check("evaluator.composite", exp.evaluator.composite, COMPOSITES)
    _check("orchestrator.mode", exp.orchestrator.mode, ORCHESTRATOR_MODES)
    _check_range("evaluator.rubric_weight", exp.evaluator.rubric_weight, 0.0, 1.0)
    _check_range("evaluator.repeats", exp.evaluator.repeats, 1)
    _check_range("wiggum.max_rounds", exp.wiggum.max_rounds, 0)
    for key in exp.synth.instructions:
        _check("synth.instructions key", key, TASK_TYPES)
    if not re.match(r"^[A-Za-z0-9_.-]+$", exp.mlflow.prompt_prefix):
        raise ConfigError(f"mlflow.prompt_prefix={exp.mlflow.prompt_prefix!r} is not allowed; expected letters, "
                          "digits, '_', '-' or '.' (MLflow prompt names)")
    sw = exp.sweep
    _check("sweep.kind", sw.kind, SWEEP_KINDS)
    _check("sweep.pruner", sw.pruner, PRUNERS)
    _check("sweep.sampler", sw.sampler, SAMPLERS)
    from experiments.optimizer import OPERATOR_CHOICES, PARENT_SELECTIONS, PRUNER_CORRECTIONS

    _check("sweep.pruner_correction", sw.pruner_correction, PRUNER_CORRECTIONS)
    _check("sweep.parent_selection", sw.parent_selection, PARENT_SELECTIONS)
    _check("sweep.operator_choice", sw.operator_choice, OPERATOR_CHOICES)
    _check_range("sweep.gate_tasks", sw.gate_tasks, 0)
    _check_range("sweep.gate_z", sw.gate_z, -3.0, 5.0)
    _check_range("sweep.max_merges", sw.max_merges, 0)
    _check_range("sweep.n_trials", sw.n_trials, 1)
    _check_range("sweep.baseline_repeats", sw.baseline_repeats, 1)
    _check_range("sweep.alpha", sw.alpha, 0.0, 1.0)
    _check_range("sweep.pruner_p", sw.pruner_p, 0.0, 1.0)
    _check_range("sweep.failure_rate_stop", sw.failure_rate_stop, 0.0, 1.0)
    _check_range("sweep.holdout_top_k", sw.holdout_top_k, 0)
    if sw.max_llm_calls is not None:
        _check_range("sweep.max_llm_calls", sw.max_llm_calls, 1)
    if sw.timeout_s is not None:
        _check_range("sweep.timeout_s", sw.timeout_s, 0.0)
    if not sw.name or "/" in sw.name:
        raise ConfigError(f"sweep.name={sw.name!r} is not allowed; expected a non-empty name without '/'")
    for tt in sw.mutate_task_types:
        _check("sweep.mutate_task_types item", tt, TASK_TYPES)
    if sw.kind == "synth_mutation":
        if not sw.operators:
            raise ConfigError("sweep.operators=[] is not allowed; expected at least one mutation operator")
        ops = known_operators()
        if ops is not None:
            for op in sw.operators:
                _check("sweep.operators item", op, ops)
    ids = set()
    for i, t in enumerate(exp.benchmark.tasks):
        _check(f"benchmark.tasks[{i}].task_type", t.task_type, TASK_TYPES)
        _check(f"benchmark.tasks[{i}].split", t.split, SPLITS)
        if t.id in ids:
            raise ConfigError(f"benchmark.tasks[{i}].id={t.id!r} is a duplicate; expected unique task ids")
        ids.add(t.id)
        if t.expected_count is not None:
            _check_range(f"benchmark.tasks[{i}].expected_count", t.expected_count, 1)
    if sw.kind in ("synth_mutation", "ab") and not exp.tasks("train"):
        raise ConfigError(f"benchmark.tasks has no split='train' task; expected at least one for sweep.kind={sw.kind}")
    if sw.kind == "synth_mutation":
        check_sweep_design(exp)
    if sw.kind == "ab":
        ab = exp.ab
        if ab.a == ab.b:
            raise ConfigError("ab.a and ab.b are identical; expected two different override sets")
        from experiments.stats import DIRECTIONS, TESTS

        _check("ab.direction", ab.direction, DIRECTIONS)
        _check("ab.test", ab.test, TESTS)
        _check("ab.split", ab.split, ("all", *SPLITS))
        _check_range("ab.replications", ab.replications, 1)
        _check_range("ab.min_effect", ab.min_effect, 0.0)
        _check_range("ab.looks", ab.looks, 2)
        if not 0.0 < ab.alpha < 1.0:
            raise ConfigError(f"ab.alpha={ab.alpha!r} is out of range; expected a value in (0, 1)")
        if not ab.hypothesis.strip():
            raise ConfigError("ab.hypothesis is empty; expected the hypothesis as a sentence, written before any data")
        if not ab.a_name or ab.a_name == ab.b_name or "/" in ab.a_name + ab.b_name:
            raise ConfigError(f"ab.a_name={ab.a_name!r}, ab.b_name={ab.b_name!r} are not allowed; expected two different non-empty names without '/'")
        from experiments.ab_design import check_ab_design

        check_ab_design(exp)
    if sw.kind == "calibrate":
        check_calibrate_design(exp)
    return exp


def check_calibrate_design(exp: ExperimentConfig) -> None:
    """ConfigError (one line) on an invalid calibrate.* value, or when the A/A test or the positive control over
    calibrate.tasks tasks cannot reach alpha (unless calibrate.allow_underpowered)."""
    from experiments.stats import TESTS

    c = exp.calibrate
    n_all = len(exp.benchmark.tasks)
    if n_all == 0:
        raise ConfigError(f"benchmark {exp.benchmark.name!r} has no tasks; expected at least 2 for sweep.kind=calibrate")
    _check_range("calibrate.tasks", c.tasks, 0)
    if c.tasks > n_all:
        raise ConfigError(f"calibrate.tasks={c.tasks} is out of range; benchmark {exp.benchmark.name!r} has {n_all} "
                          f"task(s) (0 uses them all)")
    if c.generator_repeats < 2:
        raise ConfigError(f"calibrate.generator_repeats={c.generator_repeats} measures no generator variance; "
                          f"expected a value in [2, inf]")
    if c.judge_repeats < 2:
        raise ConfigError(f"calibrate.judge_repeats={c.judge_repeats} measures no judge variance; "
                          f"expected a value in [2, inf]")
    _check_range("calibrate.replications", c.replications, 1)
    _check_range("calibrate.sims", c.sims, 200)
    _check("calibrate.test", c.test, TESTS)
    for key, value in (("calibrate.alpha", c.alpha), ("calibrate.power", c.power)):
        if not 0.0 < value < 1.0:
            raise ConfigError(f"{key}={value!r} is out of range; expected a value in (0, 1)")
    if not c.power > c.alpha:
        raise ConfigError(f"calibrate.power={c.power!r} is not above calibrate.alpha={c.alpha!r}; expected power > alpha")
    if not c.target_effect > 0:
        raise ConfigError(f"calibrate.target_effect={c.target_effect!r} is out of range; expected a value > 0 "
                          f"(composite points)")
    if not c.harmful_instruction.strip():
        raise ConfigError("calibrate.harmful_instruction is empty; expected an instruction that makes outputs worse")
    from experiments.power import calibrate_design_problem

    problem = calibrate_design_problem(exp)
    if problem and not c.allow_underpowered:
        raise ConfigError(problem)


def check_sweep_design(exp: ExperimentConfig) -> None:
    """ConfigError (one line: the numbers and the fixes) when the sweep cannot conclude, unless allowed."""
    from experiments.power import sweep_design_problem

    problem = sweep_design_problem(exp)
    if problem and not exp.sweep.allow_underpowered:
        raise ConfigError(problem)


def apply_overrides(exp: ExperimentConfig, overrides: Mapping[str, Any]) -> ExperimentConfig:
    """A copy of exp with dotted-key overrides applied and type-checked against the schema (A/B arms).

    e.g. apply_overrides(exp, {"planner.skip_prior_knowledge": True, "synth": "concise"}) -- a bare group name
    as the value of a top-level group key loads conf/<group>/<option>.yaml.
    """
    from omegaconf.errors import OmegaConfBaseException

    node = OmegaConf.structured(exp)
    if any(k == "synth" or k.startswith("synth.") for k in overrides):
        node.synth.resolved = {}  # an arm's synth.source is resolved afresh
    for key, value in overrides.items():
        if "." not in key and isinstance(value, str) and key in _GROUPS:
            value = _load_group_option(key, value)
        try:
            OmegaConf.update(node, key, value, merge=True, force_add=False)
        except (OmegaConfBaseException, ValueError) as exc:
            raise ConfigError(f"override {key}={value!r} is not valid: {str(exc).splitlines()[0]}") from exc
    return to_experiment(node)


_GROUPS = ("backend", "planner", "synth", "evaluator", "benchmark")


def _load_group_option(group: str, option: str) -> dict[str, Any]:
    from importlib.resources import files

    path = files("conf").joinpath(group, f"{option}.yaml")
    if not path.is_file():
        options = sorted(p.name[:-5] for p in files("conf").joinpath(group).iterdir() if p.name.endswith(".yaml"))
        raise ConfigError(f"{group}={option} is not an option; expected one of: {', '.join(options)}")
    data = OmegaConf.to_container(OmegaConf.create(path.read_text(encoding="utf-8")))
    assert isinstance(data, dict)
    return data


# -- composing outside @hydra.main (tests, notebooks, the A/B runner) ----------------------------------


def compose_config(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Compose conf/ with overrides; an unknown group option becomes a one-line ConfigError."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="conf", version_base=None):
            return compose(config_name=config_name, overrides=list(overrides))
    except OverrideParseException as exc:
        bad = next((o for o in overrides if "=" in o.split("=", 1)[-1]), None)  # an unquoted '=' in a value
        if bad is None:
            raise ConfigError(f"cannot parse overrides {' '.join(overrides)!r}: {str(exc).splitlines()[0]}") from exc
        key, value = bad.split("=", 1)
        raise ConfigError(f"cannot parse override {bad!r}: {str(exc).splitlines()[0]}; quote a value that holds '='"
                          f" (e.g. '{key}=\"{value}\"')") from exc
    except MissingConfigException as exc:
        raise ConfigError(one_line_hydra_error(exc)) from exc
    except ConfigCompositionException as exc:
        raise ConfigError(one_line_hydra_error(exc)) from exc
    finally:
        GlobalHydra.instance().clear()


def one_line_hydra_error(exc: BaseException) -> str:
    """Hydra's multi-line 'Could not find ... Available options ...' as one line."""
    text = str(exc)
    cause = exc.__cause__
    while cause is not None and "Available options" not in text:
        text = str(cause) or text
        cause = cause.__cause__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    if any(ln.startswith("Available options") for ln in lines):
        idx = next(i for i, ln in enumerate(lines) if ln.startswith("Available options"))
        options = []
        for ln in lines[idx + 1 :]:
            if ln.startswith("Config search path"):
                break
            options.append(ln)
        m = re.search(r"Could not find '([^']+)/([^'/]+)'", text)
        head = f"{m.group(1).replace('/', '.')}={m.group(2)} is not an option" if m else lines[0]
        return f"{head}; expected one of: {', '.join(options)}"
    keep = [ln for ln in lines if not ln.startswith(("full_key:", "reference_type=", "object_type=", "Set the environment"))]
    key = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("full_key:")), "")
    msg = " ".join(keep or lines)
    return f"{key}: {msg}" if key and key not in msg else msg


def results_dir_from_env(default: str = "results") -> str:
    return os.environ.get("HARNESS_RESULTS_DIR") or default
