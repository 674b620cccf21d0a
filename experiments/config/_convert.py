"""An experiment config from its composed DictConfig: `to_experiment` turns a composed config into plain
dataclasses with the seeds' environment toggles folded in and synth.source resolved (._sources), `to_harness_config`
hands the harness its part (HarnessConfig.of), `apply_overrides` an A/B arm's overrides. The schema is ._schema."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from harness.config import ConfigError, HarnessConfig, apply_env
from harness.synthesis import resolve_synth

from ._literal import escaped_benchmark, literal_benchmark
from ._schema import ExperimentConfig
from ._sources import registry_uri


# -- DictConfig -> dataclasses -----------------------------------------------------------------------


def to_experiment(cfg: DictConfig | ExperimentConfig, environ: dict[str, str] | None = None) -> ExperimentConfig:
    """Composed config -> ExperimentConfig with HARNESS_SKIP_PRIOR_KNOWLEDGE / RESEARCH_CACHE / ... applied.

    For synth_mutation sweeps with freeze_memory, memory.frozen is forced on (and so shows in the logged config).
    """
    if isinstance(cfg, DictConfig):
        from omegaconf.errors import MissingMandatoryValue

        cfg = literal_benchmark(cfg)  # task text is data: `${...}` in a task is never resolved
        try:
            obj = OmegaConf.to_object(cfg)
            if not isinstance(obj, ExperimentConfig):
                merged = OmegaConf.merge(OmegaConf.structured(ExperimentConfig), cfg)
                obj = OmegaConf.to_object(merged)
        except MissingMandatoryValue as exc:  # e.g. a benchmark task without `task` or `id`: one line, not 63
            key = getattr(exc, "full_key", "") or "a mandatory value"
            raise ConfigError(f"{key} is missing; expected a value (a benchmark task needs both `id` and `task`)"
                              ) from None
    else:
        obj = dataclasses.replace(cfg)
    assert isinstance(obj, ExperimentConfig)
    obj = apply_env(obj, environ)  # the environment toggles, on the harness fields it inherits
    if obj.sweep.kind in ("synth_mutation", "ab") and obj.sweep.freeze_memory:
        obj.memory = dataclasses.replace(obj.memory, frozen=True)
    if obj.synth.source and not obj.synth.resolved:  # prompts:/... -> the registered texts (once per config)
        obj.synth = resolve_synth(obj.synth, registry_uri(obj))
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


def apply_overrides(exp: ExperimentConfig, overrides: Mapping[str, Any]) -> ExperimentConfig:
    """A copy of exp with dotted-key overrides applied and type-checked against the schema (A/B arms).

    e.g. apply_overrides(exp, {"planner.skip_prior_knowledge": True, "synth": "concise"}) -- a bare group name
    as the value of a top-level group key loads conf/<group>/<option>.yaml.
    """
    from omegaconf.errors import OmegaConfBaseException

    node = OmegaConf.structured(escaped_benchmark(exp))  # its task text read back as the same text
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
