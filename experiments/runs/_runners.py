"""Runners: what the experiments run a task on, and the proxy that times them.

A runner is anything with `prepare(task) -> prepared` and `finish(prepared, *, instructions, run_id, criteria,
seed) -> TaskOutcome` (experiments.runs: the typed seam), `identity()` and `llm_calls()`. HarnessRunner is the
one adapter of harness.agent.Harness: the sweep and the calibration call prepare / finish / rescore, the A/B test
calls run (prepare + finish of one arm's config) through HarnessCells. Tests use tests/scripted_harness.ScriptedRunner,
which builds the same TaskOutcome. TimedRunner times each finish / rescore for progress lines and ETAs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from ._outcome import MODEL_FAILURES, TaskOutcome, outcome_from_result, raised


class Runner(Protocol):
    def prepare(self, task: str) -> Any: ...

    def identity(self) -> dict[str, Any]:
        """What answers: role -> {backend, model, file + sha256 | digest} (experiments.config)."""
        ...

    def llm_calls(self) -> int:
        """Uncached model calls made so far."""
        ...

    def finish(self, prepared: Any, *, instructions: Mapping[str, str], run_id: str | None = None,
               criteria: Mapping[str, Any] | None = None, seed: int = 0) -> TaskOutcome: ...

    # Optional (experiments.calibration needs it for the judge variance):
    # rescore(prepared, output_text, *, criteria=None, seed=0, run_seed=None) -> TaskOutcome scores a fixed text
    # again with the harness's evaluator role and config (no synthesis, no wiggum loop), judge seeds from `seed`;
    # run_seed: the seed of the run that wrote the text (its loop judge's verdict decides a tie-break).


def llm_calls(runner: Runner) -> int:
    """The runner's uncached model calls so far."""
    return int(runner.llm_calls())


# -- the real harness ---------------------------------------------------------------------------------------------


def _key(obj: Any) -> str:
    return json.dumps(dataclasses.asdict(obj), sort_keys=True, default=str)


class HarnessParts:
    """Backends (roles), memory and search, built once per distinct config and shared by every Harness made from
    it (the embedded model is loaded once). `roles` injects one set of role LLMs for every config (tests)."""

    def __init__(self, roles: Any = None) -> None:
        self._roles_given = roles
        self._roles: dict[str, Any] = {}
        self._first: dict[str, Any] = {}  # memory / search key -> the first Harness made with it (owns them)
        self._lock = threading.RLock()  # harnesses are made on several workers at once

    def roles(self, cfg: Any) -> Any:
        if self._roles_given is not None:
            return self._roles_given
        k = _key(cfg.backend) + cfg.results_dir
        with self._lock:
            if k not in self._roles:
                from harness.inference import make_roles

                self._roles[k] = make_roles(cfg.backend, cfg.results_dir)
            return self._roles[k]

    def harness(self, cfg: Any) -> Any:
        """A Harness for cfg on the shared roles, memory and search."""
        from evaluators import HARNESS_EVALUATOR

        try:
            from harness.agent import Harness
        except ImportError as exc:
            raise RuntimeError(f"harness.agent.Harness is not importable ({exc}); the experiments need the harness") from exc
        mk, sk = "memory" + _key(cfg.memory) + cfg.results_dir, "search" + _key(cfg.search) + cfg.results_dir
        with self._lock:  # memory and search stay lazy: built by the first harness's first use, then shared
            first_m, first_s = self._first.get(mk), self._first.get(sk)
            h = Harness(cfg, self.roles(cfg), evaluator=HARNESS_EVALUATOR, memory=first_m.memory if first_m else None,
                        search=first_s.search if first_s else None)
            self._first.setdefault(mk, h)
            self._first.setdefault(sk, h)
        return h


@dataclass(frozen=True)
class FullRun:
    """One full harness run: the outcome, the prepared context (None when preparation failed) and the run record."""

    outcome: TaskOutcome
    prepared: Any = None
    record: Mapping[str, Any] = field(default_factory=dict)


