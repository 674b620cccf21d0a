from __future__ import annotations

import pytest

from harness.inference import BackendError
from harness.inference._fake import FakeLLM
from harness.review import run_panel
from harness.review._panel import DEFAULT_PERSONAS, panel_schema, parse_verdict, summarize


@pytest.mark.parametrize(
    "reply, verdict, score, comment, parser",
    [
        ('{"verdict": "accept", "score": 8, "comment": "Solid."}', "accept", 8.0, "Solid.", "json"),
        ('```json\n{"verdict": "Revise", "score": "6/10", "comment": "Needs  numbers."}\n```', "revise", 6.0,
         "Needs numbers.", "json"),
        ('{"verdict": "reject", "score": 2, "comment": "Off topic",}', "reject", 2.0, "Off topic", "dirtyjson"),
        ('Sure! {"verdict": "approved", "score": 12, "comment": "great"} hope that helps', "accept", 10.0, "great", "json"),
        ('{"verdict": "minor revision", "score": 7, "comment": "ok"}', "revise", 7.0, "ok", "json"),
        ('{"verdict": "reject", "score": 3, "comment": "truncated here', "reject", 3.0, "truncated here", "regex"),
        ("Verdict: revise. The answer lacks depth.", "revise", None, "", "regex"),
        ('{"verdict": "maybe", "score": 5}', "unparsed", None, '{"verdict": "maybe", "score": 5}', "failed"),
        ("I liked it a lot.", "unparsed", None, "I liked it a lot.", "failed"),
        ("", "unparsed", None, "", "failed"),
    ],
)
def test_parse_verdict_table(reply, verdict, score, comment, parser):
    v = parse_verdict("critical reviewer", reply)
    assert (v.verdict, v.score, v.comment, v.parser) == (verdict, score, comment, parser)
    assert v.persona == "critical reviewer"


def test_run_panel_one_bounded_call_per_persona():
    fake = FakeLLM(keyed={
        "domain practitioner": '{"verdict": "accept", "score": 8, "comment": "usable"}',
        "critical reviewer": "no json at all",
        "informed newcomer": '{"verdict": "revise", "score": 6, "comment": "define terms"}',
    })
    verdicts = run_panel("Task", "Answer text", fake)
    assert [v.persona for v in verdicts] == list(DEFAULT_PERSONAS)
    assert [v.verdict for v in verdicts] == ["accept", "unparsed", "revise"]
    assert all(c.schema == panel_schema() for c in fake.calls)
    assert panel_schema()["properties"]["comment"]["maxLength"] > 0
    assert "Answer text" in fake.calls[0].messages[1]["content"]
    summary = summarize(verdicts)
    assert summary["verdicts"]["accept"] == 1 and summary["verdicts"]["unparsed"] == 1
    assert summary["mean_score"] == 7.0 and summary["n"] == 3


def test_run_panel_backend_error_is_recorded_not_raised():
    class Down:
        backend, model = "fake", "m"

        def chat(self, *a, **k):
            raise BackendError("fake: down")

    verdicts = run_panel("T", "A", Down(), ["critical reviewer"])
    assert verdicts[0].verdict == "error" and "down" in verdicts[0].comment


def test_custom_persona_and_blank_personas_skipped():
    fake = FakeLLM(['{"verdict": "accept", "score": 9, "comment": "fine"}'])
    verdicts = run_panel("T", "A", fake, ["security auditor", "  "])
    assert len(verdicts) == 1 and "security auditor" in fake.calls[0].messages[0]["content"]


@pytest.mark.embedded
def test_embedded_panel_verdicts_are_bounded():
    from harness.config import BackendConfig
    from harness.inference import make_llm

    llm = make_llm(BackendConfig(kind="embedded", n_ctx=2048), "evaluator")
    verdicts = run_panel("List 2 asyncio tips", "1. Use asyncio.run().\n2. Never block the loop.", llm,
                         ["critical reviewer"], max_tokens=60)
    assert len(verdicts) == 1
    v = verdicts[0]
    assert v.verdict in {"accept", "revise", "reject", "unparsed"}
    assert v.score is None or 1.0 <= v.score <= 10.0
    assert len(v.comment) <= 300
