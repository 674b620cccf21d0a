"""The task supply's entry: what is refused before anything is written, and the two commands."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Callable, Sequence

from experiments.config import MAX_GENERATED, ConfigError, ExperimentConfig

from ._generate import corpus_docs, generate, read_journal
from ._headroom import screen
from ._import import plan_import, run_import
from ._rows import read_rows, unique_ids
from ._select import Selection, assign_split, deduplicate
from ._sizing import size, stored_calibration
from ._write import benchmark_yaml, check_target, holdout_note, summary_lines, write_benchmark

def cli_keys(argv: Sequence[str]) -> list[str]:
    """The command line with `tasks.<key>=...` read as `task_supply.<key>=...` (experiments.config's
    task_supply_keys, which compose_config applies too; Hydra's own command line needs it before it parses)."""
    from experiments.config import task_supply_keys

    return task_supply_keys(argv)


def check_task_supply(exp: ExperimentConfig) -> None:
    """Everything the command would refuse, before anything is written: the source's rows (file and line), the
    examples and corpus, the journal's settings, and for count=auto a stored calibration."""
    ts = exp.task_supply
    name = str(ts.name or "")
    if not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", name) or ".." in name or len(name) > 100:
        raise ConfigError(f"tasks.name={ts.name!r} is not allowed; expected the benchmark's name (letters, digits, "
                          f"'_', '-', '.'; it names conf/benchmark/<name>.yaml and benchmark=<name> runs it)")
    if exp.sweep.kind == "import_tasks":
        if ts.own_holdout:
            raise ConfigError("tasks.own_holdout=true is for +sweep=generate_tasks (your tasks as the holdout beside "
                              "generated ones); an import keeps a split given per row: split=holdout on your rows")
        if not str(ts.source or "").strip():
            raise ConfigError("tasks.source is empty; expected a .jsonl or .csv file of tasks (a `task` column), a "
                              "harness runs.jsonl, or a folder of .txt / .md files (one task a file)")
        plan_import(exp)
        check_target(exp)
        return
    if not str(ts.description or "").strip():
        raise ConfigError("tasks.description is empty; expected a sentence saying what the tasks are about")
    if ts.own_holdout and not str(ts.examples or "").strip():
        raise ConfigError("tasks.own_holdout=true keeps the user's own tasks as the holdout, but tasks.examples is "
                          "empty; expected tasks.examples=PATH (a .jsonl or .csv file of your tasks)")
    if str(ts.examples or "").strip():
        read_rows(ts.examples)
    if str(ts.corpus or "").strip():
        corpus_docs(ts.corpus)
    read_journal(exp)
    if ts.count == "auto":
        size(exp)
    check_target(exp)


def run_task_supply(exp: ExperimentConfig, *, out: Callable[[str], None] = print) -> Path:
    if exp.sweep.kind == "import_tasks":
        return run_import(exp, out=out)
    return run_generate(exp, out=out)


def run_generate(exp: ExperimentConfig, *, out: Callable[[str], None] = print) -> Path:
    ts = exp.task_supply
    # tasks the user gave as examples are never generated again (a near-duplicate of one is dropped); with
    # tasks.own_holdout they join the benchmark, every one in the holdout, so no generated train task can be one
    # of them again (the loader's check_benchmark would refuse the file)
    examples = unique_ids(read_rows(ts.examples))[0] if str(ts.examples or "").strip() else []
    own = deduplicate(examples, ts.near_duplicate) if ts.own_holdout else None
    n_own = len(own.kept) if own else 0
    against = list(own.kept) if own else examples  # the file's own tasks: the closest pairs report what it holds
    extra: list[str] = []
    if ts.count == "auto":
        sizing = size(exp)
        mismatch = calibration_mismatch(exp)
        for line in sizing.lines + ((mismatch,) if mismatch else ()):
            out(line)
        gen_holdout = max(sizing.holdout - n_own, 0)  # your own tasks count toward the holdout the noise asks for
        want, share, extra = sizing.train + gen_holdout, gen_holdout / (sizing.train + gen_holdout), list(sizing.lines)
        if want > MAX_GENERATED:
            raise ConfigError(f"tasks.count=auto asks for {want} generated tasks (train {sizing.train} + holdout "
                              f"{gen_holdout}); at most {MAX_GENERATED} are generated in one benchmark: expected a "
                              f"larger tasks.effect, or tasks.count=N up to {MAX_GENERATED}")
        if mismatch:
            extra.append(mismatch)
        if own:
            extra.append(f"own holdout: {n_own} of your own task(s) count toward the {sizing.holdout} holdout tasks; "
                         f"{gen_holdout} generated holdout task(s) make up the rest")
    else:
        want, share = int(ts.count), ts.holdout_share

    def kept(cands: list) -> int:
        return len(deduplicate(unique_ids(cands, against)[0], ts.near_duplicate, against=against).kept)

    cands, made, seconds = generate(exp, want, kept, out)
    cands = unique_ids(cands, against)[0]
    sel = deduplicate(cands, ts.near_duplicate, against=against)
    chosen = list(sel.kept[:want])
    if len(chosen) < 2:
        raise ConfigError(f"the generator gave {len(chosen)} usable distinct task(s); expected at least 2 (see the "
                          f"lines above)")
    if ts.headroom:
        # one baseline run per generated task: a task that fails or already scores at the ceiling cannot show a
        # gain, so it never reaches the file (the user's own tasks are not screened)
        scr = screen(exp, chosen, out)
        chosen = scr.kept
        extra += scr.lines(ts.headroom_ceiling)
        if len(chosen) < want:
            extra.append(f"headroom screen: {len(chosen)} of the {want} tasks asked remain (no more are generated: "
                         f"raise tasks.count and run again to top up)")
        if len(chosen) < 2:
            raise ConfigError(f"the headroom screen left {len(chosen)} generated task(s) of {scr.screened} "
                              f"({len(scr.failed)} failed, {len(scr.ceiling)} at composite >= "
                              f"{ts.headroom_ceiling:g}); expected at least 2: raise tasks.count or "
                              f"tasks.headroom_ceiling and run again (screened tasks are not run again)")
    holdout = math.floor(len(chosen) * share + 0.5)
    # without tasks of the user's own, both splits need generated tasks; beside them the generated ones may all train
    low = 0.0 if own else 0.01
    tasks = assign_split(chosen, max(min(holdout / len(chosen), 0.99), low), ts.seed, ts.near_duplicate)
    if own:
        tasks = [(c, "holdout") for c in own.kept] + tasks
        extra += own_lines(ts, own, sel)
    models = sorted({c.provenance.get("generator", "?") for c in chosen})
    note = holdout_note(exp, tasks)
    if note:
        extra.append(note)
    header = [f"Generated by `python -m experiments.run +sweep=generate_tasks tasks.name={ts.name} tasks.count={ts.count}`"
              f" ({', '.join(models)}; prompt {chosen[0].provenance.get('prompt_version')}): "
              f"{ts.description.strip()[:200]}",
              f"{len(cands)} generated, {len(sel.dropped)} dropped as duplicates (paraphrases: MiniLM cosine >= "
              f"{ts.near_duplicate:g}); the split was assigned before any run, stratified by type and topic.",
              "Generated tasks: read and edit them before the first run; each task's provenance names its model, "
              "prompt version and seed."]
    if ts.headroom:
        header.append(f"Headroom screen: {scr.screened} screened by one baseline run each; {len(scr.failed)} dropped "
                      f"for failing, {len(scr.ceiling)} at the ceiling (composite >= {ts.headroom_ceiling:g}).")
    if own:
        header.append(f"Your own tasks (tasks.own_holdout=true): the {n_own} from {Path(ts.examples).name}, all in "
                      f"the holdout; each one's provenance names its file and line.")
    text = benchmark_yaml(ts.name, ts.description.strip()[:200], header, tasks)
    path = write_benchmark(exp, text)
    extra += [f"generator calls in this run: {made} in {seconds:.0f} s ({len(cands)} tasks generated in all)"]
    read = f"asked: {want}; generated: {len(cands)}" + (f"; your own: {len(examples)}" if own else "")
    for line in summary_lines("generate", read, sel, tasks, path, extra):
        out(line)
    return path


def own_lines(ts: Any, own: Selection, sel: Selection) -> list[str]:
    """The report's lines on the user's own holdout: how many, how many of their rows were duplicates of each other,
    and how many generated tasks were dropped as near-duplicates of one of them (none of those can train)."""
    mine = {c.id for c in own.kept}
    near_own = sum(1 for d in sel.dropped if d.kept_id in mine)
    return [f"own holdout: {len(own.kept)} of your own task(s) from {ts.examples}, all in the holdout "
            f"({len(own.dropped)} of your rows dropped as duplicates of each other); {near_own} generated task(s) "
            f"dropped as duplicates of your own (no generated train task repeats one)"]


def calibration_mismatch(exp: ExperimentConfig) -> str | None:
    """A line when tasks.calibration names a calibration measured under another fingerprint (backend, evaluator,
    harness config or benchmark) than this command's: its noise may not be this setup's. None when it matches or
    none is named (the one found by fingerprint matches by construction)."""
    import dataclasses

    from experiments.config import backend_identity, fingerprint_diff, load_tasks
    from experiments.storage import calibration_fingerprint
    from harness.inference import make_roles

    named = str(exp.task_supply.calibration or "").strip()
    if not named:
        return None
    cal, _ = stored_calibration(exp)
    roles = make_roles(dataclasses.replace(exp.backend, cache=False), exp.results_dir)
    diff = fingerprint_diff(cal.fingerprint, calibration_fingerprint(exp, backend_identity(roles),
                                                                     load_tasks(exp.benchmark)))
    if not diff:
        return None
    return (f"warning: tasks.calibration={named} was measured under another fingerprint than this command's "
            f"({len(diff)} field(s) differ: {'; '.join(diff[:3])}{'; ...' if len(diff) > 3 else ''}); the sizing "
            f"uses its noise all the same: calibrate this setup (+sweep=calibrate) for a size that fits it")
