"""The pairwise holdout (sweep.holdout_compare=pairwise): the candidate's and the baseline's
answers to the same holdout task judged side by side, the confirmation on the candidate's mean preference.

Each holdout task run of a text keeps its answer in <sweep dir>/holdout_answers.jsonl (text hash, seed, task; the
last line of one wins, so a run redone on resume replaces it). After the holdout's blocks, each pair (candidate run
k, baseline run k) of a task both ran, k below both texts' holdout runs, is judged by the evaluator role
(experiments.runs.make_judge: evaluators.pairwise.compare_pair, both orders, a disagreement a tie, blind, both
answers marked as untrusted data). The judge's seed is the pair's (task, run) seed, shared by every candidate's
pair of that task and run (common random numbers). Each judgement is stored in the study (attr holdout_pairs) as it
arrives, so a resume judges only what is missing. A judge call that raised leaves its pair unjudged and the row
failed: nothing is concluded for it, the sweep exits 3 and the same command judges it again. A reply that could not
be read after its re-ask is a missing preference and counts against the candidate (-1), never as a tie; but when
no pair of the conclusion has a readable reply, the judge failed, not the candidates: the judgements are dropped,
every row fails, no look is spent, and the same command judges them again in a new judge round, whose seeds differ
(a response cache would otherwise give the unreadable replies back; judge_pairs, judge_again).

An answer a pair still needs that the file does not hold (the file lost or moved, a line torn or wrong-typed: named
with its line) is lost, not guessed: that text's holdout run of those tasks runs again with the same seed for its
answer (the stored scores stay: the futility looks used them; recover_answers), then the pair is judged.

Per task: the mean preference over its pairs (+1: every comparison prefers the candidate). decide
(experiments/promotion/_confirmation.py's confirm) tests them with the one-sided exact sign-flip test over tasks
at the look's level (Holm over the family); the futility stop still acts on the score differences (non-binding, so
the level holds).

What a pairwise confirmation claims: the candidate's answers are preferred on more of tasks like the holdout's,
not that its mean composite is higher. An edit that helps 7 tasks in 8 a little and ruins the eighth (mean 0) is
preferred on 7 of 8 and confirmed far more often than the paired t confirms it (docs/SENSITIVITY.md, "Lever a");
the worst holdout task's score difference and sweep.max_task_loss stay beside it.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Mapping, Sequence

from evaluators import PairResult, position_bias
from harness.stores import append_jsonl

ANSWERS = "holdout_answers.jsonl"
PAIRS_ATTR = "holdout_pairs"  # study attr: candidate hash -> "<task>/<run k>" -> PairResult.to_dict()
ROUND_ATTR = "holdout_judge_round"  # study attr: judge rounds a failed judge started (judge_again)


def store_answers(folder: Path, key: str, seed: int, scores: Sequence[Any]) -> None:
    """One line of <folder>/holdout_answers.jsonl per task run of text `key` with this seed: its answer
    (experiments.runs.TaskScore.output_text)."""
    path = folder / ANSWERS
    for s in scores:
        append_jsonl(path, {"key": key, "seed": int(seed), "task": s.task_id, "text": s.output_text})


@dataclass(frozen=True)
class Answers:
    """What holdout_answers.jsonl holds: (text hash, seed, task) -> the answer its latest run wrote, and the lines
    that could not be read as one (`bad`: "<file>:<line>: why", each a lost answer the sweep runs again)."""

    texts: dict[tuple[str, int, str], str]
    bad: tuple[str, ...] = ()
    exists: bool = True

    def get(self, key: tuple[str, int, str]) -> str | None:
        return self.texts.get(key)

    def bad_line(self) -> str:
        """One line naming the unreadable lines (the first three, then how many more)."""
        more = f" (and {len(self.bad) - 3} more)" if len(self.bad) > 3 else ""
        return (f"{'; '.join(self.bad[:3])}{more}: treated as lost (the holdout run whose answer "
                f"{'it' if len(self.bad) == 1 else 'each'} held runs again if a pair still needs it)")


def load_answers(path: Path) -> Answers:
    """Every readable line of `path` (the last line of a (text, seed, task) wins). A line that is not a JSON object
    with a string key and task, an integer seed and a string text (null is no answer) is named in `bad`, never
    guessed at: its answer is lost, and the sweep runs again what a pair still needs (recover_answers)."""
    if not path.exists():
        return Answers({}, exists=False)
    texts: dict[tuple[str, int, str], str] = {}
    bad: list[str] = []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as exc:
            bad.append(f"{path}:{n}: not JSON ({exc.msg})")
            continue
        why = _answer_problem(r)
        if why:
            bad.append(f"{path}:{n}: {why}")
            continue
        texts[(r["key"], r["seed"], r["task"])] = r["text"]
    return Answers(texts, tuple(bad))


def _answer_problem(r: Any) -> str | None:
    """Why a parsed line is not an answer record (store_answers' shape), or None."""
    if not isinstance(r, dict):
        return f"a JSON {type(r).__name__}, expected an object"
    for field, kind, name in (("key", str, "a string"), ("task", str, "a string"), ("seed", int, "an integer")):
        v = r.get(field)
        if not isinstance(v, kind) or isinstance(v, bool):
            return f"{field} {v!r} is not {name}"
    if not isinstance(r.get("text"), str):  # null too: no answer, not an empty one the judge would compare
        return (f"text is {'null' if r.get('text') is None else 'a ' + type(r['text']).__name__}, expected a string "
                f"(the answer)")
    return None


def missing_answers(study: Any, key: str, base_key: str, tasks: Sequence[Any], runs: int, seed0: int,
                    answers: Answers) -> dict[tuple[str, int], list[Any]]:
    """The answers the pairs of `key` the study has not judged still need and `answers` lacks: (text hash, run k)
    -> the tasks (TaskSpec) whose run k of that text must run again for its answer."""
    stored = study.user_attrs.get(PAIRS_ATTR, {}).get(key, {})
    out: dict[tuple[str, int], list[Any]] = {}
    for t in tasks:
        for k in range(runs):
            if f"{t.id}/{k}" in stored:
                continue
            for h in (key, base_key):
                if answers.get((h, seed0 + k, t.id)) is None and t not in out.setdefault((h, k), []):
                    out[(h, k)].append(t)
    return {hk: ts for hk, ts in out.items() if ts}


def recover_answers(study: Any, folder: Path, tested: Mapping[str, Sequence[Any]], base_key: str, runs: int,
                    seed0: int, rerun: Callable[[str, int, list[Any]], tuple[Sequence[Any] | None, str]],
                    say: Callable[[str], None]) -> tuple[Answers, dict[str, str]]:
    """The holdout answers (load_answers of <folder>/holdout_answers.jsonl), with those the unjudged pairs of the
    `tested` candidates (hash -> the tasks both ran) need and the file lost (deleted, moved, a line unreadable: one
    line names each, through `say`) run again: `rerun(text hash, k, tasks)` runs run k of that text on those tasks
    (seed seed0 + k) and returns its task scores, or None and why it failed; their answers are appended, their
    scores not stored (the stored ones stay, the futility looks used them). Returns the answers and, per candidate,
    why its pairs cannot be judged (a run again failed)."""
    path = folder / ANSWERS
    answers = load_answers(path)
    need: dict[tuple[str, int], list[Any]] = {}
    for h, tasks in tested.items():
        for hk, ts in missing_answers(study, h, base_key, tasks, runs, seed0, answers).items():
            need.setdefault(hk, []).extend(t for t in ts if t not in need.get(hk, []))
    if not need:  # every pair judged or answered: an unreadable line lost nothing a pair needs
        return answers, {}
    if answers.bad:
        say(answers.bad_line())
    where = f"{path} is missing" if not answers.exists else f"not in {path}"
    say(f"{sum(map(len, need.values()))} holdout answer(s) the unjudged pairs need are lost ({where}): running those "
        f"holdout task runs again (same seeds) for their answers; their stored scores are kept")
    failed: dict[str, str] = {}
    for (h, k), tasks in sorted(need.items(), key=lambda item: (item[0][0] != base_key, item[0])):
        scores, error = rerun(h, k, tasks)
        if scores is None:  # the pairs stay unjudged: the row fails, the same command tries again
            why = (f"the run again of lost holdout answers ({'baseline' if h == base_key else h} run {k + 1}) "
                   f"failed: {error}")[:300]
            for c in ([c for c in tested if c != base_key] if h == base_key else [h]):
                failed.setdefault(c, why)
            continue
        store_answers(folder, h, seed0 + k, scores)
    return load_answers(path), failed


def judge_again(study: Any, keys: Sequence[str]) -> None:
    """Drop the stored judgements of these candidates and start a new judge round: the next conclusion judges
    their pairs again, with the round's seeds (pair_seed), so a response cache that kept the unreadable replies
    is not read back for them."""
    every = dict(study.user_attrs.get(PAIRS_ATTR, {}))
    study.set_user_attr(PAIRS_ATTR, {k: v for k, v in every.items() if k not in keys})
    study.set_user_attr(ROUND_ATTR, judge_round(study) + 1)


def judge_round(study: Any) -> int:
    """How many times a failed judge (no readable reply) sent this study's pairs to be judged again."""
    return int(study.user_attrs.get(ROUND_ATTR, 0))


def pair_seed(seed: int, task: str, round_: int = 0) -> int:
    """The judge's seed for the pairs of one (task, run seed) in a judge round: the same for every candidate."""
    return zlib.crc32((f"pair/{seed}/{task}" + (f"/round{round_}" if round_ else "")).encode())


@dataclass(frozen=True)
class PairedHoldout:
    """One candidate's judged pairs: the per-task mean preferences (a missing one counted -1) and the judge's
    behaviour, or why they are not all judged."""

    per_task: dict[str, float]
    results: tuple[PairResult, ...] = ()
    error: str | None = None

    def line(self, trial: int) -> str:
        """The summary's line on the judge."""
        r = self.results
        wins, ties = sum(1 for x in r if not x.failed and x.preference > 0), sum(1 for x in r if x.preference == 0)
        losses, missing = sum(1 for x in r if not x.failed and x.preference < 0), sum(1 for x in r if x.failed)
        return (f"pairwise holdout trial #{trial}: {len(r)} pairs judged side by side: candidate preferred {wins}, "
                f"tie {ties}, baseline preferred {losses}, no readable verdict {missing} (counted against it); "
                f"orders disagreed on {sum(x.disagreed for x in r)}; {position_bias(r).line()}; "
                f"{sum(x.calls for x in r)} judge calls")


def judge_holdout(study: Any, judge: Any, key: str, base_key: str, tasks: Sequence[Any], runs: int, seed0: int,
                  answers: Answers, pool: Any) -> PairedHoldout:
    """Judge every pair of candidate `key` against the baseline `base_key` on `tasks` (TaskSpec, those both ran),
    runs k < `runs` (seed seed0 + k), those the study has not stored; store each as it arrives."""
    stored = dict(study.user_attrs.get(PAIRS_ATTR, {}).get(key, {}))
    jobs, error, round_ = [], None, judge_round(study)
    for t in tasks:
        for k in range(runs):
            if f"{t.id}/{k}" in stored:
                continue
            cand, base = answers.get((key, seed0 + k, t.id)), answers.get((base_key, seed0 + k, t.id))
            if cand is None or base is None:
                error = error or (f"the answer of holdout task {t.id} run {k + 1} is not in {ANSWERS} (its run "
                                  f"again for it gave none): the pair is not judged")
                continue
            jobs.append((t, k, cand, base))

    def one(job: tuple) -> PairResult:
        t, k, cand, base = job
        return judge(t, cand, base, pair_seed(seed0 + k, t.id, round_))

    with pool.ordered(one, jobs) as done:
        for job, fut in done:
            try:
                res = fut.result()
            except Exception as exc:  # a dead judge: the pair stays unjudged, the row fails, a rerun judges it
                error = error or f"pairwise judge failed on holdout task {job[0].id}: {type(exc).__name__}: {exc}"[:300]
                continue
            stored[f"{job[0].id}/{job[1]}"] = res.to_dict()
            every = dict(study.user_attrs.get(PAIRS_ATTR, {}))
            every[key] = dict(stored)
            study.set_user_attr(PAIRS_ATTR, every)
    results = {name: PairResult.from_dict(rec) for name, rec in stored.items()}
    per_task: dict[str, float] = {}
    for t in tasks:
        prefs = [results[f"{t.id}/{k}"] for k in range(runs) if f"{t.id}/{k}" in results]
        if len(prefs) == runs:
            per_task[t.id] = sum(-1.0 if r.failed else float(r.preference) for r in prefs) / runs
    return PairedHoldout(per_task, tuple(results.values()), error)


def judge_pairs(study: Any, judge: Any, tested: Mapping[str, Sequence[Any]], base_key: str, runs: int, seed0: int,
                answers: Answers, pool: Any, lock: Callable[[], ContextManager[Any]]) -> dict[str, PairedHoldout]:
    """Each `tested` candidate's pairs with the baseline judged (judge_holdout, under `lock`: the study attrs'),
    hash -> its PairedHoldout. When no pair has a readable reply, the judge failed, not a candidate: their
    judgements are dropped, a new judge round starts (judge_again) and every candidate's `error` says why."""
    paired = {}
    for h, tasks in tested.items():
        with lock():
            paired[h] = judge_holdout(study, judge, h, base_key, tasks, runs, seed0, answers, pool)
    results = [r for p in paired.values() for r in p.results]
    if results and all(r.failed for r in results):  # unreadable everywhere: the judge failed, not a candidate
        with lock():
            judge_again(study, list(paired))
        why = (f"pairwise judge: none of the {len(results)} pairs judged has a reply that could be read "
               f"({sum(r.judge_failures for r in results)} unreadable replies): a failed judge, not a preference; "
               f"nothing concluded, no look spent; the same command judges them again with new judge seeds (a "
               f"response cache does not give the same replies back; check the evaluator's model and backend)")
        paired = {h: PairedHoldout({}, p.results, p.error or why) for h, p in paired.items()}
    return paired
