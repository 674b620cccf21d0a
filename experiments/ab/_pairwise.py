"""The pairwise A/B (ab.compare=pairwise): the two arms' answers to the same (task, replication)
judged side by side, the verdict on B's mean preference over tasks.

Once every cell has run, each pair whose two cells finished is judged by the judge (the evaluator role, the arms'
shared judge) with evaluators.pairwise.compare_pair: both orders, blind (the prompt never names an arm), both
answers marked as untrusted data, a disagreement between the orders a tie; the pair's seed is the cells' pair seed.
Each judged pair is one "pair" line in the same ledger, so a rerun judges only what is missing; a judge call that
raised (a dead server) is recorded failed and judged again by the same command; a reply that could not be read
after its re-ask is a missing preference, never a tie. When no judged pair has a readable reply the judge failed,
not the arms (failed_judge): nothing it said is final, and the same command judges every pair again in a new judge
round whose seeds differ (judge_seed), so a response cache that kept the unreadable replies does not give them back.

Per task: the mean preference over its judged replications (+1: every comparison prefers B). The test: the exact
two-sided sign-flip test over tasks (experiments.stats.signflip_test; the paired t on such values runs above its
level). The rule, pre-registered: 'supported' when p < alpha, the mean preference on the hypothesis's side and at
least min_preference; 'not supported' when significant the other way, or when the skew-robust bound on the mean
(the pointwise rule's) excludes min_preference, never from tasks that all have one value (all ties: a judge that
cannot tell the answers apart, or follows the order shown, has no spread to bound); else 'inconclusive'. A preference counts which answer the judge
prefers, not by how much: a 'supported' says "B's answers are preferred on more tasks", not "B's mean score is
higher" (docs/VERDICTS.md). The pointwise scores of the same cells are shown beside it, not tested.

What is missing: pairs with a failed cell drop out as in the pointwise A/B; when the two arms failed on different
pairs the verdict must hold with every such pair counted against it (preference -1 or +1), else 'inconclusive'.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from evaluators import PairResult, PositionBias, position_bias
from experiments.runs import Judge, make_judge
from experiments.stats import Preregistration, bootstrap_ci, excluding_bound, missing_imbalance, signflip_test
from harness.stores import append_jsonl, read_jsonl

from ._cells import ABDesign, cell_key, judge_seed, task_id

PAIR = "pair"  # a ledger line's kind


def judge_rounds(ledger_path: Path) -> dict[tuple[str, int], int]:
    """(task id, replication) -> the ok judgements the ledger holds for that pair. A pair is judged only while it
    has no final judgement (settled_pairs), so for a pair judged again these are the rounds of a failed judge."""
    rounds: dict[tuple[str, int], int] = {}
    for rec in read_jsonl(ledger_path):
        if rec.get("kind") == PAIR and rec.get("status") == "ok":
            k = (str(rec["task"]), int(rec["replication"]))
            rounds[k] = rounds.get(k, 0) + 1
    return rounds


def load_pairs(ledger_path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Latest record per judged pair (task id, replication); an ok record is never replaced by a later failure."""
    pairs: dict[tuple[str, int], dict[str, Any]] = {}
    for rec in read_jsonl(ledger_path):
        if rec.get("kind") != PAIR:
            continue
        k = (str(rec["task"]), int(rec["replication"]))
        if pairs.get(k, {}).get("status") == "ok" and rec.get("status") != "ok":
            continue
        pairs[k] = rec
    return pairs


def has_preference(rec: Mapping[str, Any]) -> bool:
    """A pair line with a readable preference."""
    return rec.get("status") == "ok" and rec.get("preference") is not None


def settled_pairs(pairs: Mapping[tuple[str, int], Mapping[str, Any]]) -> set[tuple[str, int]]:
    """The judged pairs that are final: an ok judgement with a readable preference, or one without (a missing
    preference, never a tie) when the judge read at least one pair. A judge that read none failed as a judge (prose
    replies, a cut reply, a wrong model): its judgements are not final and the same command asks again."""
    ok = {k for k, r in pairs.items() if r.get("status") == "ok"}
    if not any(has_preference(pairs[k]) for k in ok):
        return set()
    return ok


def pairs_to_judge(design: ABDesign, ledger_path: Path) -> int:
    """The design's (task, replication) pairs without a final judgement in the ledger (settled_pairs; 0 for a new
    test: no pair has run yet, and the cells' own check covers the backends then)."""
    if not Path(ledger_path).exists():
        return 0
    done = settled_pairs(load_pairs(Path(ledger_path)))
    return sum(1 for t in design.task_ids for rep in range(design.replications) if (t, rep) not in done)


