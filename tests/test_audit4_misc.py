"""Audit 4, assorted items: the pairwise A/B judges again after a failed judge even through a response cache; a
holdout answer stored as null is lost, not an empty answer; tasks.count=auto sizes from a calibration of the same
models on another benchmark (saying so) and says what to add when none matches; the sizing projects the sweep the
user will run; no `HTTP Request:` log line per call; the MLflow parent run shows a futility stop; the benchmark is
an MLflow evaluation dataset of the experiment.

The A/B and sweep halves are scripted (tests/test_ab_pairwise.py's AnswerArm, tests/test_sweep_round3.py's sweeps);
the response cache, the ledger, the answers file, the calibration store and the MLflow store are the real ones."""

from __future__ import annotations

import json

import pytest
from test_ab_pairwise import AnswerArm, _exp, _run, judge_llm

from harness.inference import ResponseCache
from harness.inference._cache import CachedLLM
from harness.inference._fake import FakeLLM

# -- 1. a failed pairwise judge is judged again past the response cache -----------------------------------------


class SwitchableJudge:
    """A judge model that replies in prose (unreadable) until `fixed` is set, then as judge_llm does; the same
    backend and model name either way, as a judge fixed on its server is."""

    def __init__(self) -> None:
        self.fixed = False
        self.prose = FakeLLM(keyed={"# Answer A": "Both answers have merit; I would lean towards the first."})
        self.good = judge_llm()
        self.backend, self.model = "fake", "fake-model"

    def chat(self, messages, **kw):
        return (self.good if self.fixed else self.prose).chat(messages, **kw)


def test_a_pairwise_ab_whose_judge_failed_judges_again_through_the_response_cache(_isolated_results, tmp_path):
    """The judge's replies go through the response cache. Before: the rerun after the judge was fixed asked with
    the same seeds, the cache gave the unreadable replies back, and the A/B exited 3 forever."""
    exp = _exp("ab.replications=1", "ab.split=train")
    arm = AnswerArm(tmp_path)
    inner = SwitchableJudge()
    judge = CachedLLM(inner, ResponseCache(tmp_path / "cache" / "responses.sqlite"))
    first, _ = _run(exp, arm, judge)
    assert first.unconcluded and "could not be read on any of the 12 judged pair(s)" in first.unconcluded[0]
    assert "new judge seeds" in first.unconcluded[0]
    inner.fixed = True
    second, _ = _run(exp, arm, judge)
    assert not second.unconcluded, second.unconcluded
    assert len(inner.good.calls) == 12 * 2
    assert second.result.pairwise.n == 12 and second.result.verdict == "supported", second.result.verdict_reason
    third, _ = _run(exp, arm, judge)  # a settled judgement is final: nothing judged again
    assert not third.unconcluded and len(inner.good.calls) == 12 * 2


# -- 2. a holdout answer stored as null is lost, not an empty answer --------------------------------------------


def test_a_null_holdout_answer_is_named_lost_and_run_again(make_exp):
    """A baseline line of holdout_answers.jsonl with "text": null. Before: it was read as the baseline's answer
    (an empty one, which the judge then compared); now one line names the file and line, the answer is lost and
    the baseline's holdout run that held it runs again for it."""
    from test_issue42_pairwise_holdout import Judge
    from test_sweep_round3 import ANSWERS, _holdout_runs, _small
    from test_sweep_round3 import _run as sweep

    exp = _small(make_exp, "nulltext")
    cut, _ = sweep(exp, Judge(die_after=0))
    assert cut.unconcluded
    path = exp.sweep_dir / ANSWERS
    rows = path.read_text(encoding="utf-8").splitlines()
    n = next(i for i, r in enumerate(rows) if json.loads(r)["text"].endswith("plain"))
    bad = json.loads(rows[n])
    bad["text"] = None
    rows[n] = json.dumps(bad)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")

    lines: list[str] = []
    judge = Judge()
    s, runner = sweep(exp, judge, lines)
    assert not s.unconcluded and s.promoted
    named = [ln for ln in lines if f"{path}:{n + 1}" in ln]
    assert len(named) == 1 and "text" in named[0] and "lost" in named[0], "\n".join(lines)
    assert all(base for _, _, base, _ in judge.seen)  # no pair judged against an empty baseline answer
    assert len(_holdout_runs(runner)) == 1  # the baseline's run of that task and seed, for its answer


