"""Benchmark text is data: a task, its terms and the benchmark's description load as written, never as OmegaConf
interpolations. A task "Explain how ${HOME} is expanded in bash" is that sentence; resolving it would fail every
load (no key HOME) or, as ${oc.env:HOME}, put an environment value into a prompt.

OmegaConf reads `${` as an interpolation unless a backslash escapes it: `\\${` is the two characters `${`, and in a
run of k backslashes before `${` each pair is one backslash, an odd one escapes. The loader reads a text with those
rules but takes every interpolation as its own text (`literal`), then escapes that for OmegaConf (`escape`), so
resolution gives the text back. The task supply writes `escape(text)`: a file it writes reads back as the same text
here and in any OmegaConf reader; a hand-written `${HOME}` reads as `${HOME}` here.
"""

from __future__ import annotations

import re
from typing import Any

_INTERPOLATION = re.compile(r"(\\*)\$\{")


def escape(text: str) -> str:
    """`text` as an OmegaConf string that resolves to `text`: every `${` escaped, with the backslashes before it
    doubled."""
    return _INTERPOLATION.sub(lambda m: "\\" * (2 * len(m.group(1)) + 1) + "${", text)


def literal(raw: str) -> str:
    """What an OmegaConf string reads as when no interpolation is resolved: an escaped `${` as `${`, an unescaped
    one as itself, each pair of backslashes before it as one."""
    return _INTERPOLATION.sub(lambda m: "\\" * (len(m.group(1)) // 2) + "${", raw)


def escape_all(value: Any) -> Any:
    """Every string in a YAML value (dicts and lists walked) escaped for OmegaConf."""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return {k: escape_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_all(v) for v in value]
    return value


def escaped_benchmark(exp: Any) -> Any:
    """A copy of an experiment config (dataclasses) whose benchmark strings are escaped for OmegaConf: the texts it
    holds are literal, so a config node made of it (OmegaConf.structured) reads back as the same text."""
    import dataclasses

    bench = exp.benchmark
    tasks = [dataclasses.replace(t, **{f.name: escape_all(getattr(t, f.name)) for f in dataclasses.fields(t)})
             for t in bench.tasks]
    return dataclasses.replace(exp, benchmark=dataclasses.replace(bench, description=escape(bench.description),
                                                                  tasks=tasks))


def literal_benchmark(cfg: Any) -> Any:
    """The composed config with the benchmark's description and every string of its tasks made literal (read with
    `literal`, stored with `escape`); the same object when none holds `${`, else a copy (the caller's config is
    left as it was)."""
    from omegaconf import DictConfig, OmegaConf

    bench = cfg.get("benchmark") if isinstance(cfg, DictConfig) else None
    if not isinstance(bench, DictConfig):
        return cfg
    raw = OmegaConf.to_container(bench, resolve=False)
    if not isinstance(raw, dict) or "${" not in repr(raw):
        return cfg
    import copy

    cfg = copy.deepcopy(cfg)
    flags = {"struct": OmegaConf.is_struct(cfg), "readonly": OmegaConf.is_readonly(cfg)}
    OmegaConf.set_readonly(cfg, False)
    OmegaConf.set_struct(cfg, False)
    for key in ("description", "tasks"):
        if key in raw:
            _set_literal(cfg.benchmark, key, raw[key])
    OmegaConf.set_struct(cfg, flags["struct"])
    OmegaConf.set_readonly(cfg, flags["readonly"])
    return cfg


def _set_literal(node: Any, key: Any, raw: Any) -> None:
    """node[key] (and every string under it) set to its literal text, escaped for OmegaConf; a string is set one
    leaf at a time, so a typed node (a TaskSpec) keeps its type."""
    if isinstance(raw, str):
        if "${" in raw:
            node[key] = escape(literal(raw))
    elif isinstance(raw, dict):
        for k, v in raw.items():
            _set_literal(node[key], k, v)
    elif isinstance(raw, list):
        for i, v in enumerate(raw):
            _set_literal(node[key], i, v)
