"""A config check warns, once and without stopping anything, when the judge (evaluator role) is the producer's own
model (issue 19 item 4): self-preference flatters the producer's outputs."""

from __future__ import annotations

import logging

import pytest

from harness.compose import _checks as validation
from experiments.config import compose_config, to_experiment, validate
from harness.config import BackendConfig
from test_cli import cli, router  # noqa: F401  (the CLI's scripted backend and its fixture)


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(validation, "_WARNED", set())


@pytest.mark.parametrize("backend, expected", [
    (BackendConfig(kind="ollama", producer_model="qwen2.5:32b", evaluator_model="qwen2.5:32b"), "self-preference"),
    (BackendConfig(kind="openai", producer_model="Qwen/Qwen2.5-32B-Instruct",
                   evaluator_model="qwen/qwen2.5-32b-instruct "), "self-preference"),  # case and spaces do not hide it
    (BackendConfig(kind="auto", producer_model="qwen2.5:32b", evaluator_model="qwen2.5:32b"), "self-preference"),
    (BackendConfig(kind="embedded", producer_model="a", evaluator_model="b"), "smoke setting"),  # one GGUF for all
    (BackendConfig(kind="ollama", producer_model="qwen2.5:32b", evaluator_model="llama3.3:70b"), None),
    (BackendConfig(kind="fake", producer_model="same", evaluator_model="same"), None),  # scripted: no model
])
def test_judge_warnings_table(backend, expected):
    warnings = validation.judge_warnings(backend)
    if expected is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and expected in warnings[0] and "\n" not in warnings[0]


def test_validate_logs_the_warning_once_and_still_returns_the_config(caplog):
    caplog.set_level(logging.WARNING, logger="harness.checks")
    same = ["backend=ollama", "backend.evaluator_model=qwen2.5:32b"]  # the shipped config's judge is another family
    exp = to_experiment(compose_config(same))
    assert validate(exp) is exp
    assert validate(to_experiment(compose_config(same))) is not None  # a second config: no repeat
    lines = [r.getMessage() for r in caplog.records if r.name == "harness.checks"]
    assert len(lines) == 1 and "backend.evaluator_model='qwen2.5:32b'" in lines[0] and "self-preference" in lines[0]


def test_another_judge_validates_silently(caplog):
    caplog.set_level(logging.WARNING, logger="harness.checks")
    validate(to_experiment(compose_config(["backend=ollama", "backend.evaluator_model=llama3.3:70b"])))
    assert [r for r in caplog.records if r.name == "harness.checks"] == []


def test_the_harness_command_warns_and_runs_on(tmp_path, router, caplog, capsys):  # noqa: F811
    caplog.set_level(logging.WARNING, logger="harness.checks")
    assert cli(tmp_path, "--plan-preview", "List 5 best practices for Python asyncio",
               "backend.evaluator_model=qwen2.5:32b") == 0
    assert any("self-preference" in r.getMessage() for r in caplog.records if r.name == "harness.checks")
    assert "Plan preview (dry run: nothing executed)" in capsys.readouterr().out  # the warning stopped nothing


def test_no_configured_logging_defers_the_warning_to_the_next_validation(monkeypatch):
    bare = logging.Logger("experiments.config.bare")  # no handlers, no parent: logging not configured
    records: list[str] = []
    monkeypatch.setattr(validation, "log", bare)
    validation.warn_once(["judge is the producer"])
    assert validation._WARNED == set()  # not spent: the run's own validation still warns

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    bare.addHandler(Keep())
    validation.warn_once(["judge is the producer"])
    validation.warn_once(["judge is the producer"])
    assert records == ["judge is the producer"]