def lost_answers(design: ABDesign, ledger_path: Path) -> list[tuple[tuple[str, str, int], str]]:
    """The ok cells whose answer file is gone while their pair has no final judgement: ((task, arm, replication),
    the path recorded). Their pair cannot be judged until the cell runs again (run_ab's `redo`); a pair already
    judged needs no answer file."""
    from ._cells import load_cells

    if not Path(ledger_path).exists():
        return []
    cells = load_cells(Path(ledger_path))
    done = settled_pairs(load_pairs(Path(ledger_path)))
    out = []
    for tid in design.task_ids:
        for rep in range(design.replications):
            if (tid, rep) in done:
                continue
            for arm in design.arm_names:
                c = cells.get(cell_key(tid, arm, rep))
                path = str(((c or {}).get("meta") or {}).get("output_path") or "")
                if c and c.get("status") == "ok" and not (path and Path(path).is_file()):
                    out.append((cell_key(tid, arm, rep), path or "no output_path recorded"))
    return out


def failed_judge(ledger: Path) -> tuple[str, ...]:
    """compare=pairwise: why the test cannot answer when no judged pair has a readable preference (settled_pairs):
    the judge failed, so nothing it said is final; the same command judges every pair again (the CLI exits 3)."""
    pairs = load_pairs(ledger)
    ok = [r for r in pairs.values() if r.get("status") == "ok"]
    if not ok or any(has_preference(r) for r in ok):
        return ()
    reply = next((str(r.get("reply") or "") for r in ok if r.get("reply")), "")
    return (f"the pairwise judge's replies could not be read on any of the {len(ok)} judged pair(s)"
            f"{f' (first reply: {reply[:120]!r})' if reply else ''}: a failed judge, so no judgement is kept; "
            "fix the judge (its model, evaluator.max_tokens) and the same command judges them again with new judge "
            "seeds (a response cache does not give the same replies back)",)


def check_one_judge(backend: Mapping[str, Any] | None) -> None:
    """ConfigError (one line) when the arms' registered backends ({arm: {role: identity}}) name different evaluator
    models: a side-by-side judgement needs one judge for both answers."""
    from experiments.config import ConfigError

    judges = {arm: json.dumps((ids or {}).get("evaluator"), sort_keys=True, default=str)
              for arm, ids in (backend or {}).items()}
    if len(set(judges.values())) > 1:
        raise ConfigError("ab.compare=pairwise needs one judge for both arms (it judges their answers side by side); "
                          f"the arms' evaluator backends differ: {'; '.join(f'{k}: {v}' for k, v in judges.items())}")


def answer_text(cell: Mapping[str, Any]) -> str:
    """A finished cell's answer: the output file its run wrote (meta.output_path). Raises FileNotFoundError with
    the path when it is gone: a pair whose answer is lost cannot be judged (recorded failed, never a tie)."""
    path = str((cell.get("meta") or {}).get("output_path") or "")
    if not path or not Path(path).is_file():
        raise FileNotFoundError(f"the answer of cell {cell.get('task')}/{cell.get('arm')}#{cell.get('replication')} "
                                f"is not on disk ({path or 'no output_path recorded'})")
    return Path(path).read_text(encoding="utf-8")


def judge_pairs(design: ABDesign, ledger_path: Path, judge: Judge, *, pool: Any = None,
                on_progress: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Judge every pair whose two cells finished and that the ledger has no ok judgement for; returns how many
    were judged in this call. Pairs run pool.workers at once; their ledger lines follow the plan's order."""
    from experiments.runs import SERIAL

    from ._cells import load_cells

    cells = load_cells(ledger_path)
    done = settled_pairs(load_pairs(ledger_path))
    rounds = judge_rounds(ledger_path)
    a, b = design.arm_names
    jobs = []
    for task in design.tasks:
        tid = task_id(task)
        for rep in range(design.replications):
            ca, cb = cells.get(cell_key(tid, a, rep)), cells.get(cell_key(tid, b, rep))
            if (tid, rep) in done or not ca or not cb or ca.get("status") != "ok" or cb.get("status") != "ok":
                continue
            jobs.append((task, tid, rep, ca, cb))

    def one(job: tuple) -> tuple[dict[str, Any], float]:
        task, tid, rep, ca, cb = job
        t0 = time.perf_counter()
        seed = judge_seed(design.seed, tid, rep, rounds.get((tid, rep), 0))
        try:
            res = judge(task, answer_text(cb), answer_text(ca), seed)
            rec = {"status": "ok", **res.to_dict()}
            if res.failed and getattr(res, "raw", ()):  # what the judge said instead (failed_judge quotes it)
                rec["reply"] = str(res.raw[0])[:300]
        except Exception as exc:  # a failed judgement is recorded and retried by the next run, never a tie
            rec = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500]}
        return {"kind": PAIR, "task": tid, "replication": rep, "pair_seed": seed, **rec}, time.perf_counter() - t0

    with (pool or SERIAL).ordered(one, jobs) as results:
        for i, (_, fut) in enumerate(results, start=1):
            rec, elapsed = fut.result()
            append_jsonl(ledger_path, {**rec, "elapsed_s": elapsed})
            if on_progress is not None:
                on_progress({"pair": i, "pairs": len(jobs), **rec})
    return len(jobs)


