"""Configuration from conf/ for both command lines: Hydra composes conf/config.yaml with the overrides typed beside
the command, checked against a schema. `python -m experiments.run` composes against experiments.config's
ExperimentConfig; `python -m harness` against HarnessConf (the harness's nodes, typed; the experiment's nodes, which
conf/ also holds, taken as they are) and keeps its HarnessConfig: the harness imports nothing of experiments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from harness.config import ConfigError, HarnessConfig, MLflowConfig, apply_env, results_dir_in

from ._checks import check_harness, warn_judge

SCHEMA_NAME = "experiment_schema"  # the schema conf/config.yaml's defaults list names

# conf/config.yaml places Hydra's job folder with ${harness.results_dir:${results_dir}}: inside the results folder
# the run uses (HARNESS_RESULTS_DIR or results_dir, `~` expanded), so nothing is written outside it
OmegaConf.register_new_resolver("harness.results_dir", lambda value: results_dir_in(str(value)), replace=True)


@dataclass
class HarnessConf(HarnessConfig):
    """What conf/ holds, as the harness reads it: its own nodes typed (HarnessConfig), the MLflow store its
    synth.source prompts live in, and the experiment's nodes untyped (a sweep, A/B or benchmark is not the
    harness's business; experiments.config types them)."""

    mlflow: MLflowConfig = field(default_factory=MLflowConfig)
    benchmark: Any = None
    sweep: Any = None
    ab: Any = None
    calibrate: Any = None


def compose_hydra(overrides: Sequence[str] = (), config_name: str = "config",
                   schema: type | None = None) -> DictConfig:
    """Compose conf/ with overrides against `schema` (HarnessConf unless given: experiments.config passes its
    ExperimentConfig); an unknown group option becomes a one-line ConfigError."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException

    ConfigStore.instance().store(name=SCHEMA_NAME, node=schema or HarnessConf)
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
    except UnicodeDecodeError as exc:  # a config file that is not UTF-8: Hydra's 65-line traceback names no file
        raise ConfigError(undecodable_config(exc, overrides)) from None
    finally:
        GlobalHydra.instance().clear()


def config_folders(overrides: Sequence[str]) -> list[Path]:
    """The folders Hydra reads config files from: conf/ and each file:// or pkg:// entry of a hydra.searchpath
    override."""
    from importlib.resources import files

    folders = [Path(str(files("conf")))]
    for override in overrides:
        if override_key(override) != "hydra.searchpath":
            continue
        from hydra.core.override_parser.overrides_parser import OverridesParser

        try:
            entries = OverridesParser.create().parse_overrides([override])[0].value()
        except Exception:  # Hydra reports a bad override itself
            continue
        for entry in entries if isinstance(entries, list) else [entries]:
            scheme, _, rest = str(entry).partition("://")
            if scheme == "file":
                folders.append(Path(rest))
            elif scheme == "pkg":
                try:
                    folders.append(Path(str(files(rest.replace("/", ".")))))
                except (ImportError, TypeError, ValueError):
                    continue
    return folders


def undecodable_config(exc: UnicodeDecodeError, overrides: Sequence[str]) -> str:
    """One line for a config file that is not UTF-8: the file, the byte, its offset and line. Hydra's error names no
    file, and its offset is within the piece it was decoding: each config file is read again here to find them."""
    found: list[tuple[bool, Path, UnicodeDecodeError]] = []  # (holds the piece Hydra was reading, file, error)
    for folder in config_folders(overrides):
        for path in sorted(folder.rglob("*.yaml")) if folder.is_dir() else []:
            try:
                data = path.read_bytes()
                data.decode("utf-8")
            except OSError:
                continue
            except UnicodeDecodeError as bad:
                found.append((bool(exc.object) and bytes(exc.object) in data, path, bad))
    if not found:
        return f"a config file is not UTF-8 ({exc}); expected UTF-8 text"
    _, path, bad = max(found, key=lambda f: f[0])  # the file Hydra was reading, else the first one
    line = bad.object[: bad.start].count(b"\n") + 1
    return (f"{path} is not UTF-8: byte 0x{bad.object[bad.start]:02x} at offset {bad.start} (line {line}); "
            "expected UTF-8 text: save the file as UTF-8")


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


def harness_config(overrides: Sequence[str], environ: Mapping[str, str] | None = None) -> HarnessConfig:
    """The HarnessConfig conf/ and `overrides` give, the environment toggles applied (command line first: pass an
    environ without the variables an override sets), synth.source read from the Prompt Registry, every harness
    setting checked. Raises ConfigError (one line) on a bad override or value."""
    from omegaconf.errors import MissingMandatoryValue

    from harness.synthesis import resolve_synth
    from harness.stores import resolve_tracking_uri

    try:
        conf = OmegaConf.to_object(compose_hydra(list(overrides)))
    except MissingMandatoryValue as exc:
        raise ConfigError(f"{getattr(exc, 'full_key', '') or 'a mandatory value'} is missing; expected a value") from None
    assert isinstance(conf, HarnessConf)
    conf = apply_env(conf, None if environ is None else dict(environ))
    if conf.synth.source and not conf.synth.resolved:
        conf.synth = resolve_synth(conf.synth, resolve_tracking_uri(conf.mlflow.tracking_uri, conf.results_dir))
    check_harness(conf)
    warn_judge(conf.backend)
    return HarnessConfig.of(conf)  # the environment is folded in above (apply_env)


# The environment variables harness.config.apply_env folds in, and the override keys that set the same field.
# In both command lines the command line wins over the environment: a variable is not applied when the command
# line sets its field (before, `python -m experiments.run results_dir=x` wrote to $HARNESS_RESULTS_DIR). Otherwise
# it wins over conf/.
ENV_FIELDS: dict[str, tuple[str, ...]] = {
    "HARNESS_BACKEND": ("backend", "backend.kind"),
    "HARNESS_RESULTS_DIR": ("results_dir",),
    "HARNESS_SKIP_PRIOR_KNOWLEDGE": ("planner", "planner.skip_prior_knowledge"),
    "RESEARCH_CACHE": ("research.reuse_cache",),
}


def override_key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def command_line_environ(overrides: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """environ without the variables whose field an override sets (see ENV_FIELDS)."""
    keys = {override_key(o) for o in overrides}
    return {k: v for k, v in environ.items() if not keys.intersection(ENV_FIELDS.get(k, ()))}
