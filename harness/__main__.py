"""`python -m harness "<task>" [group=option ...] [key=value ...]`: run one task through the harness and print a
summary block.

The command line composes the same Hydra config as `python -m experiments.run` (conf/config.yaml, the groups in
conf/, key=value overrides, validated the same way), so a variant a sweep or an A/B tested runs by hand exactly as
it was tested. The flags are aliases: each becomes the override it stands for (--rounds 2 -> wiggum.max_rounds=2)
ahead of the overrides typed beside the task, so a typed override wins. Hydra is imported only to run a task:
--help and the usage errors stay light.

Exceptions become one-line messages here, at the CLI edge, and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

from harness.backends import quiet_http_logs
from harness.stores import StoreError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# A Hydra override: key=value, +key=value, ++key=value, ~key[=value] (the key may be dotted, e.g. wiggum.max_rounds).
# A task sentence has a space or another non-key character before its first '=', so it stays the task.
OVERRIDE = re.compile(r"(?:\+\+?)?[A-Za-z_][\w./@-]*=|~[A-Za-z_][\w./@-]*(?:=|$)", re.DOTALL)

# flag (argparse dest) -> the override key(s) its value sets
VALUE_FLAGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("backend", ("backend.kind",)),
    ("host", ("backend.host",)),
    ("base_url", ("backend.base_url",)),
    ("model", ("backend.planner_model", "backend.producer_model", "backend.evaluator_model", "backend.compressor_model")),
    ("results_dir", ("results_dir",)),
    ("search", ("search.provider",)),
    ("rounds", ("wiggum.max_rounds",)),
    ("mode", ("orchestrator.mode",)),
)
# switch (argparse dest) -> the override it stands for
SWITCH_FLAGS: tuple[tuple[str, str], ...] = (
    ("skip_prior_knowledge", "planner.skip_prior_knowledge=true"),
    ("panel", "panel.enabled=true"),
    ("no_memory", "memory.enabled=false"),
    ("no_cache", "backend.cache=false"),
)
HELP_GROUPS = ("backend", "planner", "synth", "evaluator")  # the conf/ groups that change a harness run

USAGE = 'python -m harness [options] "TASK" [group=option ...] [key=value ...]'
EPILOG = """\
overrides (composed from conf/ as `python -m experiments.run` composes them; see conf/config.yaml):
  group=option       pick a conf/<group>/<option>.yaml, e.g. synth=concise planner=single_pass backend=ollama
  key=value          set one field, e.g. wiggum.max_rounds=1 synth.temperature=0.2 backend.host=http://h:11434
  'key="a value"'    quote a value that holds spaces, commas or '='
  groups and their options:
{groups}
  Each flag above is an alias of the override it names; an override typed beside the task wins over a flag.
  A bad override is one line on stderr and exit status 2; nothing is run or written.
  The run record (runs.jsonl) keeps the overrides used under config_overrides.

the task:
  The task is the one argument that is not an override. A task that itself looks like key=value goes
  after --task or after --:  python -m harness synth=concise -- "x=1: explain this assignment"

environment:
  HARNESS_BACKEND, HARNESS_RESULTS_DIR, HARNESS_SKIP_PRIOR_KNOWLEDGE, RESEARCH_CACHE win over conf/ but not
  over the command line (e.g. --results-dir or results_dir=... beats HARNESS_RESULTS_DIR). OLLAMA_HOST and
  HARNESS_EMBEDDED_MODEL apply when backend.host / backend.embedded_model_path are unset.

examples:
  python -m harness "List 5 best practices for Python asyncio" synth=concise planner=single_pass
  python -m harness "Compare uv and pip" backend=ollama wiggum.max_rounds=1
  python -m harness --plan-preview "Research A and B, then write a guide" orchestrator.mode=always
  python -m harness --check backend=ollama    # before a night's run: models present, windows, one call each
