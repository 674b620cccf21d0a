"""Runs of one text on a split after the search, each stored in the study once so that a resume re-runs none:
the holdout confirmation (the baseline and the top-k candidates the train filter passed, seeds cfg.seed + k) and
the final race (the top race_top candidates once more on the train split, seed cfg.seed + 1). The baseline's
repeats for the noise floor (seeds cfg.seed + k on the train split) live here too. SplitRuns is the sweep's
collaborator for them: experiments/sweep/_sweep.py's Sweep makes one once the study has pinned the experiment and
its noise source, and calls noise, baseline_runs, race, promotion and confirmable.

With sweep.holdout_futility_block = B > 0 the holdout runs in blocks of B tasks, or of a quarter of the holdout when
that is larger (experiments.promotion.HoldoutBlocks): the baseline's runs of a block, then each live candidate's,
then the futility look (conditional power of the final test below 0.1 under the design's detectable effect); a
stopped candidate runs no further block, and the baseline stops with the last live candidate. Run k of a text is
stored as one per-task dict however many blocks filled it (the tasks of each block merged in as they finish, its
cost beside it), so a resume runs only the tasks a block still lacks, and a study that stopped a candidate finds
the same stop in its stored scores and runs nothing more of it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from experiments.config import ExperimentConfig, holdout_set, sweep_design_problem
from experiments.promotion import (HoldoutBlocks, HoldoutScores, Promotion, decide_look, judge_pairs, race,
                                   recover_answers, standing_winner, store_answers, store_holdout_cost,
                                   train_filtered)
from experiments.runs import TrialFailed, evaluate_candidate, make_judge
from experiments.stats import Look, NoiseFloor, next_look, noise_floor, recorded, run_costs
from experiments.storage import shared_lock
from experiments.tracking import log_evaluation_run
from harness.stores import sqlite_file

from ._holdout_looks import HOLDOUT_SET_ATTR, LOOKS_ATTR, other_looks
from ._preflight import holdout_need_line, noise_measured_line, sweep_confirmable
from ._study import baseline_trial, holdout_run, store_holdout_run, store_train_rerun, train_reruns


class SplitRuns:
    """The sweep's runs of a text on a split: `noise` (the noise floor: the calibration's, else the baseline's
    repeats, `baseline_runs`), `race` (the final race), `promotion` (the holdout runs, then the verdict at this
    look's level) and `confirmable` (the summary's design power line). `pair_lines` collects the pairwise judge's
    summary lines."""

    def __init__(self, *, exp: ExperimentConfig, runner: Any, pool: Callable[[], Any], progress: Any, tracker: Any,
                 calibration: Any, tasks: Sequence[Any], train: Sequence[Any], holdout: Sequence[Any], folder: Path,
                 out: Callable[[str], None], judge: Callable[..., Any] | None,
                 safe: Callable[[Callable[[], Any]], None]) -> None:
        """exp: the experiment as the study pinned it; pool: the sweep's RunPool, made when first asked for;
        calibration: the stored calibration whose noise floor replaces the baseline's repeats (None: none); tasks,
        train, holdout: the benchmark's tasks and its splits; folder: the sweep's folder (locks, holdout answers);
        judge: the pairwise holdout's judge (None: the evaluator role's); safe: runs a tracking call, a failure a
        warning."""
        self.exp, self.runner, self._pool, self.progress, self.tracker = exp, runner, pool, progress, tracker
        self.calibration, self.tasks, self.train, self.holdout = calibration, tasks, train, holdout
        self.dir, self.out, self.judge, self._safe = folder, out, judge, safe
        self.pair_lines: list[str] = []  # sweep.holdout_compare=pairwise: the judge's line per tested candidate

    @property
    def pool(self) -> Any:
        return self._pool()

    def noise(self, study: Any, baseline: Mapping[str, str], contexts: Any) -> NoiseFloor:
        """The noise floor in use: the stored calibration's, else this study's baseline repeats."""
        if self.calibration is not None:
            return self.calibration.noise_floor()
        return noise_floor(self.baseline_runs(study, baseline, contexts))

    def baseline_runs(self, study: Any, baseline: Mapping[str, str], contexts) -> list[dict[str, float]]:
        """Baseline trial scores (seed = cfg.seed) plus r-1 further runs with other seeds, each stored once."""
        with self._attrs_lock():
            return self._baseline_runs_locked(study, baseline, contexts)

    def _baseline_runs_locked(self, study: Any, baseline: Mapping[str, str], contexts) -> list[dict[str, float]]:
        bt = baseline_trial(study)
        if bt is None:
            return []
        runs = [dict(bt.user_attrs.get("task_scores", {}))]
        if self.calibration is not None:  # the calibration measured the noise: no baseline repeats
            return runs
        stored = dict(study.user_attrs.get("baseline_runs", {}))
        ran = False
        sw = self.exp.sweep
        for k in range(1, sw.baseline_repeats):
            seed = self.exp.seed + k
            if str(seed) not in stored:
                self.out(f"[{sw.name}] baseline repeat {k + 1}/{sw.baseline_repeats} (seed {seed}) for the noise floor")
                self.progress.begin(f"baseline repeat {k + 1}/{sw.baseline_repeats}", f"{sw.name}-baseline-s{seed}",
                                    len(self.train))
                ev = evaluate_candidate(baseline, self.train, self.runner, contexts=contexts, seed=seed,
                                        run_prefix=f"{sw.name}-baseline-s{seed}", pool=self.pool)
                # logged before it is stored, as the race and holdout runs are: a kill between the two re-runs the
                # repeat, whose MLflow run is then found, not made twice (log_evaluation_run); the other order
                # would lose the run
                self._safe(lambda: log_evaluation_run(self.tracker, f"baseline-repeat-seed{seed}",
                                                      {"kind": "baseline_repeat", "seed": str(seed)}, ev))
                stored[str(seed)] = ev.by_task()
                ran = True
                study.set_user_attr("baseline_runs", stored)
            runs.append(dict(stored[str(seed)]))
        if ran and len(runs) >= 2:  # the detectable effect, once the repeats have measured the noise
            self.out(f"[{sw.name}] {noise_measured_line(self.exp, runs, len(self.train))}")
        return runs

    def race(self, study, ranked: Sequence[Any], contexts) -> list[Any]:
        """The final race: the top race_top candidates run once more on the train split (seed cfg.seed + 1, each
        run stored once), then every candidate is ranked among those with as many runs on the mean of its runs
        (experiments.promotion.race): a candidate whose race run failed does not keep its lucky one-run mean at
        the top."""
        sw, seed = self.exp.sweep, self.exp.seed + 1
        if sw.race_top < 1 or len(ranked) < 2 or not self.train:
            return list(ranked)
        with self._attrs_lock():
            for i, c in enumerate(ranked[: sw.race_top]):
                if str(seed) not in train_reruns(study.user_attrs, c.hash):
                    try:
                        ev = self._split_run("race", self.train, c.hash, c.instructions, contexts, 1,
                                             f"final race {i + 1}/{min(sw.race_top, len(ranked))}: {c.hash}")
                    except TrialFailed as exc:  # one run left: it ranks below every raced candidate (race)
                        self.out(f"[{sw.name}] final race run of {c.hash} failed: {exc}")
                        continue
                    store_train_rerun(study, c.hash, seed, ev.by_task())
        stored = study.user_attrs  # one read of the study's attrs (a query on RDB storage), not one per candidate
        return race(ranked, {c.hash: list(train_reruns(stored, c.hash).values()) for c in ranked})

    def promotion(self, study, top, ref, nf: NoiseFloor, train_floor: float, base_hash: str, baseline,
                  contexts) -> tuple[Promotion, HoldoutScores | None, Look | None]:
        """Run the holdout for the baseline and the top candidates (stored in the study), then decide at the level
        of this look (experiments.stats: every conclusion of the study spends from one alpha)."""
        if not (self.holdout and top):
            return Promotion((), None), None, None
        sw = self.exp.sweep
        blocks = HoldoutBlocks.of([t.id for t in self.holdout], sw.seed, sw.holdout_futility_block, alpha=sw.alpha,
                                  power=self.exp.calibrate.power)
        # the family is fixed by train data before any holdout run: a candidate the train filter cuts is never
        # tested, so it runs nothing on the holdout
        family = train_filtered(top, ref, train_floor=train_floor, alpha=sw.alpha, train_filter=sw.train_filter)
        going = [c for c in top if c.hash in family]
        if going and sw.holdout_test == "tasks" and nf.repeats >= 2:
            level = next_look(list(study.user_attrs.get(LOOKS_ATTR, [])), family, sw.alpha,
                              self._other_looks(study)).level
            need = holdout_need_line(self.exp, going, ref, nf.sigma, max(nf.repeats, 1), level)
            if need:
                self.out(f"[{sw.name}] {need}")
        base, held = self._holdout_blocks(study, [c for c in top if c.hash in family], base_hash, baseline,
                                          contexts, blocks)
        prefs = (self._pairwise(study, top, held, base, base_hash, baseline, contexts, blocks)
                 if sw.holdout_compare == "pairwise" else None)
        problem = sweep_design_problem(self.exp)
        with self._attrs_lock(), self._looks_lock():
            stored = list(study.user_attrs.get(LOOKS_ATTR, []))
            look = (next_look(stored, family, sw.alpha, self._other_looks(study)) if sw.holdout_test == "tasks"
                    else None)
            verdict = decide_look(top, ref, base, held, sweep=sw, noise=nf, level=look.level if look else sw.alpha,
                                  train_floor=train_floor, attrs=study.user_attrs, base_key=base_hash,
                                  baseline=baseline, holdout_tasks=self.holdout,
                                  benchmark_tasks=self.exp.benchmark.tasks, blocks=blocks, preferences=prefs)
            # spent: a later look tests at the next level; a futility stop spends it too (it is non-binding: the
            # claim it gave up would have been made at this level)
            if look is not None and look.new and any(r.holdout_p is not None or r.stopped_after is not None
                                                     for r in verdict.rows):
                study.set_user_attr(LOOKS_ATTR, recorded(stored, look))
            if problem:  # a design that cannot promote does not (never UNDERPOWERED and PROMOTED)
                verdict = dataclasses.replace(verdict, winner=None)
            else:
                verdict = standing_winner(study, verdict, base_hash, list(study.user_attrs.get(LOOKS_ATTR, [])))
        return verdict, base, look

    def confirmable(self, study, cands: Sequence[Any], nf: NoiseFloor, baseline_runs: int, ref, look) -> str:
        """The summary's design power line (experiments/sweep/_preflight.py's sweep_confirmable) at this look's
        level, else at the level the next look on these holdout tasks would have (every overlapping study's looks
        counted); without a noise floor, with the run noise of the baseline's stored holdout runs."""
        base, seed = study.user_attrs.get("baseline_hash"), self.exp.seed
        runs = [holdout_run(study, base, k, seed + k) for k in range(self.exp.sweep.holdout_baseline_runs)] if base \
            else []
        return sweep_confirmable(self.exp, noise=nf, baseline_runs=max(baseline_runs, 1), reference=ref, look=look,
                                 cands=cands, calibration=self.calibration,
                                 stored=list(study.user_attrs.get(LOOKS_ATTR, [])),
                                 others=self._other_looks(study) if look is None else (),
                                 holdout_baseline=[dict(r) for r in runs if r])

    # -- the holdout's looks -------------------------------------------------------------------------------
    def _other_looks(self, study) -> list[dict]:
        """The looks other studies in this storage made on holdout tasks this study's holdout shares (any task in
        common, by id and content: experiments/sweep/_holdout_looks.py's other_looks). The study's own holdout set
        is stored on it so that later studies can find it."""
        key = holdout_set(self.tasks)
        if study.user_attrs.get(HOLDOUT_SET_ATTR) != key:
            study.set_user_attr(HOLDOUT_SET_ATTR, key)
        return other_looks(self.exp.storage_url, study.study_name, key)

    def _looks_lock(self):
        """One conclusion at a time on the storage's holdout looks (every study in it): a lock in a server
        database, else a file beside the SQLite file."""
        db = sqlite_file(self.exp.storage_url)
        return shared_lock(self.exp.storage_url, "holdout_looks",
                           (db.parent / f".{db.name}.holdout_looks.lock") if db is not None else None)

    def _attrs_lock(self):
        """One writer at a time on this study's attrs (its stored runs, looks and judgements)."""
        return shared_lock(self.exp.storage_url, f"{self.exp.sweep.name}/study_attrs", self.dir / ".study_attrs.lock")

    # -- the holdout's runs --------------------------------------------------------------------------------
    def _holdout_blocks(self, study, top, base_hash: str, baseline, contexts,
                        blocks: HoldoutBlocks) -> tuple[HoldoutScores, dict[str, HoldoutScores]]:
        """The baseline's and the tested candidates' (`top`: the train-filtered family) holdout runs, block by block
        of sweep.holdout_futility_block tasks in the blocks' order (one block of every task when it is 0): after
        each block but the last, a candidate that the futility stop stops runs nothing more; the baseline runs a
        block while a candidate does, and its first block with none (its runs measure the run noise the summary's
        design power line needs). A failed baseline run fails every row (no candidate scores); a failed candidate
        run ends that candidate's blocks."""
        sw = self.exp.sweep
        by_id = {t.id: t for t in self.holdout}
        live, held = list(top), {}
        base = HoldoutScores(None, "no holdout scores")
        for m in blocks.ends:
            tasks = [by_id[i] for i in blocks.order[:m]]
            base = self._holdout(study, base_hash, baseline, contexts, sw.holdout_baseline_runs, tasks)
            if not base.scores:
                return base, {}
            for c in live:
                held[c.hash] = self._holdout(study, c.hash, c.instructions, contexts, sw.holdout_candidate_runs, tasks)
            live = [c for c in live if held[c.hash].scores and blocks.stop(held[c.hash].scores, base.scores) is None]
            if not live:
                break
        return base, held

    def _pairwise(self, study, top: Sequence[Any], held: dict[str, HoldoutScores], base: HoldoutScores,
                  base_hash: str, baseline: Mapping[str, str], contexts,
                  blocks: HoldoutBlocks) -> dict[str, dict[str, float]]:
        """sweep.holdout_compare=pairwise (experiments/promotion/_pairs.py): each tested candidate's pairs with the
        baseline judged side by side on the tasks both ran (none for a futility-stopped one: it is not tested);
        hash -> task -> mean preference. Answers the unjudged pairs need that are lost are run again first
        (recover_answers). A candidate whose pairs are not all judged has its holdout failed in `held` (its row says
        why, the sweep exits 3 and the same command judges the rest); so does every candidate when no pair has a
        readable reply (a failed judge: judge_pairs drops its judgements and starts a new judge round, so the same
        command judges them again, with new seeds)."""
        sw, out = self.exp.sweep, {}
        if not base.scores:
            return out
        runs = min(sw.holdout_candidate_runs, sw.holdout_baseline_runs)
        tested = {h: [t for t in self.holdout if t.id in hold.scores and t.id in base.scores]
                  for h, hold in held.items() if hold.scores and not blocks.stop(hold.scores, base.scores)}
        if not tested:
            return out
        texts = {c.hash: c.instructions for c in top} | {base_hash: baseline}

        def rerun(h: str, k: int, tasks: list[Any]) -> tuple[Sequence[Any] | None, str]:
            """Run k of text h on `tasks` again for its answers (its scores are not stored)."""
            who = "baseline" if h == base_hash else h
            try:
                ev = self._split_run("holdout", tasks, h, texts[h], contexts, k,
                                     f"holdout {who} run {k + 1}: {len(tasks)} lost answer(s)", part="-answers")
            except TrialFailed as exc:
                return None, str(exc)
            return ev.scores, ""

        answers, lost = recover_answers(study, self.dir, tested, base_hash, runs, self.exp.seed, rerun,
                                        lambda line: self.out(f"[{sw.name}] {line}"))
        judge = self.judge if self.judge is not None else make_judge(self.exp, self.runner.roles.evaluator)
        paired = judge_pairs(study, judge, {h: ts for h, ts in tested.items() if h not in lost}, base_hash, runs,
                             self.exp.seed, answers, self.pool, self._attrs_lock)
        trials = {c.hash: c.number for c in top}
        self.pair_lines += [p.line(trials[h]) for h, p in paired.items()]
        for h in tested:
            why = lost[h] if h in lost else paired[h].error
            if why:
                held[h] = HoldoutScores(None, why)
            else:
                out[h] = paired[h].per_task
        return out

    def _holdout(self, study, key: str, instructions, contexts, runs: int, tasks=None) -> HoldoutScores:
        """`runs` holdout runs of one text (seeds cfg.seed + k) on `tasks` (default: every holdout task), each task
        run stored once; their per-task means over those tasks."""
        tasks = tuple(self.holdout if tasks is None else tasks)
        with self._attrs_lock():
            try:
                return HoldoutScores.of_runs([self._holdout_run(study, key, instructions, contexts, k, runs, tasks)
                                              for k in range(runs)])
            except TrialFailed as exc:
                return HoldoutScores(None, str(exc))

    def _holdout_run(self, study, key: str, instructions, contexts, k: int, runs: int,
                     tasks: Sequence[Any]) -> dict[str, float]:
        """Run k of one text on `tasks`: the stored scores, with the tasks not stored yet run (seed cfg.seed + k)
        and merged into the stored run (a block of the futility stop, or a resume of one)."""
        seed = self.exp.seed + k
        have = dict(holdout_run(study, key, k, seed) or {})
        missing = [t for t in tasks if t.id not in have]
        if missing:
            who = "baseline" if key == study.user_attrs.get("baseline_hash") else key
            part = (f"tasks{len(tasks) - len(missing) + 1}-{len(tasks)}" if len(missing) < len(self.holdout)
                    else "")  # a block of the futility stop
            ev = self._split_run("holdout", missing, key, instructions, contexts, k,
                                 f"holdout {who}" + (f" run {k + 1}/{runs}" if runs > 1 else "")
                                 + (f" {part.replace('tasks', 'tasks ')} of {len(self.holdout)}" if part else ""),
                                 part=f"-{part}" if part else "")
            # beside the scores: the cost guard's evidence. A block's costs are stored as an entry of their own
            # ("<seed>/tasks<a>-<b>"): each (task, seed) is in one entry, and holdout_cost averages per task
            store_holdout_cost(study, key, f"{seed}/{part}" if part else seed, run_costs(ev.scores))
            if self.exp.sweep.holdout_compare == "pairwise":  # the answers the side-by-side judge reads
                store_answers(self.dir, key, seed, ev.scores)
            have = dict(store_holdout_run(study, key, k, seed, {**have, **ev.by_task()}))
        return {t.id: have[t.id] for t in tasks}

    def _split_run(self, kind: str, tasks, key: str, instructions, contexts, k: int, label: str,
                   part: str = "") -> Any:
        """One run (seed cfg.seed + k) of a text on a split (or on a block of it: `part` names it in MLflow), with
        its progress line and MLflow run."""
        seed, tag, name = self.exp.seed + k, (f"-s{self.exp.seed + k}" if k else ""), self.exp.sweep.name
        self.progress.begin(label, f"{name}-{kind}-{key}{tag}", len(tasks))
        ev = evaluate_candidate(instructions, tasks, self.runner, contexts=contexts, seed=seed,
                                run_prefix=f"{name}-{kind}-{key}{tag}", pool=self.pool)
        self._safe(lambda: log_evaluation_run(self.tracker, f"{kind}-{key}" + (f"-seed{seed}" if k else "") + part, {
            "kind": kind, "instruction_hash": key, **({"seed": str(seed)} if k else {})}, ev))
        return ev
