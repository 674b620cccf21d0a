"""The benchmark file a task supply writes: ordinary benchmark YAML (conf/benchmark/<name>.yaml, or tasks.out),
written whole or not at all (harness.stores.atomic_write_text: a temporary file renamed over the target).

Whose file it is: the first line the command writes is a marker with the sha256 of the rest of the file. A target
that exists is replaced only when it carries that marker and its hash still matches (the command wrote it and no
one edited it since); any other file (a source file, a shipped benchmark, a benchmark the user edited) is refused
in one line unless tasks.overwrite=true. Every string of the YAML is escaped for OmegaConf (experiments.config's
escape_interpolation), so a task with `${...}` reads back as written, and the file passes the loader's own checks
before it is written.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from experiments.config import ConfigError, ExperimentConfig

from ._rows import Candidate, where

CONF_BENCHMARKS = Path(__file__).resolve().parents[2] / "conf" / "benchmark"


MARKER = "# Written by experiments.tasks (sha256 {digest} of the lines below); edited, it is yours: a rerun " \
         "replaces it only with tasks.overwrite=true"
_MARKER = re.compile(r"^# Written by experiments\.tasks \(sha256 ([0-9a-f]{16}) of the lines below\)")


def target(exp: ExperimentConfig) -> Path:
    """tasks.out, else conf/benchmark/<tasks.name>.yaml of this checkout (benchmark=<name> runs it)."""
    ts = exp.task_supply
    return Path(ts.out).expanduser() if str(ts.out or "").strip() else CONF_BENCHMARKS / f"{ts.name}.yaml"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def ownership(path: Path) -> str:
    """"new" (nothing there), "ours" (the command wrote it and it is unchanged), "edited" (the command wrote it and
    it was changed since) or "theirs" (any other file)."""
    if not path.exists():
        return "new"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "theirs"
    first, _, rest = text.partition("\n")
    m = _MARKER.match(first)
    if not m:
        return "theirs"
    return "ours" if digest(rest) == m.group(1) else "edited"


def check_target(exp: ExperimentConfig) -> Path:
    """The file the command writes; ConfigError (one line, nothing written) when it is not a .yaml file, or when a
    file is there that the command did not write, or one it wrote that was edited since, and tasks.overwrite is
    not set."""
    path = target(exp)
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError(f"tasks.out={str(path)!r} is not a .yaml file; expected a .yaml file to write (a "
                          f"benchmark/ folder of a config directory)")
    if path.exists() and not path.is_file():
        raise ConfigError(f"tasks.out={str(path)!r} is not a file; expected a .yaml file to write")
    whose = ownership(path)
    if whose in ("theirs", "edited") and not exp.task_supply.overwrite:
        what = ("was edited since this command wrote it" if whose == "edited" else
                "was not written by this command")
        raise ConfigError(f"{path} exists and {what}; nothing written: pass tasks.overwrite=true to replace it, or "
                          f"give another tasks.name or tasks.out")
    return path


def benchmark_yaml(name: str, description: str, header: Sequence[str], tasks: Sequence[tuple[Candidate, str]]) -> str:
    """The benchmark's YAML below the marker: the header as comments, then name, description and tasks, every
    string escaped for OmegaConf (a task's `${...}` stays text)."""
    import yaml

    from experiments.config import escape_interpolation

    body = escape_interpolation({"name": name, "description": description, "tasks": [c.spec(s) for c, s in tasks]})
    comment = "".join(f"# {' '.join(line.splitlines())}\n" for line in header)  # a newline would end the comment
    return comment + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=120)


def check_loads(text: str, near_duplicate: float) -> Any:
    """The BenchmarkConfig the loader makes of `text`, through the loader's own steps (the schema, task text made
    literal, experiments.config.check_benchmark_tasks); ConfigError (one line) when it would be refused."""
    import yaml
    from omegaconf import OmegaConf

    from experiments.config import BenchmarkConfig, check_benchmark_tasks, literal_benchmark, load_tasks

    node = OmegaConf.create({"benchmark": OmegaConf.merge(OmegaConf.structured(BenchmarkConfig), yaml.safe_load(text))})
    bench = OmegaConf.to_object(literal_benchmark(node).benchmark)
    check_benchmark_tasks(bench, near_duplicate)
    load_tasks(bench)
    return bench


def write_benchmark(exp: ExperimentConfig, text: str) -> Path:
    """The YAML, behind its marker line, written atomically to the command's target: refused in one line (nothing
    written) when the loader would refuse it, or when the target is a file the command may not replace
    (check_target, asked again: the user may have edited it while the command ran)."""
    from harness.stores import atomic_write_text

    path = check_target(exp)
    try:
        check_loads(text, exp.task_supply.near_duplicate)
    except ConfigError as exc:
        raise ConfigError(f"the benchmark for {path} would not load ({exc}); nothing written") from None
    except Exception as exc:  # noqa: BLE001 - a bug here must not leave a benchmark that does not load
        raise ConfigError(f"the benchmark for {path} would not load ({type(exc).__name__}: {exc}); nothing "
                          f"written") from None
    return atomic_write_text(path, MARKER.format(digest=digest(text)) + "\n" + text)


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
             f"{len(sel.dropped)} ({sel.exact} exact, {sel.near} near: paraphrases, MiniLM cosine >= "
             f"{sel.threshold:g} with the same counts)",
             f"type mix (train+holdout): {type_mix(tasks)}"]
    kept = {**{c.id: c for c in getattr(sel, "kept", ())}, **{c.id: c for c, _ in tasks}}
    for d in sel.dropped[:5]:
        k = kept.get(d.kept_id)
        lines.append(f"dropped {d.task.id!r} ({where(d.task)}): "
                     f"{'the same text as' if d.similarity >= 1 else f'similarity {d.similarity:.2f} to'} "
                     f"{f'{where(k)} ({k.id!r})' if k is not None else repr(d.kept_id)}")
    if len(sel.dropped) > 5:
        lines.append(f"... {len(sel.dropped) - 5} more dropped")
    lines += [f"closest kept: {a!r} ~ {b!r} {s:.2f}" for a, b, s in sel.closest]
    lines += list(extra)
    lines += [f"wrote {path} (benchmark={path.stem} runs it{'' if path.parent == CONF_BENCHMARKS else ' with its config folder on hydra.searchpath'}; read and edit it before the first run)",
              f"===== END TASKS {kind.upper()} ====="]
    return lines


def holdout_note(exp: ExperimentConfig, tasks: Sequence[tuple[Candidate, str]]) -> str | None:
    """A line when the file's holdout is smaller than the sweep's first holdout look needs (the sweep's design check,
    experiments.config's sweep_design_problem, would refuse it later): the fewest holdout tasks whose every one moving
    the same way reaches the first look's level, under the shipped sweep design's alpha. None when it has enough."""
    from experiments.stats import holdout_tasks_needed, level

    from ._sizing import shipped_sweep

    sw = shipped_sweep(exp)
    if sw.holdout_test != "tasks":
        return None
    first = level(sw.alpha, 1)
    need, n_hold = holdout_tasks_needed(first), split_counts(tasks)[1]
    if n_hold >= need:
        return None
    return (f"warning: {n_hold} holdout task(s), fewer than the {need} the sweep's first holdout look needs (level "
            f"{first:g}: sweep.alpha {sw.alpha:g} / 2): +sweep=synth_mutation on this benchmark is refused unless "
            f"sweep.allow_underpowered=true; add tasks or raise tasks.holdout_share")
