"""`+sweep=generate_tasks tasks.name=NAME tasks.count=N tasks.description=TEXT`: tasks written by a generator model.

Each call asks one generator model (tasks.generator_models, in turn; by default the backend's planner model) for a
batch of tasks as a JSON schema, as every structured call of the harness does, under one topic angle and one
persona (the angles and personas in turn: tasks that differ in more than wording). A reply is checked field by
field; a batch with no usable task is skipped in one line. Every call is journalled, one line each, in
results_dir/tasks/NAME.partial.jsonl (the tasks a usable batch gave, or why a batch was skipped): a killed run
resumes from it, and the benchmark YAML is written only once, whole (experiments.tasks._write)."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from experiments.config import ConfigError, ExperimentConfig
from harness.compose import model_family
from harness.config import TASK_TYPES
from harness.inference import BackendError

from ._rows import Candidate, infer_type, read_rows, slug_id

log = logging.getLogger(__name__)

PROMPT_VERSION = "tasks-gen-1"  # bumped when the prompt or schema changes (each task's provenance names it)
ANGLES = ("common pitfalls", "choosing between alternatives", "getting started", "performance", "testing and "
          "debugging", "security and safety", "tooling and libraries", "design decisions", "migration and upgrades",
          "operations in production")
PERSONAS = ("a beginner", "a senior engineer", "a team lead choosing a tool", "a student writing a report",
            "an operations engineer", "a reviewer auditing code")
SYSTEM = ("You write benchmark tasks for a research assistant that answers in Markdown. Each task is one "
          "self-contained request a user could type. Reply with JSON only, following the schema.")
MAX_TERMS = 5
# Generator calls in a row that add no kept task (every task a duplicate of one kept) before a run stops with what
# it has: the generator has run out of new tasks for this description, and more calls only cost time.
STALL_CALLS = 10
# the request echoed back as a task ("Write 5 different tasks with json": a small model does it)
ECHO = re.compile(r"\b(?:write|generate|create|make)\b.{0,30}\btasks?\b", re.IGNORECASE)


class GeneratorFailed(BackendError):
    """The generator gave no usable batch in tasks.max_failed_batches calls in a row: the run could not answer
    (exit 3); the accepted batches are journalled and the same command resumes."""


def schema(n: int) -> dict[str, Any]:
    item = {"type": "object", "properties": {
        "task": {"type": "string"},
        "task_type": {"type": "string", "enum": list(TASK_TYPES)},
        "expected_count": {"type": ["integer", "null"]},
        "required_terms": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_TERMS},
        "topic": {"type": "string"},
        "persona": {"type": "string"}},
        "required": ["task", "task_type", "expected_count", "required_terms", "topic", "persona"]}
    return {"type": "object", "properties": {"tasks": {"type": "array", "items": item, "minItems": 1, "maxItems": n}},
            "required": ["tasks"]}


@dataclasses.dataclass(frozen=True)
class Generator:
    """One generator model: the LLM and the name its tasks' provenance gives."""

    name: str
    llm: Any


def generators(exp: ExperimentConfig, out: Callable[[str], None]) -> list[Generator]:
    """tasks.generator_models (empty: the backend's planner model), each built through the backend registry as the
    planner role, with a warning when one shares a family with the producer or the judge: tasks a model wrote
    favour that model."""
    from harness.inference import make_llm

    b = exp.backend
    models = [str(m) for m in exp.task_supply.generator_models] or [b.planner_model]
    judged = {"producer": served_name(b, b.producer_model), "judge": served_name(b, b.evaluator_model)}
    out_list = []
    for m in models:
        m = served_name(b, m)
        same = [f"the {role} ({name})" for role, name in judged.items() if model_family(name) == model_family(m)]
        if same:
            out(f"warning: generator {m} is of the {model_family(m)!r} family, as {' and '.join(same)}: tasks a "
                f"model writes favour that model; set tasks.generator_models to another family's model(s)")
        llm = make_llm(dataclasses.replace(b, planner_model=m), "planner")
        out_list.append(Generator(f"{b.kind}:{m}", llm))
    return out_list


