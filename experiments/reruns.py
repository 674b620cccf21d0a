"""Runs of one text on a split after the search, each stored in the study once so that a resume re-runs none:
the holdout confirmation (the baseline and the top-k candidates, seeds cfg.seed + k) and the final race (the top
race_top candidates once more on the train split, seed cfg.seed + 1). A mixin of experiments.sweep.Sweep: it uses
the sweep's exp, runner, pool, progress, tracker, train, holdout, dir, out and _safe."""

from __future__ import annotations

from typing import Any, Sequence

from experiments.evaluate import TrialFailed, evaluate_candidate
from experiments.mlflow_traces import log_evaluation_run
from experiments.promotion import HoldoutScores, race
from experiments.rdb import shared_lock
from experiments.study import holdout_run, store_holdout_run, store_train_rerun, train_reruns


class SplitRuns:
    """The sweep's runs after the search: `_race` (the final race) and `_holdout` (the confirmation)."""

    def _holdout(self, study, key: str, instructions, contexts, runs: int) -> HoldoutScores:
        """`runs` holdout runs of one text (seeds cfg.seed + k), each stored once; their per-task means."""
        with shared_lock(self.exp.storage_url, f"{self.exp.sweep.name}/study_attrs", self.dir / ".study_attrs.lock"):
            try:
                return HoldoutScores.of_runs([self._holdout_run(study, key, instructions, contexts, k, runs)
                                              for k in range(runs)])
            except TrialFailed as exc:
                return HoldoutScores(None, str(exc))

    def _holdout_run(self, study, key: str, instructions, contexts, k: int, runs: int) -> dict[str, float]:
        seed = self.exp.seed + k
        have = holdout_run(study, key, k, seed)
        if have is not None:
            return dict(have)
        who = "baseline" if key == study.user_attrs.get("baseline_hash") else key
        ev = self._split_run("holdout", self.holdout, key, instructions, contexts, k,
                             f"holdout {who}" + (f" run {k + 1}/{runs}" if runs > 1 else ""))
        return dict(store_holdout_run(study, key, k, seed, ev.by_task()))

    def _split_run(self, kind: str, tasks, key: str, instructions, contexts, k: int, label: str) -> Any:
        """One run (seed cfg.seed + k) of a text on a split, with its progress line and MLflow run."""
        seed, tag, name = self.exp.seed + k, (f"-s{self.exp.seed + k}" if k else ""), self.exp.sweep.name
        self.progress.begin(label, f"{name}-{kind}-{key}{tag}", len(tasks))
        ev = evaluate_candidate(instructions, tasks, self.runner, contexts=contexts, seed=seed,
                                run_prefix=f"{name}-{kind}-{key}{tag}", pool=self.pool)
        self._safe(lambda: log_evaluation_run(self.tracker, f"{kind}-{key}" + (f"-seed{seed}" if k else ""), {
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