@dataclass(frozen=True)
class PairwiseResult:
    """B's preference over A per task and over tasks, the sign-flip test, and the judge's behaviour."""

    n: int  # tasks with at least one readable preference
    mean: float  # mean over tasks of the per-task mean preference (+1: B always preferred)
    sd: float
    ci: Any  # experiments.stats BootstrapCI of the mean (percentile)
    p: float  # two-sided sign-flip p over tasks
    method: str
    per_task: dict[str, float]  # task id -> mean preference
    b_wins: int  # pairs by combined preference: > 0, = 0, < 0
    ties: int
    a_wins: int
    missing: int  # pairs judged, no readable preference (judge failures)
    failed: int  # pairs whose judgement raised (retried by the same command)
    unjudged: int  # pairs with a failed or missing cell (no pair to judge)
    first_wins: int  # position bias: the answer shown first won this many of `decided` verdicts
    decided: int
    disagreed: int  # pairs whose two orders picked opposite answers
    judge_failures: int  # unreadable judge replies, re-asked ones included
    calls: int  # judge calls the recorded pairs made (2 a pair, 1 more per re-ask)
    verdict: str = "inconclusive"
    verdict_reason: str = ""

    @property
    def position_bias(self) -> float | None:
        return PositionBias(self.first_wins, self.decided).rate

    def lines(self, a: str, b: str) -> list[str]:
        """The summary's lines."""
        from experiments.report import num, pval

        return [
            f"preference ({b} over {a}, +1 = every comparison prefers {b}): mean {num(self.mean, True)} over {self.n} "
            f"tasks, {100 * self.ci.level:.0f}% CI [{num(self.ci.low, True)}, {num(self.ci.high, True)}]; "
            f"sign-flip p={pval(self.p)} ({self.method})",
            f"pairs: {b} preferred {self.b_wins}, tie {self.ties}, {a} preferred {self.a_wins}; no readable verdict "
            f"{self.missing}; judge call failed {self.failed}; not judged (a cell failed) {self.unjudged}",
            f"pairwise judge: {PositionBias(self.first_wins, self.decided).line()}; orders disagreed on "
            f"{self.disagreed} pair(s); unreadable replies {self.judge_failures}; {self.calls} judge calls",
        ]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _task_preferences(pairs: Mapping[tuple[str, int], Mapping[str, Any]], ids: Sequence[str],
                      fill: Mapping[tuple[str, int], float] | None = None) -> dict[str, float]:
    out: dict[str, float] = {}
    for tid in ids:
        vals = [float(r["preference"]) for (t, _), r in pairs.items()
                if t == tid and r.get("status") == "ok" and r.get("preference") is not None]
        vals += [v for (t, _), v in (fill or {}).items() if t == tid]
        if vals:
            out[tid] = float(np.mean(vals))
    return out


def pairwise_verdict(prereg: Preregistration, prefs: Sequence[float], p: float) -> tuple[str, str]:
    """(verdict, reason) of the pre-registered pairwise rule over per-task mean preferences (module docstring)."""
    n = len(prefs)
    if n < 2:
        return "inconclusive", f"only {n} task(s) with a judged pair"
    mean = float(np.mean(prefs))
    sign = -1.0 if prereg.direction == "less" else 1.0
    effect = abs(mean) if prereg.direction == "two-sided" else sign * mean
    right_way = prereg.direction == "two-sided" or np.sign(mean) == sign
    sig = p < prereg.alpha
    head = f"sign-flip p = {p:.3g} vs alpha {prereg.alpha:g}; mean preference {mean:+.3g}"
    if sig and right_way and effect >= prereg.min_preference:
        return "supported", f"{head} meets the minimum preference {prereg.min_preference:g}"
    if sig and not right_way:
        return "not supported", f"{head}: significant in the opposite direction"
    if np.ptp(prefs) == 0:  # every task alike (all ties: a judge that cannot tell, or follows the order shown)
        return "inconclusive", (f"{head}: every task's preference is {mean:+.3g}, no spread to bound the mean "
                                "with" + ("" if sig else "; not significant"))
    bound = excluding_bound(prefs, alpha=prereg.alpha, direction=prereg.direction, minimum=prereg.min_preference)
    if bound is not None:
        return "not supported", (f"{head}; the skew-robust {100 * (1 - prereg.alpha / 2):.3g}% bounds ({bound[0]:+.3g} "
                                 f"to {bound[1]:+.3g}) exclude the minimum preference {prereg.min_preference:g}")
    if sig:
        return "inconclusive", f"{head}: below the minimum preference {prereg.min_preference:g}"
    return "inconclusive", f"{head}: not significant"


