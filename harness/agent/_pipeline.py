"""`Harness`, the single-focus pipeline: its stages run as `prepare` (skills, memory, plan, research) and `finish`
(synthesis, wiggum, panel, memory, the run record), both under one trace in `run`; and `output_name_for`, the
file a run writes."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import Any, Mapping

from harness.config import HarnessConfig
from harness.inference import Roles, context_overflow, make_roles
from harness.planner import make_plan
from harness.research import gather_research, memory_match
from harness.review import Evaluator, NoEvaluator
from harness.stores import append_jsonl, atomic_write_text, claim_output
from harness.tracing import Tracer, current_tracer, new_run_id, use_tracer

from ._prepared import _NO_RESEARCH, Prepared, _empty_prepared
from ._record import RunResult, run_record
from ._skills import (apply_post_synthesis, auto_activate, parse_skills_detailed, post_wiggum_flags,
                      pre_synthesis_injections, research_rounds_bonus)

_SAVE_TO = re.compile(r"\b(?:save|write|store|output)\b[^.\n]*?\b(?:to|as|in|into)\s+[`'\"]?([\w./-]+\.(?:md|markdown|txt))\b", re.I)


def output_name_for(task: str) -> str:
    """The file the task asks for ("... save to output.md"), else a slug of the task."""
    m = _SAVE_TO.search(task)
    if m:
        return Path(m.group(1)).name
    slug = re.sub(r"[^a-z0-9]+", "-", task.lower()).strip("-")[:60] or "output"
    return f"{slug}.md"


class Harness:
    """One configured harness: backends, memory and search built once, reused across runs."""

    def __init__(self, cfg: HarnessConfig, roles: Roles | None = None, *, evaluator: Evaluator | None = None,
                 memory=None, search=None) -> None:
        self.cfg = cfg
        self.evaluator = evaluator  # the scorer (evaluators.HARNESS_EVALUATOR); None: this harness only plans
        self.roles = roles if roles is not None else make_roles(cfg.backend, cfg.results_dir)
        self._memory = memory
        self._search = search

    # -- lazily built edges --------------------------------------------------------------------------
    @property
    def memory(self):
        if self._memory is None and self.cfg.memory.enabled:
            from harness.memory import Memory

            self._memory = Memory(self.cfg.memory, self.cfg.results_path)
        return self._memory

    @property
    def search(self):
        if self._search is None:
            from harness.research.search import make_search

            self._search = make_search(self.cfg.search, self.cfg.results_dir)
        return self._search

    # -- lifecycle -----------------------------------------------------------------------------------
    def prepare(self, task: str, *, with_research: bool = True) -> Prepared:
        """Stages 1-5: skills, memory, plan, auto-activation, research. Spans go to the current tracer.

        with_research=False stops after planning (the orchestrator decides first whether to decompose);
        `complete_research` then fills the research in.
        """
        if not task or not task.strip():
            raise ValueError("task is empty: expected a non-empty task string")
        tracer = current_tracer()
        calls0 = tracer.total_calls()
        timings: dict[str, float] = {}

        def timed(name: str):
            return _Timed(tracer, name, timings)

        with timed("parse_skills"):
            clean, active, unknown = parse_skills_detailed(task)
        if not clean.strip():
            raise ValueError(f"task is empty after the skill tokens: {task.strip()!r}; expected a task after them")
        memory_context, titles, match = "", (), 0.0
        with timed("memory.get_context"):
            if self.memory is not None:
                observations = self.memory.get_context(clean)
                memory_context = self.memory.format_context(observations)
                titles = tuple(o.title for o in observations)
                match = memory_match(clean, (o.task for o in observations))
        with timed("make_plan"):
            # the run's seed: A/B replications sample the plan too (the prior-knowledge pass is a planning change)
            strong = match > 0 and match >= self.cfg.research.strong_memory_match
            plan = make_plan(clean, self.roles.planner, memory_context=memory_context, cfg=self.cfg.planner,
                             seed=self.cfg.seed, memory_strong=strong)
        with timed("auto_activate"):
            active = auto_activate(clean, plan, active)
        prepared = Prepared(
            task=task,
            clean_task=clean,
            skills=tuple(sorted(active)),
            unknown_skills=tuple(unknown),
            memory_context=memory_context,
            memory_titles=titles,
            plan=plan,
            research=_NO_RESEARCH,
            timings=timings,
            llm_calls=tracer.total_calls() - calls0,
            memory_match=round(match, 3),
        )
        return self.complete_research(prepared) if with_research else prepared

    def complete_research(self, prepared: Prepared) -> Prepared:
        """Stage 5, gather_research, on a prepared task."""
        tracer = current_tracer()
        calls0 = tracer.total_calls()
        timings = dict(prepared.timings)
        with _Timed(tracer, "gather_research", timings):
            research_cfg = self.cfg.research
            bonus = research_rounds_bonus(frozenset(prepared.skills))
            if bonus:
                research_cfg = dataclasses.replace(research_cfg, max_rounds=research_cfg.max_rounds + bonus)
            research = gather_research(
                prepared.clean_task,
                prepared.plan,
                search=self.search,
                compressor=self.roles.compressor,
                cfg=research_cfg,
                cache_dir=self.cfg.results_path / "research_cache",
                memory_match=prepared.memory_match,
            )
        return dataclasses.replace(
            prepared, research=research, timings=timings, llm_calls=prepared.llm_calls + tracer.total_calls() - calls0
        )

    def finish(
        self,
        prepared: Prepared,
        *,
        instructions: Mapping[str, str] | None = None,
        run_id: str | None = None,
        criteria: Mapping[str, Any] | None = None,
        output_name: str | None = None,
        extra_record: Mapping[str, Any] | None = None,
        tracer: Tracer | None = None,
    ) -> RunResult:
        """Stages 6-8: synthesize, write, wiggum, panel, skills, memory; then the run record and trace.

        Never raises on a stage failure: the run is recorded as failed with the error and returned.
        """
        run_id = run_id or new_run_id()
        tracer = tracer or Tracer(run_id)
        t0 = time.perf_counter()
        state: dict[str, Any] = {}
        with use_tracer(tracer):
            try:
                result = self._finish(prepared, run_id, instructions or {}, dict(criteria or {}), output_name, state)
            except Exception as exc:  # recorded, not swallowed: status failed + error in runs.jsonl
                result = RunResult(run_id=run_id, task=prepared.task, status="failed", error=f"{type(exc).__name__}: {exc}",
                                   smoke=self.roles.smoke, output_path=state.get("output_path"))
        overflow = context_overflow(tracer.events)  # a stage may have turned it into a fallback: the run fails
        if overflow and result.status != "failed":
            result = dataclasses.replace(result, status="failed", error=overflow)
        trace_path = tracer.write(self.cfg.traces_dir)
        record = run_record(self.cfg, self.roles, prepared, result, state, tracer, time.perf_counter() - t0,
                            trace_path, extra_record)
        append_jsonl(self.cfg.runs_jsonl, record, unique="run_id")  # a resumed step's run stays one line
        return dataclasses.replace(result, record=record, trace_path=str(trace_path))

    def run(self, task: str, *, tracer: Tracer | None = None, **kwargs: Any) -> RunResult:
        """prepare + finish under one trace (a fresh one unless given). A stage failure is recorded (status
        failed), not raised; an empty task raises ValueError."""
        run_id = kwargs.pop("run_id", None) or (tracer.run_id if tracer is not None else new_run_id())
        tracer = tracer if tracer is not None else Tracer(run_id)
        with use_tracer(tracer):
            try:
                prepared = self.prepare(task)
            except ValueError:
                raise
            except Exception as exc:
                return self.record_failure(task, run_id, tracer, exc)
        return self.finish(prepared, run_id=run_id, tracer=tracer, **kwargs)

    def record_failure(self, task: str, run_id: str, tracer: Tracer, exc: BaseException) -> RunResult:
        """A run that failed before synthesis: trace and runs.jsonl record written, nothing else."""
        failed = RunResult(run_id=run_id, task=task, status="failed", error=f"{type(exc).__name__}: {exc}",
                           smoke=self.roles.smoke)
        trace_path = tracer.write(self.cfg.traces_dir)
        record = run_record(self.cfg, self.roles, _empty_prepared(task), failed, {}, tracer, 0.0, trace_path, None)
        append_jsonl(self.cfg.runs_jsonl, record, unique="run_id")  # a resumed step's run stays one line
        return dataclasses.replace(failed, record=record, trace_path=str(trace_path))

    # -- internals -----------------------------------------------------------------------------------
    def _finish(self, prepared, run_id, instructions, criteria, output_name, state) -> RunResult:
        # imported at call time, not for a cycle (agent sits above these): tests swap synthesize on harness.synthesis
        from harness.review import (RESCORE_SEED_OFFSET, rescore_config, rescore_samples, run_panel, verify_rescore,
                                    wiggum_loop)
        from harness.security import safe_output_path, unsourced_urls
        from harness.synthesis import instruction_for, instruction_provenance, synthesize

        cfg, roles, plan, research = self.cfg, self.roles, prepared.plan, prepared.research
        if self.evaluator is None:
            raise NoEvaluator("this Harness was built without an evaluator, so it cannot score an answer; pass "
                              "evaluator=evaluators.HARNESS_EVALUATOR")
        evaluate = self.evaluator.evaluate
        tracer = current_tracer()
        active = frozenset(prepared.skills)
        task = prepared.clean_task

        instruction = instructions.get(plan.task_type) or instruction_for(plan.task_type, cfg.synth)
        state["instruction"] = instruction
        state["prompt"] = instruction_provenance(plan.task_type, instruction, cfg.synth)
        with tracer.stage("synthesize", task_type=plan.task_type):
            injections = pre_synthesis_injections(active, task=task, plan=plan)
            synth = synthesize(
                task,
                plan=plan,
                research_context=research.context,
                memory_context=prepared.memory_context,
                instruction=instruction,
                llm=roles.producer,
                cfg=cfg.synth,
                injections=injections,
                seed=cfg.seed,  # per-seed samples: without it every seed hit the same cached reply
                echo_reasons=self.evaluator.echo_reasons,
            )
        state["synth"] = {"retried": synth.retried, "expected": synth.expected, "found": synth.found,
                          "echo": list(synth.echo), "echo_kept": synth.echo_kept, "echo_error": synth.echo_error}
        expected = criteria.get("expected_count", synth.expected)

        with tracer.stage("write_output"):
            out_path = safe_output_path(output_name or output_name_for(prepared.task), cfg.output_path)
            if output_name is None:  # a name read off the task: another run may have asked for it
                out_path = safe_output_path(claim_output(out_path, run_id).name, cfg.output_path)
            self._write(out_path, synth.text)
        state["output_path"] = str(out_path)

        evaluations: dict[str, Any] = {}
        judged: list[Any] = state.setdefault("judged", [])  # every Evaluation made: the record's judge_failures

        def _judge(text: str, seed: int, evaluator_cfg=cfg.evaluator):
            ev = evaluate(task, text, roles.evaluator, evaluator_cfg, expected_count=expected,
                          required_terms=tuple(criteria.get("required_terms", ())), sources=research.sources,
                          task_type=plan.task_type, seed=seed)
            judged.append(ev)
            return ev

        def _evaluate(text: str):
            if text not in evaluations:
                evaluations[text] = _judge(text, cfg.seed)
            return evaluations[text]

        with tracer.stage("wiggum_loop"):
            # seed + round: a revision of the same best draft with the same feedback is a new sample, not the
            # previous round's cached reply
            wig = wiggum_loop(task, synth.text, producer=roles.producer, evaluate=_evaluate,
                              echo_reasons=self.evaluator.echo_reasons, cfg=cfg.wiggum, seed=cfg.seed)
            text = wig.best_text
            evaluation = wig.best_evaluation or _evaluate(text)
            if rescore_samples(cfg.evaluator):
                # verify: the kept round was chosen by the judge sample that scored it; score it again with
                # seeds of its own (a sampled judgement even when the loop's judge is greedy) so the run's score
                # is not inflated by that choice. Its judged score missing, the run's score is missing.
                # Where its answers_task verdict differs from the loop judge's, a third judgement decides.
                loop_evaluation = evaluation
                with tracer.span("wiggum.verify", cat="round") as span:
                    verified = verify_rescore(lambda seed, judge_cfg: _judge(text, seed, judge_cfg),
                                              reference=lambda: loop_evaluation, seed=cfg.seed + RESCORE_SEED_OFFSET,
                                              cfg=cfg.evaluator)
                    evaluation = verified.evaluation
                    span.update(score=_rounded(evaluation.composite), selection_score=_rounded(wig.best_score),
                                temperature=rescore_config(cfg.evaluator).temperature, attempt=verified.to_dict())
                state["rescored"] = True
                state["attempt_verdicts"] = verified.to_dict()

        panel: tuple = ()
        flags = post_wiggum_flags(active, task=task, output=text, plan=plan)
        if cfg.panel.enabled or flags.get("panel"):
            with tracer.stage("run_panel"):
                panel = tuple(run_panel(task, text, roles.evaluator, cfg.panel.personas))

        with tracer.stage("post_synthesis"):
            text = apply_post_synthesis(active, text, task=task, sources=research.sources)
        self._write(out_path, text)
        gathered = [prepared.task, prepared.memory_context, research.context,
                    *(f"{s.url} {s.snippet}" for s in research.sources)]
        state["unsourced_urls"] = list(unsourced_urls(text, gathered))  # a planted URL never passes silently

        with tracer.stage("compress_and_store"):
            stored = None
            if self.memory is not None and not cfg.memory.frozen:
                stored = self.memory.compress_and_store(task, text, plan, roles.compressor, run_id)
        state["memory_stored"] = stored is not None

        return RunResult(
            run_id=run_id,
            task=prepared.task,
            status="ok",
            output_text=text,
            output_path=str(out_path),
            evaluation=evaluation,
            wiggum=wig,
            panel=panel,
            smoke=roles.smoke,
            sources=research.sources,
        )

    def _write(self, path: Path, text: str) -> None:
        body = text if not self.roles.smoke else f"> {self.roles.smoke_label}\n\n{text}"
        atomic_write_text(path, body.rstrip() + "\n")  # two workers writing one output each keep a temp of their own


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


class _Timed:
    """A stage span that also records its duration into a dict (prepare timings survive caching)."""

    def __init__(self, tracer: Tracer, name: str, timings: dict[str, float]) -> None:
        self.tracer, self.name, self.timings = tracer, name, timings

    def __enter__(self):
        self._cm = self.tracer.stage(self.name)
        self._t0 = time.perf_counter()
        return self._cm.__enter__()

    def __exit__(self, *exc):
        self.timings[self.name] = round(time.perf_counter() - self._t0, 4)
        return self._cm.__exit__(*exc)
