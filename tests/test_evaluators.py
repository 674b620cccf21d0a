from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators.composite import Evaluation, combine, evaluate
from evaluators.deterministic import aggregate, deterministic_scores, grounding_score, specificity_score, structure_score
from evaluators.rubric import EvalResult, parse_rubric, rubric_messages, rubric_schema, score_rubric, weighted_total
from harness.config import EvaluatorConfig
from harness.inference._fake import FakeLLM

DIMS = EvaluatorConfig().dimensions
ALL7 = {name: 7 for name in DIMS}

GOOD = """# Asyncio best practices

1. **Use asyncio.run() as the entry point.** Call `asyncio.run(main())` once; it creates and closes the event loop. Since Python 3.7 this replaces manual loop handling.
2. **Prefer TaskGroup for structured concurrency.** In Python 3.11, `asyncio.TaskGroup` cancels siblings when one task fails, unlike `gather()`.
3. **Never block the loop.** Move CPU-bound work to `loop.run_in_executor()` or `asyncio.to_thread()`; a 100 ms blocking call stalls every coroutine.
4. **Set timeouts.** Wrap network calls in `asyncio.timeout(5)` (3.11+) or `wait_for`.
5. **Bound concurrency with a Semaphore.** Use `asyncio.Semaphore(10)` to cap open connections to PostgreSQL via asyncpg.
"""

VAGUE = (
    "Asyncio is a great library and it is important to use it well. You should always think about how your code "
    "runs and make sure things are done properly. It is a good idea to follow best practices and to avoid common "
    "mistakes that people make when they write asynchronous code. Good code is readable and maintainable, and "
    "developers should keep this in mind at all times when they are writing programs that need to do many things "
    "at once. In summary, asyncio requires care and attention to detail."
)

SOURCES = [
    {"title": "TaskGroup", "snippet": "TaskGroup cancels sibling tasks on failure; asyncio.timeout context manager added in 3.11"},
    {"title": "Executors", "snippet": "run_in_executor offloads blocking calls to a thread pool executor; Semaphore caps connections"},
]
TASK = "List 5 best practices for Python asyncio"


# -- rubric parsing -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, parser, scores, missing",
    [
        (json.dumps({**ALL7, "feedback": "ok", "weaknesses": ["a"]}), "json", ALL7, ()),
        ("```json\n" + json.dumps({**ALL7, "depth": 4}) + "\n```", "json", {**ALL7, "depth": 4}, ()),
        ('{"relevance": 8, "completeness": 8, "depth": 6, "specificity": 6, "structure": 9, "grounded": 7,}',
         "dirtyjson", {"relevance": 8, "completeness": 8, "depth": 6, "specificity": 6, "structure": 9, "grounded": 7}, ()),
        ("Here is my review.\n" + json.dumps(ALL7) + "\nThanks!", "json", ALL7, ()),
        ('{"relevance": 8, "depth": 5, "feedback": "short"}', "json", {"relevance": 8, "depth": 5},
         ("completeness", "specificity", "structure", "grounded")),
        ("Relevance: 8/10\n**Depth**: 6\nspecificity = 5", "regex", {"relevance": 8, "depth": 6, "specificity": 5},
         ("completeness", "structure", "grounded")),
        ('{"relevance": 9, "depth": 4, "feedback": "cut off', "regex", {"relevance": 9, "depth": 4},
         ("completeness", "specificity", "structure", "grounded")),
        ('{"relevance": 14, "depth": 0, "structure": "7/10"}', "json", {"relevance": 10, "depth": 1, "structure": 7},
         ("completeness", "specificity", "grounded")),
        ('{"scores": {"relevance": 6, "depth": 6}}', "json", {"relevance": 6, "depth": 6},
         ("completeness", "specificity", "structure", "grounded")),
        ("This answer is decent but lacks depth overall.", "failed", {}, tuple(DIMS)),
        ('{"overall": 8}', "failed", {}, tuple(DIMS)),
        ("", "failed", {}, tuple(DIMS)),
    ],
)
def test_parse_rubric_table(reply, parser, scores, missing):
    parsed = parse_rubric(reply, DIMS)
    assert parsed.parser == parser
    assert parsed.scores == {k: float(v) for k, v in scores.items()}
    assert parsed.missing == missing


def test_parse_rubric_reads_feedback_and_caps_weaknesses():
    reply = json.dumps({**ALL7, "feedback": "Add   versions.", "weaknesses": ["a", "b", "a", "c", "d"]})
    parsed = parse_rubric(reply, DIMS)
    assert parsed.feedback == "Add versions." and parsed.weaknesses == ("a", "b", "c")