def served_name(backend: Any, model: str) -> str:
    """The model a role's name stands for on this backend: the embedded backend serves every role from one GGUF
    file when backend.embedded_model_path (or HARNESS_EMBEDDED_MODEL) names one, so that file's name is the model
    a task's provenance and the family warning must name, not the configured default's."""
    if getattr(backend, "kind", None) == "embedded":
        path = getattr(backend, "embedded_model_path", None) or os.environ.get("HARNESS_EMBEDDED_MODEL")
        if path:
            return Path(str(path)).name
    return str(model)


def prompt(exp: ExperimentConfig, n: int, angle: str, persona: str, examples: Sequence[Candidate],
           corpus: tuple[str, str] | None) -> list[dict[str, str]]:
    ts = exp.task_supply
    lines = [f"Write {n} different tasks about: {ts.description.strip()}",
             f"Angle: {angle}. Written as {persona} would ask.",
             "Mix the task types: enumerated (asks for a number of items, e.g. 'List 5 ...'; expected_count is that "
             "number), best_practices ('Give best practices for ...'; expected_count null), research (a question "
             "that needs explanation or comparison; expected_count null).",
             f"required_terms: 1 to {MAX_TERMS} words or API names a good answer must contain."]
    if examples:
        lines.append("Examples of the kind of task wanted (do not repeat them):")
        lines += [f"- {e.task}" for e in examples[:5]]
    if corpus is not None:
        name, text = corpus
        lines.append(f"Base every task on this document ({name}); take required_terms from its words:")
        lines.append(text)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def parse_batch(text: str, *, corpus_text: str = "", limit: int | None = None) -> tuple[list[dict[str, Any]], str]:
    """(usable tasks as plain dicts, why the rest was dropped). A reply that is not the schema's JSON gives none; a
    task that repeats the request itself ("Write 5 different tasks about ...") is none; past `limit` usable tasks
    (the number the call asked for) the rest of a reply is left out and counted."""
    from harness.text import JSONParseError, parse_json

    try:
        data, _ = parse_json(text)
    except JSONParseError as exc:
        return [], f"not JSON ({str(exc)[:80]})"
    items = data.get("tasks") if isinstance(data, dict) else data if isinstance(data, list) else None
    if not isinstance(items, list):
        return [], "no `tasks` list"
    good, why = [], []
    for it in items:
        if not isinstance(it, dict) or not isinstance(it.get("task"), str):
            why.append("an item without a task text")
            continue
        task = " ".join(it["task"].split())
        if len(task) < 15 or len(task.split()) < 4 or len(task) > 600:
            why.append(f"task {task[:30]!r} is not one request of 4+ words")
            continue
        if ECHO.search(task):
            why.append(f"task {task[:30]!r} repeats the request")
            continue
        # the text decides what the evaluator checks: a task that asks for N items is enumerated with N (whatever
        # the model called it), and one that states no number is not (its count would be one the user never sees)
        tt, count = infer_type(task)
        if tt != "enumerated" and it.get("task_type") in ("best_practices", "research"):
            tt = it["task_type"]
        terms = [" ".join(str(t).split()) for t in (it.get("required_terms") or []) if isinstance(t, str)]
        terms = [t for t in terms if 0 < len(t) <= 40]
        if corpus_text:
            terms = [t for t in terms if t.lower() in corpus_text.lower()]
        terms = list(dict.fromkeys(terms))[:MAX_TERMS]
        good.append({"task": task, "task_type": tt, "expected_count": count, "required_terms": terms,
                     "topic": str(it.get("topic") or "")[:80], "persona": str(it.get("persona") or "")[:80]})
    if limit is not None and len(good) > limit:
        why.append(f"{len(good) - limit} task(s) past the {limit} asked")
        good = good[:limit]
    return good, "; ".join(dict.fromkeys(why))