"""


def conf_options(groups: Sequence[str] = HELP_GROUPS) -> dict[str, list[str]]:
    """group -> option names, read off conf/<group>/*.yaml (no Hydra import: --help stays fast)."""
    root = Path(__file__).resolve().parent.parent / "conf"
    return {g: sorted(p.stem for p in (root / g).glob("*.yaml")) for g in groups if (root / g).is_dir()}


def build_parser() -> argparse.ArgumentParser:
    groups = "".join(f"    {g + ':':<16} {', '.join(opts)}\n" for g, opts in conf_options().items())
    p = argparse.ArgumentParser(
        prog="python -m harness",
        usage=USAGE,
        description="Plan, research, synthesize and evaluate one task with the local research harness.",
        epilog=EPILOG.format(groups=groups.rstrip("\n")),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("words", nargs="*", metavar="TASK | OVERRIDE",
                   help='the task, e.g. "List 5 best practices for Python asyncio and save to output.md", and any '
                        "group=option / key=value overrides")
    p.add_argument("--task", default=None, help="the task, when it looks like an override (also: after --)")
    p.add_argument("--backend", default=None, help="auto (default) | embedded | ollama | openai; = backend.kind=...")
    p.add_argument("--host", default=None, help="Ollama host (default OLLAMA_HOST or http://127.0.0.1:11434); = backend.host=...")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible base URL (vLLM, llama.cpp server, LM Studio); = backend.base_url=...")
    p.add_argument("--model", default=None, help="use this model for every role; = backend.<role>_model=... for the four roles")
    p.add_argument("--results-dir", default=None, help="where runs.jsonl, traces/, outputs/, caches live (default results); = results_dir=...")
    p.add_argument("--skip-prior-knowledge", action="store_true", help="= planner.skip_prior_knowledge=true (HARNESS_SKIP_PRIOR_KNOWLEDGE=1)")
    p.add_argument("--search", default=None, choices=["auto", "ddgs", "local"], help="search provider; = search.provider=...")
    p.add_argument("--rounds", type=int, default=None, help="wiggum rounds (default 3); = wiggum.max_rounds=...")
    p.add_argument("--panel", action="store_true", help="run the persona panel after the wiggum loop; = panel.enabled=true")
    p.add_argument("--no-memory", action="store_true", help="neither recall nor store observations; = memory.enabled=false")
    p.add_argument("--no-cache", action="store_true", help="bypass the LLM response cache; = backend.cache=false")
    p.add_argument("--plan-preview", action="store_true", help="show the plan graph and the order its steps will run in; execute nothing")
    p.add_argument("--check", action="store_true",
                   help="readiness check: each role's model present, digest, context, window, thinking, one timed call, "
                        "judge vs producer family; exit 2 with one line per problem; writes nothing")
    p.add_argument("--mode", default=None, choices=["off", "auto", "always"], help="orchestrator plan-first mode; = orchestrator.mode=...")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


# -- the command line -> (task, overrides) -----------------------------------------------------------------


class UsageError(ValueError):
    """A command line that names no single task; the message is one line."""


def split_words(words: Sequence[str], task_option: str | None = None, literal: Sequence[str] = ()) -> tuple[str | None, list[str]]:
    """(task, overrides): the words that look like overrides, and the one task text among the rest, --task and
    the words after `--` (joined). None when no task was given; UsageError when more than one was."""
    overrides = [w for w in words if OVERRIDE.match(w)]
    texts = [w for w in words if not OVERRIDE.match(w)]
    if task_option is not None:
        texts.append(task_option)
    if literal:
        texts.append(" ".join(literal))
    if len(texts) > 1:
        shown = ", ".join(repr(t) for t in texts[:3]) + (", ..." if len(texts) > 3 else "")
        raise UsageError(f"{len(texts)} task texts ({shown}); expected one: quote the task as one argument"
                         f" (overrides look like key=value)")
    return (texts[0] if texts else None), overrides


def quote(value: str) -> str:
    """A string as a single-quoted Hydra override value that composes back to exactly itself."""
    escaped = re.sub(r"(\\+)(?='|\$\{|$)", lambda m: m.group(1) * 2, value)  # Hydra unescapes these runs only
    return "'" + escaped.replace("'", "\\'").replace("${", "\\${") + "'"


def flag_overrides(args: argparse.Namespace) -> list[str]:
    """The overrides the given flags stand for, in VALUE_FLAGS / SWITCH_FLAGS order."""
    out: list[str] = []
    for dest, keys in VALUE_FLAGS:
        value = getattr(args, dest)
        if value is not None and value != "":
            out += [f"{k}={value if isinstance(value, int) else quote(value)}" for k in keys]
    out += [override for dest, override in SWITCH_FLAGS if getattr(args, dest)]
    return out


def compose_harness_config(overrides: Sequence[str], environ: Mapping[str, str] | None = None):
    """The HarnessConfig `python -m experiments.run <overrides>` would hand the harness, environment applied
    (command line first). Raises harness.config.ConfigError (one line) on a bad override or value."""
    from harness.compose import command_line_environ, harness_config

    return harness_config(overrides, command_line_environ(overrides, os.environ if environ is None else environ))


def summary_block(result) -> str:
    rec = result.record
    llm = rec.get("llm", {})
    calls = sum(int(u.get("calls", 0)) for u in llm.values())
    tokens = sum(int(u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)) for u in llm.values())
    scores = rec.get("scores") or {}
    wig = rec.get("wiggum") or {}
    quality = (rec.get("research") or {}).get("quality") or {}
    steps = rec.get("steps") or []
    parallel = rec.get("parallel") or {}
    stage_s = rec.get("stage_s") or {}
    # parallel step spans overlap: count their wall time once, not their sum
    wall = sum(v for k, v in stage_s.items() if not k.startswith("subtask ")) + float(parallel.get("steps_wall_s") or 0)
    lines = [
        "== harness run ==",
        f"run_id:      {result.run_id}",
        f"status:      {result.status}" + (f" ({result.error})" if result.error else ""),
        f"backend:     {', '.join(f'{k}={v}' for k, v in (rec.get('backend') or {}).items())}",
        f"task_type:   {(rec.get('plan') or {}).get('task_type')}",
    ]
    if rec.get("mode"):
        lines.append(f"mode:        {rec['mode']} ({(rec.get('route') or {}).get('reason')})")
    if steps:
        done = ", ".join(f"{s['id']} {s['status']} {s['wall_s']:.1f}s" for s in steps)
        lines.append(f"steps:       {done}; had_errors={rec.get('had_errors')}")
        lines.append(f"parallel:    wall={parallel.get('steps_wall_s')}s sum={parallel.get('steps_sum_s')}s"
                     f" speedup={parallel.get('speedup')} max_parallel={parallel.get('max_parallel')}")
    steps_llm = rec.get("llm_steps") or {}
    step_calls = sum(int(u.get("calls", 0)) for u in steps_llm.values())
    step_tokens = sum(int(u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)) for u in steps_llm.values())
    lines += [
        f"research:    rounds={rec.get('research', {}).get('rounds')} searches={rec.get('research', {}).get('search_calls')}"
        f" confidence={quality.get('confidence')} degraded={rec.get('research', {}).get('degraded_reason')}",
        f"score:       {scores.get('composite')}  wiggum={'PASS' if wig.get('passed') else 'FAIL'}"
        f" rounds={len(wig.get('rounds', []))}",
        f"llm:         calls={calls} tokens={tokens} cache={rec.get('cache')}"
        + (f" (+ steps: calls={step_calls} tokens={step_tokens})" if steps_llm else ""),
        f"output:      {result.output_path}",
        f"trace:       {result.trace_path}",
        f"wall_s:      {wall:.1f} (stages)",
    ]
    lines += [f"WARNING:     {w}" for w in rec.get("graph_warnings") or []]
    if result.smoke:
        from harness.inference import SMOKE_LABEL

        lines.append(f"NOTE:        {rec.get('smoke_label') or SMOKE_LABEL}")
    return "\n".join(lines)


def check_command(task: str | None, overrides: list[str]) -> int:
    """--check: the readiness of the configured backend (harness.backends.readiness), printed; exit 2 with one line per
    problem on stderr. Nothing is written (no results folder, no cache)."""
    if task is not None:
        print(f"error: --check takes no task (got {task[:60]!r}); give only overrides", file=sys.stderr)
        return EXIT_USAGE
    try:
        cfg = compose_harness_config(overrides)
    except ValueError as exc:
        print(f"config error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return EXIT_USAGE
    from harness.backends.readiness import check_readiness

    try:
        found = check_readiness(cfg.backend)
    except ValueError as exc:  # a bad backend.num_ctx / backend.think value
        print(f"config error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print("\n".join(found.lines()))
    for problem in found.problems:
        print(f"problem: {problem}", file=sys.stderr)
    return EXIT_OK if found.ready else EXIT_USAGE


def not_utf8(text: str) -> str:
    """Where a command-line string is not UTF-8 ("" when it is): Python hands undecodable argv bytes over as lone
    surrogates (PEP 383), which no file, store or prompt can take."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        ch = ord(text[exc.start])
        what = f"byte 0x{ch - 0xDC00:02x}" if 0xDC80 <= ch <= 0xDCFF else f"code point U+{ch:04X}"
        return f"{what} at character {exc.start + 1}"
    return ""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    literal: list[str] = []
    if "--" in argv:  # everything after -- is the task, even when it looks like key=value
        cut = argv.index("--")
        argv, literal = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_intermixed_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    quiet_http_logs()  # -v shows the harness's INFO lines, not httpx's one per model call
    try:
        task, typed = split_words(args.words, args.task, literal)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.check:
        return check_command(task, [*flag_overrides(args), *typed])
    if task is None or not task.strip():
        hint = " (a task that looks like key=value goes after --task or --)" if task is None and typed else ""
        print(f"error: task is empty: give the task as the first argument{hint}", file=sys.stderr)
        return EXIT_USAGE
    bad = not_utf8(task)
    if bad:
        print(f"error: the task is not UTF-8 text ({bad}); give it in UTF-8 (nothing was run or written)",
              file=sys.stderr)
        return EXIT_USAGE
    from harness.agent import parse_skills

    if not parse_skills(task)[0].strip():
        print(f"error: task is empty after the skill tokens {task.strip()!r}: add the task after them", file=sys.stderr)
        return EXIT_USAGE
    overrides = [*flag_overrides(args), *typed]
    try:
        try:
            cfg = compose_harness_config(overrides)
        except ValueError as exc:  # ConfigError (and Hydra's own ValueErrors): bad override, nothing run or written
            print(f"config error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
            return EXIT_USAGE
        from harness.backends import preflight

        preflight(cfg.backend)  # server down / model missing: one line now, not retries and a failed run later
        if args.plan_preview:
            from harness.orchestrator import plan_preview

            print(plan_preview(task, cfg))
            return EXIT_OK
        from evaluators import HARNESS_EVALUATOR  # the command line hands the harness its scorer
        from harness.orchestrator import run_task

        t0 = time.perf_counter()
        result = run_task(task, cfg, evaluator=HARNESS_EVALUATOR, extra_record={"config_overrides": overrides})
        print(summary_block(result))
        print(f"elapsed_s:   {time.perf_counter() - t0:.1f}")
        return EXIT_OK if result.status == "ok" else EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except StoreError as exc:  # a damaged or unwritable store, named (harness.stores): the run stops
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # the CLI edge: one line, non-zero exit
        if args.verbose:
            raise
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
