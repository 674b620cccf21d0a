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