def _worst_case(prereg: Preregistration, pairs: Mapping[tuple[str, int], Mapping[str, Any]], ids: Sequence[str],
                prefs: Sequence[float], fill_keys: set, verdict: str, why: str, arms: tuple[str, str],
                seed: int) -> tuple[str, str]:
    """The verdict kept only when it holds with every pair in `fill_keys` (failed cells on different pairs, no
    readable verdict, a judgement that raised) counted against it: -1 / +1 pushes the mean away from what the
    verdict claims."""
    a, b = arms
    sign = -1.0 if prereg.direction == "less" else 1.0
    mean_sign = float(np.sign(np.mean(prefs))) or 1.0
    if verdict == "supported":
        against = -mean_sign
    else:  # 'not supported': towards the hypothesis (or away from zero when two-sided)
        against = mean_sign if prereg.direction == "two-sided" else sign
    worst = _task_preferences(pairs, ids, {k: against for k in fill_keys})
    wprefs = [worst[t] for t in ids if t in worst]
    bound, bound_why = pairwise_verdict(prereg, wprefs, signflip_test(wprefs, seed=seed).pvalue)
    what = f"{len(fill_keys)} pair(s) with a failed cell on one arm only, no readable verdict or a failed judgement"
    if bound != verdict:
        return "inconclusive", (
            f"{what}: counted as preferring {b if against > 0 else a} (the worst case) the rule says '{bound}' "
            f"({bound_why}); on the judged pairs alone it would say '{verdict}' ({why}); rerun the same command "
            "to retry failed cells")
    return verdict, f"{why}; it holds with the {what} counted against it"


def analyse_pairwise(ledger_path: Path, design: ABDesign, prereg: Preregistration,
                     task_ids: Sequence[str] | None = None, *, n_boot: int = 2000) -> PairwiseResult:
    """The pairwise statistics and verdict of a ledger's pair lines (pure function of the ledger)."""
    from ._cells import load_cells

    ids = list(task_ids if task_ids is not None else design.task_ids)
    pairs = {k: r for k, r in load_pairs(Path(ledger_path)).items() if k[0] in ids}
    cells = load_cells(Path(ledger_path))
    a, b = design.arm_names
    per_task = _task_preferences(pairs, ids)
    prefs = [per_task[t] for t in ids if t in per_task]
    test = signflip_test(prefs, seed=design.seed) if prefs else None
    p = test.pvalue if test else 1.0
    arr = np.asarray(prefs, dtype=float)
    ci = bootstrap_ci(arr, level=1 - prereg.alpha, n_resamples=n_boot, seed=design.seed, method="percentile")
    judged = [PairResult.from_dict(r) for r in pairs.values() if r.get("status") == "ok"]
    readable = [r.preference for r in judged if not r.failed]
    bias = position_bias(judged)
    failed_cells = {arm: {(t, rep) for (t, x, rep), c in cells.items() if x == arm and t in ids
                          and c.get("status") != "ok"} for arm in (a, b)}
    unjudged = {(t, rep) for t in ids for rep in range(design.replications)
                if not all(cells.get(cell_key(t, arm, rep), {}).get("status") == "ok" for arm in (a, b))}
    verdict, why = pairwise_verdict(prereg, prefs, p)
    unreadable_only = bool(pairs) and not any(has_preference(r) for r in pairs.values()) and any(
        r.get("status") == "ok" for r in pairs.values())
    if unreadable_only:
        why = (f"no judged pair has a readable verdict ({sum(1 for r in pairs.values() if r.get('status') == 'ok')} "
               "unreadable): the judge failed, nothing it said is kept; the same command judges them again with new "
               "judge seeds")
    # what is missing: a failed cell is an outcome of its arm (experiments.ab._analysis)
    counts = {arm: len(failed_cells[arm]) for arm in (a, b)}
    where = {arm: sorted({t for t, _ in failed_cells[arm]}) for arm in (a, b)}
    refusal = missing_imbalance((a, b), counts, {a: 0, b: 0}, where)
    if refusal:
        verdict, why = "inconclusive", f"{refusal}; on the judged pairs alone the rule would say '{verdict}' ({why})"
    else:
        # no readable verdict, or a judgement that raised (the command exits 3 until it is judged): never data
        unread = {k for k, r in pairs.items() if r.get("status") != "ok" or r.get("preference") is None}
        fill_keys = (unjudged if failed_cells[a] != failed_cells[b] else set()) | unread
        if fill_keys and verdict != "inconclusive":
            verdict, why = _worst_case(prereg, pairs, ids, prefs, fill_keys, verdict, why, (a, b),
                                       design.seed)
    return PairwiseResult(
        n=len(prefs), mean=float(arr.mean()) if prefs else float("nan"),
        sd=float(arr.std(ddof=1)) if len(prefs) >= 2 else float("nan"), ci=ci, p=p,
        method=test.method if test else "no values", per_task=per_task,
        b_wins=sum(1 for v in readable if v > 0), ties=sum(1 for v in readable if v == 0),
        a_wins=sum(1 for v in readable if v < 0), missing=sum(1 for r in judged if r.failed),
        failed=sum(1 for r in pairs.values() if r.get("status") != "ok"), unjudged=len(unjudged),
        first_wins=bias.first_wins, decided=bias.decided, disagreed=sum(r.disagreed for r in judged),
        judge_failures=sum(r.judge_failures for r in judged), calls=sum(r.calls for r in judged),
        verdict=verdict, verdict_reason=why)