def test_weighted_total_needs_every_scored_dimension():
    assert weighted_total({"a": 8, "b": 4}, {"a": 3.0, "b": 1.0}) == 7.0
    assert weighted_total({"a": 8}, {"a": 1.0, "b": 1.0}) is None  # issue 40 A: never a total over those present
    assert weighted_total({}, {"a": 1.0}) is None
    assert weighted_total({"a": 8, "b": 2}, {"a": 1.0, "b": 0.0}) == 8.0
    assert weighted_total({"a": 8}, {"a": 1.0, "b": 0.0}) == 8.0  # a dimension of weight 0 is not scored


def test_schema_is_bounded():
    schema = rubric_schema(DIMS)
    for name in DIMS:
        assert schema["properties"][name] == {"type": "integer", "minimum": 1, "maximum": 10}
    assert schema["properties"]["feedback"]["maxLength"] > 0
    assert schema["properties"]["weaknesses"]["maxItems"] == 3
    assert schema["properties"]["weaknesses"]["items"]["maxLength"] > 0


@pytest.mark.parametrize(
    "task_type, phrase",
    [("enumerated", "exactly that many"), ("best_practices", "practical implementation"), ("research", "integrate several sources")],
)
def test_prompt_carries_task_type_criteria_and_is_blind(task_type, phrase):
    msgs = rubric_messages("Do X", "answer", DIMS, task_type=task_type)
    text = "\n".join(m["content"] for m in msgs)
    assert phrase in text and "Do X" in text and "answer" in text
    assert not re.search(r"\b(variant|arm|baseline|candidate|trial|mutat\w*|instruction|SYNTH\w*)\b", text, re.I)


@pytest.mark.parametrize(
    "reply, attempted, scores",
    [
        # the judge says the answer does not attempt the task and then writes its usual numbers: 1 throughout
        (json.dumps({"answers_task": False, "weaknesses": ["refuses"], "feedback": "Answer it."} | {n: 9 for n in DIMS}),
         False, {n: 1.0 for n in DIMS}),
        (json.dumps({"answers_task": "no", "feedback": "off topic"}), False, {n: 1.0 for n in DIMS}),
        ('answers_task: false\nrelevance: 8', False, {n: 1.0 for n in DIMS}),
        (json.dumps({"answers_task": True} | ALL7), True, {n: 7.0 for n in DIMS}),
        (json.dumps(ALL7), None, {n: 7.0 for n in DIMS}),  # a reply that does not say: read as before
        (json.dumps({"answers_task": "maybe"} | ALL7), None, {n: 7.0 for n in DIMS}),
    ],
)
def test_a_judge_verdict_of_no_attempt_scores_one_everywhere(reply, attempted, scores):
    parsed = parse_rubric(reply, DIMS)
    assert parsed.attempted is attempted and parsed.scores == scores and parsed.missing == ()


def test_score_rubric_counts_the_repeats_that_did_not_attempt():
    replies = [json.dumps({"answers_task": False} | {n: 9 for n in DIMS}), json.dumps({"answers_task": True} | ALL7)]
    result = score_rubric(TASK, "I cannot help with that request.", FakeLLM(replies), EvaluatorConfig(repeats=2))
    assert result.not_attempted == 1 and result.totals == (1.0, 7.0) and result.weighted == 4.0
    assert result.to_dict()["not_attempted"] == 1


def test_the_judge_writes_verdict_and_critique_before_the_numbers():
    schema = rubric_schema(DIMS)
    keys = list(schema["properties"])
    assert keys[:3] == ["answers_task", "weaknesses", "feedback"] and keys[3:] == list(DIMS)
    assert schema["required"] == keys
    system, user = (m["content"] for m in rubric_messages("Do X", "answer", DIMS, task_type="enumerated"))
    assert "refuses" in system and "every dimension is 1" in system and "short, vague or incomplete" in system and "at most 3 on completeness" in system
    reply_format = user[user.index("Reply as JSON"):]
    assert reply_format.index("answers_task") < reply_format.index("weaknesses") < reply_format.index("relevance")