def model_failures(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The errors ("Type: message") of the model calls that failed among a run's trace events, also those a stage
    turned into its fallback (the planner never raises)."""
    return [str(e["args"]["error"]) for e in events if e.get("cat") == "llm" and (e.get("args") or {}).get("error")]


PREPARE_FAILURES = (*MODEL_FAILURES, "ContextOverflow")


def context_failure(task: str, error: str) -> Exception:
    """The error a context preparation that met `error` raises: the failure's own class where it is a backend
    error (ContextOverflow, BackendUnavailable, ...), else BackendError; one line naming the task."""
    from harness import inference

    name = error.split(":", 1)[0]
    cls = getattr(inference, name, None)
    if cls is inference.RunAbandoned:  # its trial stopped: nothing failed
        return inference.RunAbandoned(error)
    if not (isinstance(cls, type) and issubclass(cls, inference.BackendError)):
        cls = inference.BackendError
    return cls(f"context for task {task[:60]!r} not prepared: {error}")


class HarnessRunner:
    """Adapts harness.agent.Harness to the runner protocol: one Harness per seed, sharing roles, memory, search.

    llm_calls() counts uncached model calls (response-cache misses; every call when the cache is off).
    """

    def __init__(self, harness_cfg: Any, roles: Any = None, *, parts: HarnessParts | None = None) -> None:
        self.cfg = harness_cfg
        self.parts = parts if parts is not None else HarnessParts(roles)
        self.base = self.parts.harness(harness_cfg)
        self._by_seed = {harness_cfg.seed: self.base}
        self._uncached = 0
        self._identity: dict[str, Any] | None = None
        self._lock = threading.Lock()  # finish/prepare run on several workers at once (experiments.runs)

    @property
    def roles(self) -> Any:
        return self.base.roles

    @property
    def smoke(self) -> bool:
        return bool(self.roles.smoke)

    @property
    def mutation_llm(self) -> Any:
        return self.roles.producer

    def _for_seed(self, seed: int) -> Any:
        with self._lock:
            if seed not in self._by_seed:
                self._by_seed[seed] = self.parts.harness(dataclasses.replace(self.cfg, seed=seed))
            return self._by_seed[seed]

    def _count(self, uncached: int) -> None:
        with self._lock:
            self._uncached += int(uncached)

    def prepare(self, task: str) -> Any:
        """The task's context (planning, memory recall, research), its stages' Chrome trace written to the traces
        folder and named in prepared.trace_path: each run that reuses the context shows them in its MLflow trace."""
        from harness.tracing import Tracer, new_run_id, use_tracer

        tracer = Tracer(new_run_id("prepare"))
        with use_tracer(tracer):
            prepared = self.base.prepare(task)
        self._count(sum(int(u["calls"] - u["cached"]) for u in tracer.usage.values()))
        # planning and research degrade to defaults when a model call fails; a sweep would cache that context and
        # reuse it for every trial, so ANY failed model call (down, missing, cut, a timeout, HTTP 429/500, an error
        # reply) fails the preparation here, under the failure's own class, and nothing is cached
        failed = model_failures(tracer.events)
        if failed:
            raise context_failure(task, failed[0])
        return dataclasses.replace(prepared, trace_path=str(tracer.write(self.cfg.traces_dir)))

    def identity(self) -> dict[str, Any]:
        """backend_identity of the roles, read once (it hashes model files and asks Ollama for digests)."""
        if self._identity is None:
            from experiments.config import backend_identity

            self._identity = backend_identity(self.roles)
        return self._identity

    def context_incomplete(self, prepared: Any) -> str | None:
        """Why a prepared context must not be reused: a failed model call its plan or research recorded (prepare
        refuses such a context, but a context file on disk can still carry one), else None."""
        plan, research = getattr(prepared, "plan", None), getattr(prepared, "research", None)
        errors = [*getattr(plan, "errors", ()), *getattr(research, "errors", ())]
        return next((str(e) for e in errors if raised(str(e), *PREPARE_FAILURES)), None)

    def prepared_from_dict(self, data: dict[str, Any]) -> Any:
        from harness.agent import Prepared

        return Prepared.from_dict(data)

    def finish(self, prepared: Any, *, instructions: Mapping[str, str], run_id: str | None = None,
               criteria: Mapping[str, Any] | None = None, seed: int = 0) -> TaskOutcome:
        from harness.agent import output_name_for

        # one file per run: <outputs>/<run_id>/<name>, so a record's output_path never points at a later run's text
        # (trials, seeds and workers would otherwise overwrite <outputs>/<name> in turn)
        name = f"{run_id}/{output_name_for(prepared.task)}" if run_id else None
        result = self._for_seed(seed).finish(prepared, instructions=dict(instructions), run_id=run_id,
                                             criteria=dict(criteria or {}), output_name=name)
        outcome = dataclasses.replace(outcome_from_result(result), context_trace_path=prepared.trace_path)
        self._count(outcome.usage.uncached_calls)
        return outcome

    def rescore(self, prepared: Any, output_text: str, *, criteria: Mapping[str, Any] | None = None,
                seed: int = 0, run_seed: int | None = None) -> TaskOutcome:
        """Score a fixed text again as the judge behind a run's score does (evaluators.composite.evaluate with the
        evaluator role, the task's criteria, the research sources), with judge seeds from `seed`. The config is the
        verify re-score's (`harness.review.rescore_config`: a sample at evaluator.rescore_temperature when the
        loop's judge is greedy) wherever a run's score is that re-score, so the calibration's judge noise is the
        noise of the judgement a trial value carries (at temperature 0 every re-score repeated the first), and so is
        its tie-break (`harness.review.verify_rescore`): where the re-score's attempt verdict differs from the loop
        judge's on this text (judged at `run_seed`, the seed of the run that wrote it: the run's own call, a
        response-cache hit; `seed` when not given), a third judgement is the score."""
        from evaluators import evaluate
        from harness.review import rescore_samples, verify_rescore
        from harness.tracing import Tracer, use_tracer
        from harness.synthesis import expected_count

        from ._outcome import Usage, dimensions_of

        criteria = dict(criteria or {})
        plan = prepared.plan
        expected = criteria.get("expected_count", expected_count(prepared.clean_task, plan))
        tracer = Tracer("rescore")
        t0 = time.perf_counter()

        judged: list[Any] = []

        def judge(judge_seed: int, judge_cfg: Any) -> Any:
            judged.append(evaluate(prepared.clean_task, output_text, self.roles.evaluator, judge_cfg,
                                   expected_count=expected, required_terms=tuple(criteria.get("required_terms", ())),
                                   sources=prepared.research.sources, task_type=plan.task_type, seed=judge_seed))
            return judged[-1]

        with use_tracer(tracer):
            if rescore_samples(self.cfg.evaluator):
                ev = verify_rescore(judge, seed=seed, cfg=self.cfg.evaluator,
                                    reference=lambda: judge(seed if run_seed is None else run_seed,
                                                            self.cfg.evaluator)).evaluation
            else:
                ev = judge(seed, self.cfg.evaluator)
        used = tracer.usage.values()
        usage = Usage(prompt_tokens=sum(int(u["prompt_tokens"]) for u in used),
                      completion_tokens=sum(int(u["completion_tokens"]) for u in used),
                      latency_s=time.perf_counter() - t0, llm_calls=sum(int(u["calls"]) for u in used),
                      cached_calls=sum(int(u["cached"]) for u in used))
        self._count(usage.uncached_calls)
        rubric = ev.rubric
        judge_failures = sum(e.judge_failures for e in judged)  # the loop judge's and a tie-break's included
        if ev.composite is None:  # the judge's reply could not be read: a missing score, never another scale
            return TaskOutcome.failed(f"the judged score is missing: {ev.fallback}", usage=usage,
                                      output_text=output_text, smoke=self.smoke, judge_failures=judge_failures)
        return TaskOutcome(status="ok", score=float(ev.composite), dimensions=dimensions_of(ev),
                           judge_sd=float(rubric.judge_sd or 0.0) if rubric is not None else 0.0,
                           feedback=str(ev.feedback or ""), weaknesses=tuple(ev.weaknesses or ()), usage=usage,
                           output_text=output_text, smoke=self.smoke, rescored=True, judge_failures=judge_failures)

    def run(self, task: Any, *, seed: int, run_id: str, output_name: str) -> FullRun:
        """One full harness run of a benchmark task with the config's own instructions: prepare + finish under one
        trace (a failed preparation is recorded in runs.jsonl like Harness.run does, and returned failed)."""
        from harness.tracing import Tracer, use_tracer

        h = self._for_seed(seed)
        tracer = Tracer(run_id)
        with use_tracer(tracer):
            try:
                prepared = h.prepare(task.task)
            except Exception as exc:  # recorded with its trace file (status failed, the error line)
                return FullRun(outcome_from_result(h.record_failure(task.task, run_id, tracer, exc)))
        result = h.finish(prepared, run_id=run_id, criteria=task.criteria(), tracer=tracer, output_name=output_name)
        outcome = outcome_from_result(result)
        self._count(outcome.usage.uncached_calls)
        return FullRun(outcome, prepared, dict(result.record or {}))

    def llm_calls(self) -> int:
        cache = getattr(self.roles, "cache", None)
        return int(cache.misses) if cache is not None else self._uncached


class HarnessCells:
    """The A/B's run_arm on the real harness: one HarnessRunner per arm config, all on one HarnessParts (roles,
    memory and search shared by the arms when they configure them alike), one full run (HarnessRunner.run) per
    cell. The run id, trace and output file carry a blind label, never the arm name. `roles` injects one set of
    role LLMs for every arm (tests: harness.inference._roles.fake_roles)."""

    def __init__(self, arms: Mapping[str, Any], *, roles: Any = None) -> None:
        from experiments.config import to_harness_config

        self.cfgs = {name: to_harness_config(e, environ={}) for name, e in arms.items()}
        self.parts = HarnessParts(roles)
        self._runners: dict[str, HarnessRunner] = {}
        self._lock = threading.Lock()

    def roles_for(self, arm: str) -> Any:
        return self.parts.roles(self.cfgs[arm])

    @property
    def smoke(self) -> bool:
        return any(bool(getattr(self.roles_for(a), "smoke", False)) for a in self.cfgs)

    def runner(self, arm: str) -> HarnessRunner:
        with self._lock:  # built on first use: a resume with nothing left to run loads no model
            if arm not in self._runners:
                self._runners[arm] = HarnessRunner(self.cfgs[arm], parts=self.parts)
            return self._runners[arm]

    def __call__(self, arm: str, overrides: Mapping[str, Any], task: Any, replication: int, seed: int) -> dict[str, Any]:
        from ._runners import blind_label

        label = blind_label(arm, seed)  # what the run id, trace and output file show instead of the arm
        run_id = f"ab-{task.id}-r{replication}-{label}"
        runner = self.runner(arm)
        t0 = time.perf_counter()
        run = runner.run(task, seed=seed, run_id=run_id, output_name=f"{task.id}-r{replication}-{label}.md")
        wall = time.perf_counter() - t0
        out = run.outcome
        meta: dict[str, Any] = {"run_id": run_id, "blind_label": label, "smoke": runner.smoke,
                                "judge_failures": out.judge_failures}  # unreadable judge replies (run record's)
        if run.prepared is None:
            return {"status": "failed", "error": out.error, "meta": {**meta, "trace": out.trace_path}}
        plan = run.prepared.plan
        meta.update(output_path=out.output_path, trace=out.trace_path, prior_knowledge_ran=bool(plan.prior_knowledge_ran),
                    plan_parser=plan.parser, llm_calls=out.usage.llm_calls, cached_calls=out.usage.cached_calls)
        if not out.ok:
            return {"status": "failed", "error": f"task {task.id!r} failed: {out.error or out.status}", "meta": meta}
        # the judge's sample spread and its rationale: the cell's MLflow trace shows them with the scores
        meta.update(selection_score=out.selection_score, rescored=out.rescored, judge_sd=out.judge_sd,
                    feedback=out.feedback, weaknesses=list(out.weaknesses))
        return {
            "status": "ok",
            "error": None,
            "score": float(out.score),
            "dimensions": dict(out.dimensions),
            "secondary": {
                "search_calls": int((run.record.get("research") or {}).get("search_calls") or 0),
                "tokens": out.usage.prompt_tokens + out.usage.completion_tokens,
                "wall_s": round(wall, 3),
                "gaps": len(plan.gaps),
            },
            "usage": {"completion_tokens": out.usage.completion_tokens, "prompt_tokens": out.usage.prompt_tokens,
                      "llm_calls": out.usage.llm_calls, "latency_s": out.usage.latency_s},  # the A/B's cost figures
            "meta": meta,
        }


# -- timing --------------------------------------------------------------------------------------------------------


class TimedRunner:
    """Runner proxy: forwards everything, times each finish() and rescore(), keeps the seconds and reports each one
    as on_done(kind "finish" | "rescore", run id or task id, outcome, seconds). Reports come from the worker that
    ran the task, one at a time (runs finish on several workers at once: experiments.runs)."""

    def __init__(self, runner: Any, on_done: Callable[[str, str, Any, float], None]) -> None:
        self._runner, self._on_done = runner, on_done
        self.finish_s: list[float] = []
        self.rescore_s: list[float] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def finish(self, prepared: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        result = self._runner.finish(prepared, **kwargs)
        self._done("finish", self.finish_s, str(kwargs.get("run_id") or ""), result, time.perf_counter() - t0)
        return result

    def rescore(self, prepared: Any, text: str, *, task_id: str = "", **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        result = self._runner.rescore(prepared, text, **kwargs)
        self._done("rescore", self.rescore_s, task_id, result, time.perf_counter() - t0)
        return result

    def _done(self, kind: str, times: list[float], key: str, result: Any, seconds: float) -> None:
        with self._lock:
            times.append(seconds)
            self._on_done(kind, key, result, seconds)


def blind_label(arm: str, pair_seed: int) -> str:
    """A label for a judge that does not reveal the arm: differs per pair, reproducible from (arm, seed)."""
    return "response-" + hashlib.sha256(f"blind|{pair_seed}|{arm}".encode()).hexdigest()[:8]