def with_pairwise(result: Any, design: ABDesign, prereg: Preregistration, ledger_path: str | Path) -> Any:
    """compare=pairwise: the side-by-side judgements' statistics attached, their verdict the verdict (the pointwise
    one is kept in its reason, shown, not tested); a pointwise registration is returned unchanged."""
    if prereg.compare != "pairwise":
        return result
    ids = [t.task for t in result.tasks] + list(result.excluded_tasks)
    pw = analyse_pairwise(Path(ledger_path), design, prereg, [t for t in design.task_ids if t in ids],
                          n_boot=design.n_boot)
    return dataclasses.replace(result, pairwise=pw, verdict=pw.verdict, verdict_reason=(
        f"{pw.verdict_reason} (pairwise, pre-registered; the pointwise {prereg.metric} alone would say "
        f"'{result.verdict}')"))


def judge_side_by_side(exp: Any, design: ABDesign, prereg: Preregistration, result: Any, ledger_path: Path,
                       judge: Judge | None, cells: Any, roles: Any, pool: Any, out: Callable[[str], None]) -> Any:
    """compare=pairwise, after the cells: judge every finished pair not yet judged (judge_pairs; the judge: `judge`,
    else make_judge on arm A's evaluator role), then the verdict on the preferences (with_pairwise)."""
    from experiments.config import ConfigError
    from experiments.report import hms, num

    name, (a, _) = exp.sweep.name, design.arm_names
    if judge is None:
        llm = cells.roles_for(a).evaluator if cells is not None else getattr(roles, "evaluator", None)
        if llm is None:
            raise ConfigError("ab.compare=pairwise needs a judge: no evaluator role to judge the pairs with")
        judge = make_judge(exp, llm)
    t0 = time.perf_counter()

    def progress(info: Mapping[str, Any]) -> None:
        what = (f"preference {num(info.get('preference'), True)} (verdicts {info.get('verdicts')})"
                if info["status"] == "ok" else f"FAILED {str(info.get('error') or '')[:120]}")
        out(f"[{name}] pair {info['pair']}/{info['pairs']} task {info['task']} rep {info['replication']}: {what} | "
            f"elapsed {hms(time.perf_counter() - t0)}")

    judged = judge_pairs(design, ledger_path, judge, pool=pool, on_progress=progress)
    out(f"[{name}] side by side: {judged} pair(s) judged in this invocation (2 judge calls each, both orders)")
    return with_pairwise(result, design, prereg, ledger_path)


def unjudged_pairs(ledger: Path) -> tuple[str, ...]:
    """compare=pairwise: why the test cannot answer yet when a pair's judgement failed (a judge call raised, an
    answer file is gone); the same command judges them again (the CLI exits 3)."""
    failed = [r for r in load_pairs(ledger).values() if r.get("status") != "ok"]
    if not failed:
        return ()
    first = failed[0]
    return (f"{len(failed)} pair judgement(s) failed (first: task {first.get('task')} rep "
            f"{first.get('replication')}: {str(first.get('error'))[:200]})",)