def test_score_rubric_repeats_mean_and_judge_sd():
    replies = [json.dumps({name: v for name in DIMS} | {"feedback": f"fb{v}", "weaknesses": [f"w{v}"]}) for v in (6, 8, 7)]
    fake = FakeLLM(replies)
    result = score_rubric(TASK, GOOD, fake, EvaluatorConfig(repeats=3), task_type="enumerated", seed=10)
    assert [c.seed for c in fake.calls] == [10, 11, 12]
    assert all(c.schema == rubric_schema(DIMS) for c in fake.calls)
    assert result.weighted == 7.0 and result.dimensions["depth"] == 7.0
    assert result.totals == (6.0, 8.0, 7.0)
    assert result.judge_sd == pytest.approx(1.0)
    assert result.repeats == 3 and result.parser == "json" and result.parse_failures == 0
    assert result.feedback == "fb6" and result.weaknesses == ("w6", "w8", "w7")


def test_score_rubric_one_repeat_has_zero_sd():
    result = score_rubric(TASK, GOOD, FakeLLM([json.dumps(ALL7)]), EvaluatorConfig())
    assert result.judge_sd == 0.0 and result.weighted == 7.0


def test_score_rubric_skips_unreadable_repeats_and_reports_weakest_parser():
    fake = FakeLLM([json.dumps(ALL7), "no idea", "relevance: 9, completeness: 9, depth: 9, specificity: 9, structure: 9, grounded: 9"])
    result = score_rubric(TASK, GOOD, fake, EvaluatorConfig(repeats=3, judge_retries=0))
    assert result.parse_failures == 1 and result.parser == "regex" and result.judge_failures == 1
    assert result.totals == (7.0, None, 9.0)
    assert result.weighted == 8.0 and result.judge_sd == pytest.approx(1.4142, abs=1e-3)


def test_score_rubric_garbage_is_failed_not_invented():
    fake = FakeLLM(["I cannot score this.", "Nope", "Still no.", "No."])
    result = score_rubric(TASK, GOOD, fake, EvaluatorConfig(repeats=2))
    assert result.failed and result.weighted is None and result.parser == "failed" and result.parse_failures == 2
    assert result.judge_failures == 4 and len(fake.calls) == 4  # each repeat asked twice (judge_retries=1)
    assert result.dimensions == {}


def test_score_rubric_weights_from_config():
    cfg = EvaluatorConfig(dimensions={"depth": 3.0, "structure": 1.0})
    result = score_rubric(TASK, GOOD, FakeLLM(['{"depth": 8, "structure": 4}']), cfg)
    assert result.weighted == 7.0 and set(result.dimensions) == {"depth", "structure"}


@pytest.mark.parametrize("dims", [{}, {"bad name": 1.0}, {"a": -1.0}, {"a": 0.0}])
def test_bad_dimensions_are_refused(dims):
    with pytest.raises(ValueError, match="evaluator"):
        score_rubric(TASK, GOOD, FakeLLM(["{}"]), EvaluatorConfig(dimensions=dims))


# -- deterministic ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output, kwargs, expected",
    [
        (GOOD, {"expected_count": 5}, {"count": 10.0}),
        (GOOD, {"expected_count": 4}, {"count": 7.5}),
        (GOOD, {"expected_count": 10}, {"count": 5.0}),
        (GOOD, {}, {"count": None, "terms": None, "grounding": None}),
        (GOOD, {"required_terms": ("TaskGroup", "semaphore", "uvloop", "asyncio.run")}, {"terms": 7.5}),
        ("storage layer", {"required_terms": ("RAG",)}, {"terms": 0.0}),
        ("", {"expected_count": 5, "required_terms": ("x",), "sources": SOURCES},
         {"count": 0.0, "terms": 0.0, "structure": 0.0, "specificity": 0.0, "grounding": 0.0}),
        (VAGUE, {"sources": SOURCES}, {"grounding": 0.0, "specificity": 0.0}),
        (GOOD, {"sources": SOURCES}, {"grounding": 8.0}),
    ],
)
def test_deterministic_scores_table(output, kwargs, expected):
    scores = deterministic_scores(output, task=TASK, **kwargs)
    assert set(scores) == {"count", "terms", "structure", "specificity", "grounding"}
    for key, value in expected.items():
        assert scores[key] == value, key


def test_structure_orders_answers():
    wall = " ".join(["word"] * 300)
    assert structure_score(GOOD) >= 8.0
    assert structure_score(wall) <= 2.0
    assert structure_score(VAGUE) <= 2.0
    assert structure_score("") == 0.0
    assert structure_score("# Title\n\nshort") <= 2.0
    prose_with_headings = "\n\n".join(f"## Part {i}\n\n" + " ".join(["claim"] * 60) + "." for i in range(3))
    assert structure_score(prose_with_headings) == 8.0
    long_paragraphs = "\n\n".join(f"## Part {i}\n\n" + " ".join(["claim"] * 400) + "." for i in range(3))
    assert structure_score(long_paragraphs) < structure_score(prose_with_headings)


