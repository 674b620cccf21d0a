"""Runs of one text on a split after the search, each stored in the study once so that a resume re-runs none:
the holdout confirmation (the baseline and the top-k candidates the train filter passed, seeds cfg.seed + k) and
the final race (the top race_top candidates once more on the train split, seed cfg.seed + 1). The baseline's
repeats for the noise floor (seeds cfg.seed + k on the train split) live here too. A mixin of
experiments.sweep.Sweep: it uses the sweep's exp, runner, pool, progress, tracker, calibration, train, holdout, dir, out and _safe.

With sweep.holdout_futility_block = B > 0 (issue 42) the holdout runs in blocks of B tasks, or of a quarter of the
holdout when that is larger (futility_looks, in experiments.sweep's holdout_order): the baseline's runs of a block,
then each live candidate's, then the futility look (futility_stop: conditional power of the final test below 0.1
under the design's detectable effect); a stopped candidate runs no further block, and the baseline stops with the last live candidate. Run k of a text is
stored as one per-task dict however many blocks filled it (the tasks of each block merged in as they finish, its
cost beside it), so a resume runs only the tasks a block still lacks, and a study that stopped a candidate finds
the same stop in its stored scores and runs nothing more of it."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from experiments.config import holdout_set, sweep_design_problem
from experiments.runs import TrialFailed, evaluate_candidate, make_judge
from experiments.stats import CostGuard, Look, NoiseFloor, next_look, noise_floor, recorded, run_costs
from experiments.storage import shared_lock
from experiments.tracking import log_evaluation_run
from harness.stores import sqlite_file

from ._holdout_costs import holdout_cost, holdout_cost_diffs, store_holdout_cost
from ._holdout_looks import HOLDOUT_SET_ATTR, LOOKS_ATTR, other_looks
from ._holdout_tests import task_sources
from ._pairs import (ANSWERS, Answers, PairedHoldout, judge_again, judge_holdout, load_answers, missing_answers,
                     store_answers)
from ._preflight import noise_measured_line, sweep_confirmable
from ._promotion import (HoldoutScores, HoldoutTest, Promotion, decide, race, row_from_record, row_record,
                         train_filtered)
from ._screening import futility_looks, futility_stop, holdout_order
from ._study import baseline_trial, holdout_run, store_holdout_run, store_train_rerun, train_reruns

STANDING_ATTR = "standing_winner"  # the study's promoted row: carried forward by later conclusions (issue 40 F)


class SplitRuns:
    """The sweep's runs of a text on a split: `_noise` (the baseline's repeats for the noise floor), `_race` (the
    final race), `_holdout` (the confirmation's runs) and `_promotion` (the holdout runs, then the verdict at this
    look's level)."""

    def _noise(self, study: Any, baseline: Mapping[str, str], contexts: Any) -> NoiseFloor:
        """The noise floor in use: the stored calibration's, else this study's baseline repeats."""
        if self.calibration is not None:
            return self.calibration.noise_floor()
        return noise_floor(self._baseline_runs(study, baseline, contexts))

    def _baseline_runs(self, study: Any, baseline: Mapping[str, str], contexts) -> list[dict[str, float]]:
        """Baseline trial scores (seed = cfg.seed) plus r-1 further runs with other seeds, each stored once."""
        with shared_lock(self.exp.storage_url, f"{self.exp.sweep.name}/study_attrs", self.dir / ".study_attrs.lock"):
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

    def _promotion(self, study, top, ref, nf: NoiseFloor, train_floor: float, base_hash: str, baseline,
                   contexts) -> tuple[Promotion, HoldoutScores | None, Look | None]:
        """Run the holdout for the baseline and the top candidates (stored in the study), then decide at the level
        of this look (experiments.stats: every conclusion of the study spends from one alpha)."""
        if not (self.holdout and top):
            return Promotion((), None), None, None
        sw = self.exp.sweep
        order = holdout_order([t.id for t in self.holdout], sw.seed, sw.holdout_futility_block)
        # the family is fixed by train data before any holdout run: a candidate the train filter cuts is never
        # tested, so it runs nothing on the holdout (it ran every block until the filter acted in decide: 36 of the
        # README main command's 76 task runs)
        family = train_filtered(top, ref, train_floor=train_floor, alpha=sw.alpha, train_filter=sw.train_filter)
        base, held = self._holdout_blocks(study, [c for c in top if c.hash in family], base_hash, baseline,
                                          contexts, order)
        prefs = (self._pairwise(study, top, held, base, base_hash, baseline, contexts, order)
                 if sw.holdout_compare == "pairwise" else None)
        problem = sweep_design_problem(self.exp)
        with shared_lock(self.exp.storage_url, f"{sw.name}/study_attrs", self.dir / ".study_attrs.lock"), \
                self._looks_lock():
            stored = list(study.user_attrs.get(LOOKS_ATTR, []))
            look = (next_look(stored, family, sw.alpha, self._other_looks(study)) if sw.holdout_test == "tasks"
                    else None)
            test = HoldoutTest.of(nf, alpha=look.level if look else sw.alpha, rule=sw.holdout_test)
            costs = {h: holdout_cost_diffs(study.user_attrs, h, base_hash) for h in held}
            guard = CostGuard(sw.cost_metric, sw.max_cost_increase)  # decide tests it at the look's level
            cost_of = {h: holdout_cost(study.user_attrs, h, sw.cost_metric) for h in [*held, base_hash]}
            verdict = decide(top, ref, base, held, train_floor=train_floor, alpha=sw.alpha, test=test,
                             guard=guard, costs=cost_of, base_key=base_hash, cost_diffs=costs,
                             max_task_loss=sw.max_task_loss, task_types={t.id: t.task_type for t in self.holdout},
                             baseline_instructions=baseline, train_filter=sw.train_filter,
                             futility_block=sw.holdout_futility_block, order=order, preferences=prefs,
                             task_sources=task_sources(self.exp.benchmark.tasks))
            # spent: a later look tests at the next level; a futility stop spends it too (it is non-binding: the
            # claim it gave up would have been made at this level)
            if look is not None and look.new and any(r.holdout_p is not None or r.stopped_after is not None
                                                     for r in verdict.rows):
                study.set_user_attr(LOOKS_ATTR, recorded(stored, look))
            if problem:  # a design that cannot promote does not (never UNDERPOWERED and PROMOTED)
                verdict = dataclasses.replace(verdict, winner=None)
            else:
                verdict = self._standing(study, verdict, base_hash)
        return verdict, base, look

    def _standing(self, study, verdict: Promotion, base_hash: str) -> Promotion:
        """The study's standing winner (issue 40 F): a conclusion's winner is stored; a later conclusion whose look
        confirms no candidate, or only one with a lower holdout mean (the same stored baseline holdout runs), keeps
        it: the earlier look's confirmation stands at that look's level, so the summary, the registry line and
        promoted_synth.yaml keep agreeing with the alias it moved. A better confirmed candidate replaces it."""
        rec = study.user_attrs.get(STANDING_ATTR)
        new = verdict.winner
        if new is not None and (rec is None or rec["row"]["hash"] == new.hash
                                or new.holdout_mean > float(rec["row"]["holdout_mean"])):
            study.set_user_attr(STANDING_ATTR, {"row": row_record(new), "look": self._look_number(study, new)})
            return verdict
        if rec is None:
            return verdict
        why = ("this look confirmed no candidate" if new is None else
               f"this look's winner trial #{new.trial} has a lower holdout mean ({new.holdout_mean:.3f} < "
               f"{float(rec['row']['holdout_mean']):.3f})")
        look = f"holdout look {rec['look']} of these holdout tasks" if rec.get("look") else "an earlier look"
        row = row_from_record(rec["row"], cost_diffs=holdout_cost_diffs(study.user_attrs, rec["row"]["hash"],
                                                                        base_hash),
                              standing=f"the study's standing winner, confirmed at {look} (level "
                                       f"{float(rec['row']['holdout_level']):.4g}); kept: {why}")
        return Promotion((*verdict.rows, row), row, verdict.pick or row)

    @staticmethod
    def _look_number(study, row) -> int | None:
        """The number of the stored look whose family holds the row's candidate (the latest such)."""
        looks = list(study.user_attrs.get(LOOKS_ATTR, []))
        found = [int(e.get("number", i + 1)) for i, e in enumerate(looks) if row.hash in e.get("family", ())]
        return found[-1] if found else None

    def _other_looks(self, study) -> list[dict]:
        """The looks other studies in this storage made on holdout tasks this study's holdout shares (any task in
        common, by id and content: experiments.sweep.other_looks). The study's own holdout set is stored on it so
        that later studies can find it."""
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

    def _confirmable(self, study, cands: Sequence[Any], nf: NoiseFloor, baseline_runs: int, ref, look) -> str:
        """The summary's design power line (experiments.sweep.sweep_confirmable) at this look's level, else at the
        level the next look on these holdout tasks would have (every overlapping study's looks counted); without a
        noise floor, with the run noise of the baseline's stored holdout runs."""
        base, seed = study.user_attrs.get("baseline_hash"), self.exp.seed
        runs = [holdout_run(study, base, k, seed + k) for k in range(self.exp.sweep.holdout_baseline_runs)] if base \
            else []
        return sweep_confirmable(self.exp, noise=nf, baseline_runs=max(baseline_runs, 1), reference=ref, look=look,
                                 cands=cands, calibration=self.calibration,
                                 stored=list(study.user_attrs.get(LOOKS_ATTR, [])),
                                 others=self._other_looks(study) if look is None else (),
                                 holdout_baseline=[dict(r) for r in runs if r])

    def _holdout_blocks(self, study, top, base_hash: str, baseline, contexts,
                        order: Sequence[str]) -> tuple[HoldoutScores, dict[str, HoldoutScores]]:
        """The baseline's and the tested candidates' (`top`: the train-filtered family) holdout runs, block by block
        of sweep.holdout_futility_block tasks in `order` (one block of every task when it is 0): after each block
        but the last, a candidate that futility_stop stops runs nothing more; the baseline runs a block while a
        candidate does, and its first block with none (its runs measure the run noise the summary's design power
        line needs). A failed baseline run fails every row (no candidate scores); a failed candidate run ends that
        candidate's blocks."""
        sw = self.exp.sweep
        by_id = {t.id: t for t in self.holdout}
        ends = [*futility_looks(len(order), sw.holdout_futility_block), len(order)]
        live, held = list(top), {}
        base = HoldoutScores(None, "no holdout scores")
        for m in ends:
            tasks = [by_id[i] for i in order[:m]]
            base = self._holdout(study, base_hash, baseline, contexts, sw.holdout_baseline_runs, tasks)
            if not base.scores:
                return base, {}
            for c in live:
                held[c.hash] = self._holdout(study, c.hash, c.instructions, contexts, sw.holdout_candidate_runs, tasks)
            live = [c for c in live if held[c.hash].scores
                    and futility_stop(held[c.hash].scores, base.scores, order, sw.holdout_futility_block) is None]
            if not live:
                break
        return base, held

    def _pairwise(self, study, top: Sequence[Any], held: dict[str, HoldoutScores], base: HoldoutScores,
                  base_hash: str, baseline: Mapping[str, str], contexts,
                  order: Sequence[str]) -> dict[str, dict[str, float]]:
        """sweep.holdout_compare=pairwise (experiments/sweep/_pairs.py): each tested candidate's pairs with the
        baseline judged side by side on the tasks both ran (none for a futility-stopped one: it is not tested);
        hash -> task -> mean preference. Answers the unjudged pairs need that are lost are run again first
        (_lost_answers). A candidate whose pairs are not all judged has its holdout failed in `held` (its row says
        why, the sweep exits 3 and the same command judges the rest); so does every candidate when no pair has a
        readable reply (a failed judge: its judgements are dropped and a new judge round starts, so the same
        command judges them again, with new seeds: _pairs.judge_again)."""
        sw, out = self.exp.sweep, {}
        if not base.scores:
            return out
        runs = min(sw.holdout_candidate_runs, sw.holdout_baseline_runs)
        tested = {h: [t for t in self.holdout if t.id in hold.scores and t.id in base.scores]
                  for h, hold in held.items()
                  if hold.scores and not futility_stop(hold.scores, base.scores, order, sw.holdout_futility_block)}
        if not tested:
            return out
        texts = {c.hash: c.instructions for c in top} | {base_hash: baseline}
        answers, lost = self._lost_answers(study, tested, base_hash, texts, contexts, runs)
        judge = self.judge if self.judge is not None else make_judge(self.exp, self.runner.roles.evaluator)
        trials = {c.hash: c.number for c in top}
        paired = {}
        for h, tasks in tested.items():
            if h in lost:
                held[h] = HoldoutScores(None, lost[h])
                continue
            with shared_lock(self.exp.storage_url, f"{sw.name}/study_attrs", self.dir / ".study_attrs.lock"):
                paired[h] = judge_holdout(study, judge, h, base_hash, tasks, runs, self.exp.seed, answers, self.pool)
            self.pair_lines.append(paired[h].line(trials[h]))
        results = [r for p in paired.values() for r in p.results]
        if results and all(r.failed for r in results):  # unreadable everywhere: the judge failed, not a candidate
            with shared_lock(self.exp.storage_url, f"{sw.name}/study_attrs", self.dir / ".study_attrs.lock"):
                judge_again(study, list(paired))
            why = (f"pairwise judge: none of the {len(results)} pairs judged has a reply that could be read "
                   f"({sum(r.judge_failures for r in results)} unreadable replies): a failed judge, not a preference; "
                   f"nothing concluded, no look spent; the same command judges them again with new judge seeds (a "
                   f"response cache does not give the same replies back; check the evaluator's model and backend)")
            paired = {h: PairedHoldout({}, p.results, p.error or why) for h, p in paired.items()}
        for h, p in paired.items():
            if p.error:
                held[h] = HoldoutScores(None, p.error)
            else:
                out[h] = p.per_task
        return out

    def _lost_answers(self, study, tested: Mapping[str, Sequence[Any]], base_hash: str,
                      texts: Mapping[str, Mapping[str, str]], contexts, runs: int) -> tuple[Answers, dict[str, str]]:
        """The holdout answers (_pairs.load_answers), with those the unjudged pairs need and the file lost (deleted,
        moved, a line unreadable: one line names each) run again: the text's run k of those tasks, seed
        cfg.seed + k, its answers appended; its scores are not stored (the stored ones stay, the futility looks
        used them). Returns the answers and, per candidate, why its pairs cannot be judged (a run again failed)."""
        name, path = self.exp.sweep.name, self.dir / ANSWERS
        answers = load_answers(path)
        need: dict[tuple[str, int], list[Any]] = {}
        for h, tasks in tested.items():
            for hk, ts in missing_answers(study, h, base_hash, tasks, runs, self.exp.seed, answers).items():
                need.setdefault(hk, []).extend(t for t in ts if t not in need.get(hk, []))
        if not need:  # every pair judged or answered: an unreadable line lost nothing a pair needs
            return answers, {}
        if answers.bad:
            self.out(f"[{name}] {answers.bad_line()}")
        where = f"{path} is missing" if not answers.exists else f"not in {path}"
        self.out(f"[{name}] {sum(map(len, need.values()))} holdout answer(s) the unjudged pairs need are lost "
                 f"({where}): running those holdout task runs again (same seeds) for their answers; their stored "
                 f"scores are kept")
        failed: dict[str, str] = {}
        for (h, k), tasks in sorted(need.items(), key=lambda item: (item[0][0] != base_hash, item[0])):
            who = "baseline" if h == base_hash else h
            try:
                ev = self._split_run("holdout", tasks, h, texts[h], contexts, k,
                                     f"holdout {who} run {k + 1}: {len(tasks)} lost answer(s)", part="-answers")
            except TrialFailed as exc:  # the pairs stay unjudged: the row fails, the same command tries again
                why = f"the run again of lost holdout answers ({who} run {k + 1}) failed: {exc}"[:300]
                for c in ([c for c in tested if c != base_hash] if h == base_hash else [h]):
                    failed.setdefault(c, why)
                continue
            store_answers(path, h, self.exp.seed + k, ev.scores)
        return load_answers(path), failed

    def _holdout(self, study, key: str, instructions, contexts, runs: int, tasks=None) -> HoldoutScores:
        """`runs` holdout runs of one text (seeds cfg.seed + k) on `tasks` (default: every holdout task), each task
        run stored once; their per-task means over those tasks."""
        tasks = tuple(self.holdout if tasks is None else tasks)
        with shared_lock(self.exp.storage_url, f"{self.exp.sweep.name}/study_attrs", self.dir / ".study_attrs.lock"):
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
            # beside the scores: the cost guard (issue 34). A block's costs are stored as an entry of their own
            # ("<seed>/tasks<a>-<b>"): each (task, seed) is in one entry, and holdout_cost averages per task
            store_holdout_cost(study, key, f"{seed}/{part}" if part else seed, run_costs(ev.scores))
            if self.exp.sweep.holdout_compare == "pairwise":  # the answers the side-by-side judge reads
                store_answers(self.dir / ANSWERS, key, seed, ev.scores)
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

    def _race(self, study, ranked: Sequence[Any], contexts) -> list[Any]:
        """The final race: the top race_top candidates run once more on the train split (seed cfg.seed + 1, each
        run stored once), then every candidate is ranked among those with as many runs on the mean of its runs
        (promotion.race): a candidate whose race run failed does not keep its lucky one-run mean at the top."""
        sw, seed = self.exp.sweep, self.exp.seed + 1
        if sw.race_top < 1 or len(ranked) < 2 or not self.train:
            return list(ranked)
        with shared_lock(self.exp.storage_url, f"{sw.name}/study_attrs", self.dir / ".study_attrs.lock"):
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