# -- 5. no log line per HTTP request ------------------------------------------------------------------------------


def _cmd_env(tmp_path):
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    e = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(root), DDGS_DISABLED="1",
             HARNESS_RESULTS_DIR=str(tmp_path / "results"), MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
    e.pop("HARNESS_DEBUG", None)
    return e


SMALL = ["evaluator=deterministic_only", "planner=single_pass", "wiggum.max_rounds=1", "research.max_rounds=1",
         "research.compress=false", "research.enrich_urls=0", "search.provider=local", "backend.retries=0"]


@pytest.mark.parametrize("command", ["experiments", "harness"])
def test_a_command_logs_no_line_per_http_request(tmp_path, command):
    """The real command against the Ollama stub (tests/ollama_stub.py, real HTTP through httpx). Before: httpx's
    INFO line `HTTP Request: POST ... "HTTP/1.1 200 OK"` for every call (2,395 in one sweep's output)."""
    import subprocess
    import sys

    from ollama_stub import OllamaStub
    from test_reliability import MODELS, REPLY

    with OllamaStub(models=MODELS, default_reply=REPLY) as stub:
        if command == "experiments":
            args = ["-m", "experiments.run", "+sweep=single", "backend=ollama", f"backend.host={stub.url}",
                    "benchmark=smoke", "mlflow.enabled=false", *SMALL]
        else:  # -v: the harness's INFO lines shown, httpx's not
            args = ["-m", "harness", "-v", "List 3 Python modules for data formats.", "backend=ollama",
                    f"backend.host={stub.url}", *SMALL]
        p = subprocess.run([sys.executable, *args], env=_cmd_env(tmp_path), cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
        assert stub.requests, (p.stdout[-1500:], p.stderr[-1500:])  # it did talk HTTP
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert "HTTP Request:" not in out, [ln for ln in out.splitlines() if "HTTP Request:" in ln][:3]
    logs = list((tmp_path / "results").rglob("*.log"))
    assert all("HTTP Request:" not in f.read_text(errors="replace") for f in logs), logs


# -- 6. the MLflow parent run shows a futility stop --------------------------------------------------------------


def test_the_parent_run_shows_a_candidate_stopped_for_futility(make_exp):
    """A candidate that gains on train and loses 1 on every holdout task stops after 4 of 12 holdout tasks. Before:
    the parent run had no holdout difference, task count, trial or test (the row was never tested, so no
    'verdict row'); the UI could not show that a candidate reached the holdout and was stopped."""
    from test_issue42_promotion import _exp as promo_exp
    from test_issue42_promotion import _sweep, _train_gain_holdout_loss
    from test_sweep_round3 import _parent

    exp = promo_exp(make_exp, "sweep.name=futile", holdout_futility_block=4)
    exp.mlflow.enabled = True
    s, _ = _sweep(exp, _train_gain_holdout_loss)
    (row,) = s.holdout
    assert row.stopped_after == 4 and not s.promoted
    _, _, parent = _parent(exp)
    m, tags = parent.data.metrics, parent.data.tags
    assert m["holdout_diff"] == pytest.approx(row.holdout_diff)
    assert m["holdout_n_tasks"] == 4 and m["holdout_stopped_after"] == 4 and m["holdout_futility_of"] == 12
    assert "holdout_p" not in m  # a futility stop is not a test: no p to show
    assert tags["holdout_trial"] == str(row.trial)
    assert "stopped for futility after 4 of 12 holdout tasks" in tags["holdout_test"], tags["holdout_test"]
    assert tags["verdict"] == "baseline kept"


# -- 7. the benchmark as the experiment's evaluation dataset ---------------------------------------------------


def _datasets(exp):
    from mlflow import MlflowClient

    from experiments.config import tracking_uri

    client = MlflowClient(tracking_uri=tracking_uri(exp))
    found = client.get_experiment_by_name(exp.mlflow.experiment or exp.sweep.name)
    return client, list(client.search_datasets(experiment_ids=[found.experiment_id]))


def test_the_benchmark_is_an_evaluation_dataset_of_the_experiment_once(make_exp):
    """Before: the Datasets page of the experiment was empty (the splits were only runs' inputs). Now the benchmark
    is an evaluation dataset linked to the experiment, one record per task (its text the input; count and terms
    the expectations; id, split and type as tags); a resume adds none; an edited task is a new dataset."""
    import dataclasses

    from experiments.tracking import make_tracker

    exp = make_exp(mlflow=True)
    exp.sweep.name = "evalset"
    make_tracker(exp).start(exp)
    make_tracker(exp).start(exp)  # a resume
    client, found = _datasets(exp)
    assert len(found) == 1, [(d.name, d.tags) for d in found]
    (ds,) = found
    assert ds.name == "scripted" and ds.tags.get("benchmark_sha256")
    from experiments.tracking._traces import exporting_to
    from experiments.config import tracking_uri

    with exporting_to(tracking_uri(exp)):  # the records are read through MLflow's process-wide store
        records = client.get_dataset(ds.dataset_id).records
    by_id = {r.tags["id"]: r for r in records}
    tasks = {t.id: t for t in exp.benchmark.tasks}
    assert set(by_id) == set(tasks)
    for tid, r in by_id.items():
        assert r.inputs == {"task": tasks[tid].task}
        assert r.tags["split"] == tasks[tid].split and r.tags["task_type"] == tasks[tid].task_type
        assert r.expectations["required_terms"] == list(tasks[tid].required_terms)

    edited = dataclasses.replace(exp.benchmark.tasks[0], task="task number 0, in French")
    exp.benchmark = dataclasses.replace(exp.benchmark, tasks=[edited, *exp.benchmark.tasks[1:]])
    make_tracker(exp).start(exp)
    _, found = _datasets(exp)
    assert len(found) == 2 and len({d.tags["benchmark_sha256"] for d in found}) == 2


def test_a_file_store_logs_the_run_and_says_it_has_no_evaluation_dataset(make_exp, tmp_path, monkeypatch, caplog):
    """MLflow's evaluation datasets need a SQL store: on a file store (allowed by MLFLOW_ALLOW_FILE_STORE) the run
    logs as before and one warning says why the experiment has no evaluation dataset."""
    import logging

    from experiments.tracking import make_tracker

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    exp = make_exp(mlflow=True)
    exp.sweep.name = "filestore"
    tracker = make_tracker(exp)
    with caplog.at_level(logging.WARNING, logger="experiments.tracking"):
        tracker.start(exp)
    assert tracker.parent_id
    said = [r.getMessage() for r in caplog.records if "evaluation dataset" in r.getMessage()]
    assert len(said) == 1 and "SQL" in said[0], said


# -- 3. tasks.count=auto and a calibration of another benchmark ------------------------------------------------


GEN_AUTO = ["+sweep=generate_tasks", "tasks.name=gen", "tasks.count=auto", "tasks.effect=1.0"]


def _gen_exp(tmp_path, *extra):
    from experiments.config import compose_config, to_experiment
    from experiments.tasks import cli_keys

    return to_experiment(compose_config(cli_keys(["backend=fake", f"results_dir={tmp_path / 'res'}", *GEN_AUTO,
                                                  *extra])))


def test_count_auto_sizes_from_a_calibration_of_the_same_models_on_another_benchmark(tmp_path, monkeypatch):
    """README's order: `+sweep=calibrate benchmark=smoke`, then `+sweep=generate_tasks ... tasks.count=auto` (the
    configured benchmark asyncio_practices). Before: 'none of the 1 stored calibration(s) matches this fingerprint
    ... benchmark.name: smoke -> asyncio_practices', exit 2. Now it sizes from that calibration and says so."""
    from test_tasks_supply import store_calibration

    from experiments.tasks._sizing import size

    monkeypatch.delenv("HARNESS_RESULTS_DIR")
    key = store_calibration(tmp_path, "+sweep=generate_tasks", "tasks.name=gen", "benchmark=smoke")
    sizing = size(_gen_exp(tmp_path))
    text = "\n".join(sizing.lines)
    assert sizing.holdout > 0 and f"calibration {key}" in text, text
    assert "on benchmark smoke" in text and "asyncio_practices" in text, text


def test_count_auto_says_what_to_add_when_the_calibration_is_of_other_settings(tmp_path, monkeypatch):
    """The stored calibration ran with evaluator.temperature=0.5 on another benchmark: not the same models and
    settings, so not used; the one line says what to add to read it."""
    from test_tasks_supply import store_calibration

    from experiments.config import ConfigError
    from experiments.tasks._sizing import size

    monkeypatch.delenv("HARNESS_RESULTS_DIR")
    key = store_calibration(tmp_path, "+sweep=generate_tasks", "tasks.name=gen", "benchmark=smoke",
                            "evaluator.temperature=0.5")
    with pytest.raises(ConfigError) as info:
        size(_gen_exp(tmp_path))
    msg = str(info.value)
    assert "\n" not in msg and "evaluator.temperature=0.5" in msg and "benchmark=smoke" in msg, msg
    assert f"tasks.calibration={key}" in msg, msg


# -- 4. the sizing projects the sweep the user will run ----------------------------------------------------------


def test_the_sizing_projects_the_trials_of_the_sweep_the_user_will_run(tmp_path, monkeypatch):
    """Before: 'a 3-trial sweep on it ... ~0.0 h' whatever sweep followed (20-trial sweeps then made 2,380-3,096
    calls). Now the line names the n_trials it projects and where it comes from (conf/sweep/synth_mutation.yaml,
    or tasks.sweep_trials), the per-trial runs, and a time that is not rounded to zero."""
    from test_tasks_supply import store_calibration

    from experiments.tasks._sizing import size

    monkeypatch.delenv("HARNESS_RESULTS_DIR")
    store_calibration(tmp_path, "+sweep=generate_tasks", "tasks.name=gen")
    shipped = size(_gen_exp(tmp_path))
    twenty = size(_gen_exp(tmp_path, "tasks.sweep_trials=20"))
    line3, line20 = shipped.lines[-1], twenty.lines[-1]
    assert "3 trials" in line3 and "synth_mutation.yaml" in line3, line3
    assert "20 trials" in line20 and "tasks.sweep_trials" in line20, line20
    train, holdout = twenty.train, twenty.holdout
    runs = 20 * train + holdout * (3 + 3)  # the baseline trial and 19 proposals on train; the holdout's 3 + 3 runs
    assert f"at most {runs} task runs" in line20, line20
    assert f"per trial up to {train} task runs" in line20, line20
    # the stored cost: 8 uncached calls and 60 s a task run, 5 calls and 20 s a context preparation
    calls = runs * 8 + (train + holdout) * 5
    assert f"~{calls} uncached LLM calls" in line20, line20
    assert "0.0 h" not in line20


def test_a_negative_sweep_trials_is_one_line():
    from experiments.config import ConfigError, compose_config, to_experiment, validate
    from experiments.tasks import cli_keys

    exp = to_experiment(compose_config(cli_keys(["backend=fake", *GEN_AUTO, "tasks.sweep_trials=-2"])))
    with pytest.raises(ConfigError, match=r"tasks\.sweep_trials=-2 is out of range"):
        validate(exp)