def test_specificity_orders_answers():
    assert specificity_score(GOOD) > 7.0
    assert specificity_score(VAGUE) < 1.0
    assert specificity_score("Use PostgreSQL 16 with `pg_stat_statements` and pgbouncer.") > specificity_score(
        "Use a good database with the right settings and a pooler."
    )


def test_grounding_ignores_task_words_and_counts_urls():
    sources = ["asyncio python best practices", "https://docs.python.org/3/library/asyncio-task.html TaskGroup"]
    claim = "- Python asyncio best practices are great and python asyncio practices matter."
    assert grounding_score(claim, sources, task=TASK) == 0.0
    cited = "- See https://docs.python.org/3/library/asyncio-task.html for more on this topic today."
    assert grounding_score(cited, sources, task=TASK) == 10.0
    assert grounding_score(GOOD, [], task=TASK) is None


@pytest.mark.parametrize(
    "scores, expected",
    [({"a": 10.0, "b": None, "c": 4.0}, 7.0), ({"a": None}, 0.0), ({}, 0.0), ({"a": 3.0}, 3.0)],
)
def test_aggregate(scores, expected):
    assert aggregate(scores) == expected


# -- composite ----------------------------------------------------------------------------------------------------


def _rubric(weighted):
    return EvalResult({}, weighted, "", (), "failed" if weighted is None else "json", 1, 0.0)


@pytest.mark.parametrize(
    "mode, rubric, det, weight, expected, fallback",
    [
        ("rubric", 8.0, 4.0, 0.6, 8.0, False),
        ("deterministic", 8.0, 4.0, 0.6, 4.0, False),
        ("blend", 8.0, 4.0, 0.6, 6.4, False),
        ("blend", 8.0, 4.0, 1.0, 8.0, False),
        ("blend", None, 4.0, 0.6, None, True),  # an unread judge: missing, never the deterministic score
        ("rubric", None, 4.0, 0.6, None, True),
    ],
)
def test_combine_modes(mode, rubric, det, weight, expected, fallback):
    value, reason = combine(mode, _rubric(rubric), det, weight)
    assert value == (pytest.approx(expected) if expected is not None else None)
    assert (reason is not None) == fallback


def test_combine_refuses_unknown_mode_and_bad_weight():
    with pytest.raises(ValueError, match="composite"):
        combine("average", _rubric(5.0), 5.0, 0.5)
    with pytest.raises(ValueError, match="rubric_weight"):
        combine("blend", _rubric(5.0), 5.0, 1.5)


def test_evaluate_blend_calls_judge_and_records():
    fake = FakeLLM([json.dumps({**{n: 8 for n in DIMS}, "feedback": "Add benchmarks.", "weaknesses": ["no numbers"]})])
    ev = evaluate(TASK, GOOD, fake, EvaluatorConfig(), expected_count=5, required_terms=("TaskGroup",),
                  sources=SOURCES, task_type="enumerated", seed=3)
    assert isinstance(ev, Evaluation) and ev.mode == "blend" and ev.fallback is None
    assert fake.calls[0].seed == 3
    assert "exactly 5 items" in fake.calls[0].messages[1]["content"]
    assert ev.composite == pytest.approx(0.6 * 8.0 + 0.4 * ev.deterministic_score, abs=1e-3)
    assert ev.feedback == "Add benchmarks." and ev.weaknesses == ("no numbers",)
    metrics = ev.metrics()
    assert metrics["dim_depth"] == 8.0 and metrics["det_count"] == 10.0 and "judge_sd" in metrics
    json.dumps(ev.to_dict())


def test_evaluate_blend_score_is_missing_when_judge_unparsed():
    ev = evaluate(TASK, GOOD, FakeLLM(["garbage", "more garbage"]), EvaluatorConfig(), expected_count=5)
    assert ev.rubric.failed and ev.composite is None and ev.missing and ev.judge_failures == 2
    assert ev.fallback == "judge reply unreadable (2 unreadable replies): the judged blend score is missing"
    assert "composite" not in ev.metrics() and ev.to_dict()["composite"] is None
    assert "concrete names" in ev.feedback or ev.feedback  # the revision still gets deterministic advice


def test_evaluate_deterministic_needs_no_model_and_derives_feedback():
    ev = evaluate(TASK, VAGUE, None, EvaluatorConfig(composite="deterministic"), expected_count=5)
    assert ev.rubric is None and ev.composite == ev.deterministic_score
    assert ev.weaknesses[0] == "has 0 items but the task asks for exactly 5"
    assert "concrete names" in ev.feedback


