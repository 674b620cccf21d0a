"""The benchmark file a task supply writes: ordinary benchmark YAML (conf/benchmark/<name>.yaml, or tasks.out),
written whole or not at all (harness.stores.atomic_write_text: a temporary file renamed over the target)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from experiments.config import ConfigError, ExperimentConfig

from ._rows import Candidate

CONF_BENCHMARKS = Path(__file__).resolve().parents[2] / "conf" / "benchmark"


def target(exp: ExperimentConfig) -> Path:
    """tasks.out, else conf/benchmark/<tasks.name>.yaml of this checkout (benchmark=<name> runs it)."""
    ts = exp.task_supply
    return Path(ts.out).expanduser() if str(ts.out or "").strip() else CONF_BENCHMARKS / f"{ts.name}.yaml"


def benchmark_yaml(name: str, description: str, header: Sequence[str], tasks: Sequence[tuple[Candidate, str]]) -> str:
    import yaml

    body = {"name": name, "description": description, "tasks": [c.spec(s) for c, s in tasks]}
    comment = "".join(f"# {line}\n" for line in header)
    return comment + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=120)


def write_benchmark(path: Path, text: str) -> Path:
    """The YAML written atomically; it is read back through the loader's schema first, so a file that would not
    load is never left behind."""
    import yaml
    from omegaconf import OmegaConf

    from experiments.config import BenchmarkConfig
    from harness.stores import atomic_write_text

    try:
        OmegaConf.merge(OmegaConf.structured(BenchmarkConfig), yaml.safe_load(text))
    except Exception as exc:  # noqa: BLE001 - a bug here must not leave a half benchmark: say what failed
        raise ConfigError(f"the benchmark for {path} does not load ({type(exc).__name__}: {exc}); nothing written")
    return atomic_write_text(path, text)


def type_mix(tasks: Sequence[tuple[Candidate, str]]) -> str:
    """'enumerated 4+4, research 3+3' (train + holdout per type)."""
    c: Counter[tuple[str, str]] = Counter((t.task_type, s) for t, s in tasks)
    types = sorted({t.task_type for t, _ in tasks})
    return ", ".join(f"{tt} {c[(tt, 'train')]}+{c[(tt, 'holdout')]}" for tt in types)


def split_counts(tasks: Sequence[tuple[Candidate, str]]) -> tuple[int, int]:
    return (sum(1 for _, s in tasks if s == "train"), sum(1 for _, s in tasks if s == "holdout"))


def summary_lines(kind: str, read: str, sel: Any, tasks: Sequence[tuple[Candidate, str]], path: Path,
                  extra: Sequence[str] = ()) -> list[str]:
    """The report: `read` says what came in ("rows: 8", "asked: 20; generated: 24"), then what was kept and why."""
    n_train, n_hold = split_counts(tasks)
    lines = [f"===== TASKS {kind.upper()} =====",
             f"{read}; kept: {len(tasks)} ({n_train} train + {n_hold} holdout); dropped as duplicates: "
             f"{len(sel.dropped)} ({sel.exact} exact, {sel.near} near: cosine >= {sel.threshold:g}, hashing "
             f"embedding)",
             f"type mix (train+holdout): {type_mix(tasks)}"]
    lines += [f"dropped {d.task.id!r} ({d.task.provenance.get('line') and 'line ' + str(d.task.provenance['line']) or 'generated'}): "
              f"{'the same text as' if d.similarity >= 1 else f'similarity {d.similarity:.2f} to'} {d.kept_id!r}"
              for d in sel.dropped[:5]]
    if len(sel.dropped) > 5:
        lines.append(f"... {len(sel.dropped) - 5} more dropped")
    lines += [f"closest kept: {a!r} ~ {b!r} {s:.2f}" for a, b, s in sel.closest]
    lines += list(extra)
    lines += [f"wrote {path} (benchmark={path.stem} runs it{'' if path.parent == CONF_BENCHMARKS else ' with its config folder on hydra.searchpath'}; read and edit it before the first run)",
              f"===== END TASKS {kind.upper()} ====="]
    return lines