def corpus_docs(folder: str) -> list[tuple[str, str]]:
    """(file name, its first 1500 characters) of each .txt / .md file of the corpus folder, sorted by name."""
    p = Path(folder).expanduser()
    if not p.is_dir():
        raise ConfigError(f"tasks.corpus={folder!r} is not a folder; expected a folder of .txt / .md files")
    docs = []
    for f in sorted(p.rglob("*")):
        if f.suffix.lower() in (".txt", ".md") and f.is_file():
            text = f.read_text(encoding="utf-8", errors="replace").strip()
            if text:
                docs.append((f.name, text[:1500]))
    if not docs:
        raise ConfigError(f"tasks.corpus={folder!r} has no .txt or .md file with text; expected at least one")
    return docs


def journal_path(exp: ExperimentConfig) -> Path:
    return Path(exp.results_dir) / "tasks" / f"{exp.task_supply.name}.partial.jsonl"


def spec_of(exp: ExperimentConfig) -> dict[str, Any]:
    """What the journal's tasks were asked under: a rerun under another one would mix two task sets."""
    ts = exp.task_supply
    return {"description": ts.description.strip(), "examples": ts.examples, "corpus": ts.corpus,
            "batch": ts.batch, "seed": ts.seed, "prompt_version": PROMPT_VERSION}


# what journalled() reads of a record and of each of its tasks, with the types it needs
_RECORD_KEYS = {"spec": dict, "call": int, "model": str, "seed": int, "angle": str, "persona": str, "tasks": list}
_TASK_KEYS = {"task": str, "task_type": str}


def read_journal(exp: ExperimentConfig) -> list[dict[str, Any]]:
    """The journal's records; ConfigError when they were asked under another description, corpus or seed, or (one
    line naming the file and line) when a record lacks what a resume reads. A torn last line (a kill mid-write) is
    skipped, as harness.stores.read_jsonl does."""
    import json

    path = journal_path(exp)
    records = []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []
    last = max((i for i, ln in enumerate(lines, 1) if ln.strip()), default=0)
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if n == last:
                continue
            raise ConfigError(f"{path}:{n}: not a JSON record; expected the generator's journal (delete the file to "
                              f"start afresh)") from None
        problem = _journal_problem(rec)
        if problem:
            raise ConfigError(f"{path}:{n}: {problem}; expected the generator's journal record (delete the file to "
                              f"start afresh)")
        records.append(rec)
    want = spec_of(exp)
    for r in records[:1]:
        if r.get("spec") != want:
            diff = [k for k in want if (r.get("spec") or {}).get(k) != want[k]]
            raise ConfigError(f"{path} holds tasks generated under another {', '.join(diff) or 'setting'}; run with "
                              f"the same settings to resume, or another tasks.name (or delete that file) to start "
                              f"afresh")
    return records


def _journal_problem(rec: Any) -> str | None:
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not an object"
    for key, kind in _RECORD_KEYS.items():
        if not isinstance(rec.get(key), kind) or (kind is int and isinstance(rec.get(key), bool)):
            return f"`{key}` is {'missing' if key not in rec else repr(rec[key])[:40]}"
    if not isinstance(rec["spec"].get("prompt_version"), str):
        return "`spec.prompt_version` is missing"
    for i, t in enumerate(rec["tasks"]):
        if not isinstance(t, dict):
            return f"tasks[{i}] is not an object"
        for key, kind in _TASK_KEYS.items():
            if not isinstance(t.get(key), kind) or not str(t.get(key)).strip():
                return f"tasks[{i}].{key} is {'missing' if key not in t else repr(t[key])[:40]}"
        if t["task_type"] not in TASK_TYPES:
            return f"tasks[{i}].task_type={t['task_type']!r} is not one of {', '.join(TASK_TYPES)}"
    return None


def journalled(records: Sequence[dict[str, Any]]) -> list[Candidate]:
    """The generated tasks of the journal's usable batches, in order, as candidates with their provenance."""
    out = []
    for r in records:
        for i, t in enumerate(r.get("tasks") or ()):
            prov = {"generator": r["model"], "prompt_version": r["spec"]["prompt_version"], "seed": r["seed"],
                    "call": r["call"], "item": i, "angle": r["angle"], "persona": r["persona"]}  # the persona asked
            out.append(Candidate(slug_id(t["task"]), t["task"], t["task_type"], t.get("expected_count"),
                                 tuple(t.get("required_terms") or ()), None, t.get("topic") or r["angle"], prov))
    return out