def test_evaluate_refuses_unknown_mode():
    with pytest.raises(ValueError, match="composite"):
        evaluate(TASK, GOOD, FakeLLM(), EvaluatorConfig(composite="mean"))


def test_evaluators_never_import_mutators():
    root = Path(__file__).resolve().parents[1] / "evaluators"
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n == "mutators" or n.startswith("mutators.") for n in names), path
        assert not re.search(r"import_module\(\s*[\"']mutators|__import__\(\s*[\"']mutators", path.read_text()), path


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_parsers_and_scores_never_raise_and_stay_in_range(text):
    parsed = parse_rubric(text, DIMS)
    assert parsed.parser in {"json", "dirtyjson", "regex", "failed"}
    assert all(1.0 <= v <= 10.0 for v in parsed.scores.values())
    scores = deterministic_scores(text, task=TASK, expected_count=3, required_terms=("x",), sources=SOURCES)
    assert all(v is None or 0.0 <= v <= 10.0 for v in scores.values())
    assert 0.0 <= aggregate(scores) <= 10.0


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300), st.integers(min_value=1, max_value=15))
def test_degenerate_text_is_capped_on_every_criterion(text, repeats):
    """Whatever the text, repeated enough or degenerate by itself, every criterion it gets is <= DEGENERATE_CAP."""
    from evaluators.deterministic import DEGENERATE_CAP, degenerate_reasons

    for candidate in (text, "\n".join([text] * repeats)):
        reasons = degenerate_reasons(candidate, task=TASK)
        assert isinstance(reasons, tuple) and all(isinstance(r, str) and r for r in reasons)
        scores = deterministic_scores(candidate, task=TASK, expected_count=3, required_terms=("x",), sources=SOURCES)
        if reasons:
            assert all(v is None or v <= DEGENERATE_CAP for v in scores.values())
            composite, _ = combine("blend", _rubric(10.0), aggregate(scores), 0.6, degenerate=reasons)
            assert composite <= DEGENERATE_CAP


def test_deterministic_criteria_names_unchanged_by_degeneracy():
    """experiments.ab reads the criteria names from deterministic_scores("", task=""): still the same five."""
    assert tuple(deterministic_scores("", task="")) == ("count", "terms", "structure", "specificity", "grounding")
    assert deterministic_scores(GOOD, task=TASK, expected_count=5, prompt="# Task\nx") == deterministic_scores(
        GOOD, task=TASK, expected_count=5)


def test_evaluate_deterministic_mode_reports_degenerate_feedback():
    repeated = "\n".join(["Use asyncio.TaskGroup for every group of tasks you start."] * 6)
    ev = evaluate(TASK, repeated, None, EvaluatorConfig(composite="deterministic"), expected_count=5)
    assert ev.degenerate and ev.composite <= 1.0
    assert ev.weaknesses[0].startswith("degenerate output: repetition: the same sentence 6 times")
    assert ev.feedback.startswith("The answer is degenerate (repetition")
    assert "has 0 items but the task asks for exactly 5" in ev.feedback


@pytest.mark.embedded
def test_embedded_judge_scores_within_bounds():
    from harness.config import BackendConfig
    from harness.inference import make_llm

    judge = make_llm(BackendConfig(kind="embedded", n_ctx=2048), "evaluator")
    cfg = EvaluatorConfig(repeats=2, temperature=0.7, max_tokens=100)
    result = score_rubric(TASK, GOOD, judge, cfg, task_type="enumerated", seed=1)
    assert result.repeats == 2 and len(result.totals) == 2
    assert result.parser in {"json", "dirtyjson", "regex", "failed"}
    if not result.failed:
        assert 1.0 <= result.weighted <= 10.0
        assert all(1.0 <= v <= 10.0 for v in result.dimensions.values())
        assert result.judge_sd >= 0.0 and len(result.weaknesses) <= 3


def test_grounding_does_not_count_stopwords_that_lose_their_plural_s():
    # "always", "various" and "perhaps" are stopwords; dropping the "s" first made them content words, so this
    # claim shared two "distinctive" words with the source and counted as grounded
    sources = ["Various libraries perhaps always do this in production systems."]
    claim = "- Various teams perhaps always ship their work on time to users."
    assert grounding_score(claim, sources, task=TASK) == 0.0
    real = "- Production systems pin their libraries to known versions before shipping."
    assert grounding_score(real, sources, task=TASK) == 10.0