def generate(exp: ExperimentConfig, want: int, keep: Callable[[list[Candidate]], int],
             out: Callable[[str], None]) -> tuple[list[Candidate], int, float]:
    """Call the generators until `keep(candidates)` (the tasks kept after deduplication) reaches `want`, journalling
    each call; (candidates, calls made in this process, seconds). Resumes from the journal. GeneratorFailed after
    tasks.max_failed_batches unusable replies in a row; a budget of 4x the calls `want` needs (plus that many) per
    run ends it with what was kept (a rerun, as after a failure, gets a budget of its own), and so do STALL_CALLS
    calls in a row that add no kept task."""
    from harness.stores import append_jsonl


    ts = exp.task_supply
    path = journal_path(exp)
    records = read_journal(exp)
    cands = journalled(records)
    examples = read_rows(ts.examples) if str(ts.examples or "").strip() else []
    docs = corpus_docs(ts.corpus) if str(ts.corpus or "").strip() else []
    gens: list[Generator] | None = None
    calls = len(records)
    budget = 4 * -(-want // ts.batch) + ts.max_failed_batches
    failed_run = 0  # a rerun gives the generator tasks.max_failed_batches fresh calls
    stalled, have = 0, keep(cands)  # calls in a row that added no kept task
    made, t0 = 0, time.monotonic()
    if cands:
        out(f"resuming from {path}: {len(records)} call(s) journalled, {len(cands)} task(s) generated")
    while have < want:
        if stalled >= STALL_CALLS:
            out(f"stopped: the last {stalled} generator calls added no new task (each one a duplicate of a task kept): "
                f"{have} of {want} tasks kept; the generator has run out of new tasks for this description: give "
                f"tasks.corpus / tasks.examples or another generator model for variety")
            break
        if failed_run >= ts.max_failed_batches:
            raise GeneratorFailed(f"the generator gave no usable task in {failed_run} call(s) in a row (last: "
                                  f"{records[-1].get('skipped', '?')}); {have} task(s) kept so far are "
                                  f"journalled in {path}")
        if made >= budget:
            out(f"stopped after {made} generator calls in this run: {have} of {want} tasks kept (the generator repeats "
                f"itself: raise tasks.batch or give tasks.corpus / tasks.examples for variety)")
            break
        if gens is None:
            gens = generators(exp, out)
        g = gens[calls % len(gens)]
        angle, persona = ANGLES[calls % len(ANGLES)], PERSONAS[(calls // len(ANGLES) + calls) % len(PERSONAS)]
        doc = docs[calls % len(docs)] if docs else None
        seed = ts.seed * 100003 + calls
        n = min(ts.batch, max(want - have, 1) + 1)
        reply = g.llm.chat(prompt(exp, n, angle, persona, examples, doc), schema=schema(n), temperature=0.9,
                           max_tokens=160 * n + 120, seed=seed)
        made += 1
        tasks, why = parse_batch(reply.text, corpus_text=doc[1] if doc else "", limit=n)
        rec = {"spec": spec_of(exp), "call": calls, "model": g.name, "seed": seed, "angle": angle,
               "persona": persona, "tasks": tasks}
        if not tasks:
            rec["skipped"] = why or "no task"
            out(f"generator call {calls + 1} ({g.name}): unusable reply ({rec['skipped'][:160]}); skipped")
            failed_run += 1
        else:
            failed_run = 0
        append_jsonl(path, rec)
        records.append(rec)
        calls += 1
        cands = journalled(records)
        now = keep(cands)
        stalled = 0 if now > have else stalled + 1
        have = now
        if tasks:
            out(f"generator call {calls} ({g.name}, {angle}, {persona}): {len(tasks)} task(s); kept so far "
                f"{have} of {want}; elapsed {time.monotonic() - t0:.0f} s")
    return cands, made, time.monotonic() - t0
