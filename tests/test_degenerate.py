"""Degenerate outputs score low on every criterion, whatever the judge says.

Measured on main (f6dbdd5) with the embedded model: an answer repeating one sentence a dozen times scored det_count
10/10 and det_grounding 10/10, and a held-out run returned the wiggum revise prompt, echoed back, as its answer.
Each degenerate row below fails on f6dbdd5 (its criteria were 5-10 there and the composite followed a 9/10
judge; the old value is in the row's `before` column, for the record); the good answers are negatives that
must stay clean and keep exactly the scores they had on f6dbdd5.
"""

from __future__ import annotations

import json

import pytest

from evaluators.composite import evaluate
from evaluators.deterministic import deterministic_scores
from evaluators.rubric import rubric_messages
from harness.config import EvaluatorConfig
from harness.inference._fake import FakeLLM
from harness.review._wiggum import revision_messages
from harness.synthesis import DEFAULT_INSTRUCTIONS
from harness.synthesis._synthesize import synthesis_messages

TASK = "List 5 best practices for Python asyncio"
TERMS = ("TaskGroup", "Semaphore", "timeout", "run_in_executor")
SOURCES = [
    {"title": "asyncio TaskGroup",
     "snippet": "TaskGroup cancels sibling tasks on failure; the asyncio.timeout context manager was added in 3.11"},
    {"title": "Executors",
     "snippet": "run_in_executor offloads blocking calls to a thread pool executor; a Semaphore caps open connections"},
]
CRITERIA = ("count", "terms", "structure", "specificity", "grounding")
JUDGE_SCORE = 9

# -- good answers (negatives) ---------------------------------------------------------------------------------------

GOOD_ASYNCIO = """# Five asyncio practices that hold up in production

Most asyncio bugs come from blocking the event loop or losing track of tasks. These five practices address both.

1. **Start the program with `asyncio.run()`.** Call `asyncio.run(main())` once at the entry point; it creates the event loop, runs the coroutine and closes the loop, including async generators. Avoid `get_event_loop()` in new code: since Python 3.10 it warns when no loop is running.

2. **Use `asyncio.TaskGroup` for structured concurrency.** In Python 3.11+, `async with asyncio.TaskGroup() as tg:` waits for every child task and cancels the siblings when one fails, which `gather()` does not do by default. Errors surface as an `ExceptionGroup` you can handle with `except*`.

3. **Never block the event loop.** A single `time.sleep(0.1)` or a synchronous `requests.get()` stalls every coroutine for its duration. Offload CPU-bound or blocking I/O work with `await asyncio.to_thread(fn)` or `loop.run_in_executor()`, and enable debug mode (`PYTHONASYNCIODEBUG=1`) to log callbacks slower than 100 ms.

4. **Put a timeout on every network call.** Wrap awaits in `async with asyncio.timeout(5):` (3.11+) or `asyncio.wait_for(coro, 5)`. Without one, a peer that never answers keeps the task, its socket and its memory alive forever.

5. **Bound concurrency.** Launching 10,000 requests at once exhausts file descriptors and gets you rate-limited. Guard the critical section with `asyncio.Semaphore(50)`, or use a connection pool such as `aiohttp.TCPConnector(limit=50)` or asyncpg's `create_pool(max_size=20)`.

```python
async def fetch_all(urls):
    sem = asyncio.Semaphore(50)
    async with aiohttp.ClientSession() as session:
        async def one(url):
            async with sem, asyncio.timeout(10):
                async with session.get(url) as r:
                    return await r.text()
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(one(u)) for u in urls]
    return [t.result() for t in tasks]
```
"""

GOOD_RESEARCH = """# Retrieval-augmented generation: what the evidence says

## Background

Retrieval-augmented generation (RAG) pairs a language model with a retriever that fetches passages at query time [1]. Lewis et al. (2020) introduced the term for a BART generator conditioned on dense passage retrieval, and reported gains on open-domain QA benchmarks such as Natural Questions [1][2].

## Where the sources agree

Both the original paper and later surveys find that retrieval reduces hallucinated facts on knowledge-intensive tasks [2][3]. Dense retrievers (DPR, Contriever) generally beat BM25 on in-domain questions, while BM25 remains a strong baseline out of domain [3].

## Where they disagree

The surveys differ on chunk size: one recommends 256-token chunks with overlap, another finds 512 tokens better for long-form answers [3][4]. Evidence on re-ranking is mixed; cross-encoders help precision but add 50-200 ms of latency per query [4].

## Open questions

- How to evaluate faithfulness without human raters remains unsettled; RAGAS and ARES disagree on several benchmarks [4].
- Long-context models (128k tokens) may make retrieval unnecessary for small corpora, but no controlled comparison exists yet.

## Practical implications

Start with hybrid retrieval (BM25 plus a dense model), measure answer faithfulness on a held-out set, and tune chunk size per corpus rather than adopting a default.

## References

1. Lewis et al., Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks, 2020.
2. Karpukhin et al., Dense Passage Retrieval for Open-Domain Question Answering, 2020.
3. Gao et al., Retrieval-Augmented Generation for Large Language Models: A Survey, 2023.
4. Es et al., RAGAS: Automated Evaluation of Retrieval Augmented Generation, 2023.
"""
RESEARCH_TASK = "Summarise the research on retrieval-augmented generation"
RESEARCH_SOURCES = [
    "Lewis et al. 2020 introduced retrieval-augmented generation with a BART generator and dense passage retrieval",
    "Surveys: dense retrievers such as DPR and Contriever beat BM25 in domain; chunk size 256 or 512 tokens; RAGAS",
]

GOOD_TERSE = """1. **Use `asyncio.run()`** as the single entry point.
2. **Use `asyncio.TaskGroup`** (3.11+) so failures cancel siblings.
3. **Offload blocking calls** with `asyncio.to_thread()` or `run_in_executor`.
4. **Add timeouts** with `asyncio.timeout()`.
5. **Limit concurrency** with `asyncio.Semaphore`.
"""

# -- degenerate answers ---------------------------------------------------------------------------------------------

SENTENCE = "Use asyncio TaskGroup with a Semaphore and a timeout, and offload blocking calls with run_in_executor."
# the issue's answer: one sentence a dozen times, five of them numbered (so the count was "right")
REPEATED = "\n".join(f"{i}. {SENTENCE}" for i in range(1, 6)) + "\n\n" + " ".join([SENTENCE] * 7)
REPEATED_LINES = "\n".join([SENTENCE] * 12)
# five numbered items that differ only by their number: templated repetition
TEMPLATED = "\n".join(
    f"{i}. **Practice {i}**: use `asyncio.TaskGroup` with a `Semaphore` and a timeout so one blocking call does "
    f"not stall the others, and offload blocking calls with run_in_executor." for i in range(1, 6)
)
GOOD_DRAFT = GOOD_TERSE
ECHO_REVISE = revision_messages(
    TASK, GOOD_DRAFT, "Explain why each practice matters.", ("no explanations", "few versions"), 5.4
)[1]["content"]
ECHO_SYNTH = synthesis_messages(
    TASK, instruction=DEFAULT_INSTRUCTIONS["enumerated"], expected=5,
    research_context="[1] TaskGroup cancels sibling tasks on failure.\n[2] run_in_executor offloads blocking calls.",
)[1]["content"]
ECHO_JUDGE = rubric_messages(TASK, GOOD_DRAFT, EvaluatorConfig().dimensions, task_type="enumerated")[1]["content"]
HEADINGS_ONLY = """# Python asyncio best practices

## 1. Use asyncio.run() with a TaskGroup

## 2. Set a timeout on every call

## 3. Offload blocking calls with run_in_executor

## 4. Bound concurrency with a Semaphore

## 5. Enable debug mode
"""
EMPTY_ITEMS = "# Python asyncio best practices: TaskGroup, Semaphore, timeout, run_in_executor\n\n1.\n2.\n3.\n4.\n5.\n"
TASK_RESTATED = f"# {TASK}\n\n## Answer\n\n{TASK}.\n"
EMPTY = ""
PUNCTUATION = "  \n\n...\n---\n* * *\n\t!!\n"

KW = {"expected_count": 5, "required_terms": TERMS, "sources": SOURCES}


def _judge() -> FakeLLM:
    dims = {name: JUDGE_SCORE for name in EvaluatorConfig().dimensions}
    return FakeLLM(keyed={"# Answer to score": json.dumps({**dims, "feedback": "Looks excellent.",
                                                           "weaknesses": ["none"]})})


def _before(count, terms, structure, specificity, grounding, composite):
    return {"count": count, "terms": terms, "structure": structure, "specificity": specificity,
            "grounding": grounding}, composite


# name, output, what the reasons start with, and the scores on f6dbdd5 (criteria, blend composite, 9/10 judge)
DEGENERATE = [
    ("repeated sentence", REPEATED, "repetition", _before(10.0, 10.0, 8.0, 9.179, 10.0, 9.1743)),
    ("repeated lines", REPEATED_LINES, "repetition", _before(0.0, 10.0, 1.0, 9.179, 10.0, 7.8143)),
    ("templated items", TEMPLATED, "repetition", _before(10.0, 10.0, 10.0, 8.647, 10.0, 9.2918)),
    ("echoed revise prompt", ECHO_REVISE, "prompt echo", _before(10.0, 10.0, 10.0, 8.755, 3.333, 8.767)),
    ("echoed synthesis prompt", ECHO_SYNTH, "prompt echo", _before(0.0, 5.0, 7.0, 8.181, 4.0, 7.3345)),
    ("echoed judge prompt", ECHO_JUDGE, "prompt echo", _before(10.0, 10.0, 10.0, 7.154, 1.429, 8.4866)),
    ("headings only", HEADINGS_ONLY, "empty structure", _before(10.0, 10.0, 7.0, 5.905, 0.0, 8.0324)),
    ("empty list items", EMPTY_ITEMS, "empty structure", _before(0.0, 10.0, 2.0, 9.969, 0.0, 7.1575)),
    ("task restated", TASK_RESTATED, "empty structure", _before(2.0, 0.0, 2.0, 9.179, 0.0, 6.4543)),
    ("empty", EMPTY, "empty", _before(0.0, 0.0, 0.0, 0.0, 0.0, 5.4)),
    ("punctuation only", PUNCTUATION, "empty", _before(2.0, 0.0, 2.0, 0.0, 0.0, 5.72)),
]

# name, task, output, kwargs, and the scores on f6dbdd5, which they keep
GOOD = [
    ("asyncio practices with explanations and code", TASK, GOOD_ASYNCIO, KW,
     _before(10.0, 10.0, 10.0, 7.963, 8.333, 9.1037)),
    ("terse asyncio list", TASK, GOOD_TERSE, KW, _before(10.0, 10.0, 9.0, 9.351, 5.0, 8.8681)),
    ("research summary with sections", RESEARCH_TASK, GOOD_RESEARCH,
     {"required_terms": ("BM25", "DPR", "chunk"), "sources": RESEARCH_SOURCES},
     _before(None, 10.0, 10.0, 8.895, 6.923, 8.9818)),
]


@pytest.mark.parametrize("name, output, kind, before", DEGENERATE, ids=[row[0] for row in DEGENERATE])
def test_degenerate_output_scores_low_on_every_criterion_and_composite(name, output, kind, before):
    criteria, composite_before = before
    ev = evaluate(TASK, output, _judge(), EvaluatorConfig(), task_type="enumerated", **KW)
    assert ev.rubric.weighted == JUDGE_SCORE  # the judge was fooled ...
    assert composite_before > 5.0  # ... and on f6dbdd5 the composite followed it
    # every criterion is capped at 1/10, nothing else about it changes
    assert ev.deterministic == {k: min(v, 1.0) for k, v in criteria.items()}
    assert all(v <= 1.0 for v in ev.deterministic.values())
    assert ev.deterministic_score <= 1.0
    assert ev.composite == 1.0  # capped, whatever the judge said
    assert ev.degenerate and ev.degenerate[0].startswith(kind), ev.degenerate
    # the reviser is told why
    assert ev.weaknesses[0] == f"degenerate output: {ev.degenerate[0]}"
    assert ev.feedback.startswith("The answer is degenerate (") and "Looks excellent." in ev.feedback
    d = ev.to_dict()
    assert d["degenerate"] == list(ev.degenerate) and json.loads(json.dumps(d))["composite"] == 1.0
    assert ev.metrics()["degenerate"] == 1.0 and ev.metrics()["det_terms"] <= 1.0


@pytest.mark.parametrize("name, output, kind, before", DEGENERATE, ids=[row[0] for row in DEGENERATE])
def test_degenerate_output_capped_in_deterministic_and_rubric_modes(name, output, kind, before):
    det = evaluate(TASK, output, None, EvaluatorConfig(composite="deterministic"), **KW)
    assert det.composite == det.deterministic_score <= 1.0 and det.degenerate
    rub = evaluate(TASK, output, _judge(), EvaluatorConfig(composite="rubric"), **KW)
    assert rub.rubric.weighted == JUDGE_SCORE and rub.composite == 1.0 and rub.degenerate


@pytest.mark.parametrize("name, task, output, kwargs, before", GOOD, ids=[row[0] for row in GOOD])
def test_good_answers_stay_clean_and_keep_their_scores(name, task, output, kwargs, before):
    criteria, composite = before
    ev = evaluate(task, output, _judge(), EvaluatorConfig(), **kwargs)
    assert ev.degenerate == ()
    assert ev.deterministic == criteria
    assert ev.composite == composite
    assert ev.feedback == "Looks excellent." and ev.weaknesses == ("none",)
    assert ev.metrics()["degenerate"] == 0.0 and ev.to_dict()["degenerate"] == []
    assert deterministic_scores(output, task=task, **kwargs) == criteria


def test_the_issue_numbers():
    """The issue's two outputs: det_count and det_grounding were 10/10 and 3.3/10 (echo: count 10), now <= 1."""
    rep = deterministic_scores(REPEATED, task=TASK, **KW)
    assert (rep["count"], rep["grounding"]) == (1.0, 1.0)  # were (10.0, 10.0)
    echo = deterministic_scores(ECHO_REVISE, task=TASK, **KW)
    assert (echo["count"], echo["grounding"]) == (1.0, 1.0)  # were (10.0, 3.333)


# -- the detector itself (new API: imported in the tests that use it) -----------------------------------------------


@pytest.mark.parametrize(
    "output, expected",
    [
        (EMPTY, ("empty: no words",)),
        (PUNCTUATION, ("empty: no words",)),
        ("Sure, here it is:", ("near-empty: 4 words",)),
        (HEADINGS_ONLY, ("empty structure: no content besides 6 headings",)),
        (TASK_RESTATED, ("empty structure: no content besides 2 headings, the task restated",)),
        (EMPTY_ITEMS, ("empty structure: no content besides 1 heading, 5 empty list items",)),
        (REPEATED_LINES, ("repetition: the same sentence 12 times ('use asyncio taskgroup with a semaphore and a "
                          "timeout and off')", "repetition: 92% of its 4-word phrases repeat")),
        (TEMPLATED, ("repetition: 69% of its 4-word phrases repeat",)),
    ],
    ids=["empty", "punctuation", "near-empty", "headings only", "task restated", "empty items", "repeated lines",
         "templated"],
)
def test_degenerate_reasons_table(output, expected):
    from evaluators.deterministic import degenerate_reasons

    assert degenerate_reasons(output, task=TASK) == expected


def test_echo_of_each_prompt_names_its_scaffolding():
    from evaluators.deterministic import degenerate_reasons

    revise = degenerate_reasons(ECHO_REVISE, task=TASK)[0]
    for marker in ("# reviewer feedback", "# weaknesses to fix", "# current draft", "write the revised answer now"):
        assert marker in revise
    system = revision_messages(TASK, GOOD_DRAFT, "fb", (), 5.0)[0]["content"]  # the revise system prompt echoed
    assert "return only the complete revised answer" in degenerate_reasons(system, task=TASK)[0]
    assert "# research context" in degenerate_reasons(ECHO_SYNTH, task=TASK)[0]
    assert "# answer to score" in degenerate_reasons(ECHO_JUDGE, task=TASK)[0]
    # a partial echo: the draft with the revise prompt's closing headings and line around it
    partial = f"# Current draft\n{GOOD_ASYNCIO}\n\nWrite the revised answer now."
    assert degenerate_reasons(partial, task=TASK)[0].startswith("prompt echo")


@pytest.mark.parametrize(
    "name, task, output",
    [(name, task, output) for name, task, output, _, _ in GOOD]
    + [("existing GOOD fixture", TASK, "1. **Use asyncio.run()** as the entry point of every program.\n"
        "2. **Prefer TaskGroup** in Python 3.11 over gather().\n3. **Never block the loop** with time.sleep().")],
)
def test_good_answers_are_not_degenerate_with_or_without_the_prompt(name, task, output):
    from evaluators.deterministic import degenerate_reasons, prompt_echo_reasons

    assert degenerate_reasons(output, task=task) == ()
    # a revision that keeps the draft it was given is not an echo: the draft is not part of the prompt's own text
    revise = revision_messages(task, output, "Explain each item.", ("vague",), 5.0)
    assert degenerate_reasons(output, task=task, prompt=revise) == ()
    assert prompt_echo_reasons(output, prompt=revise) == ()
    synth = synthesis_messages(task, instruction=DEFAULT_INSTRUCTIONS["research"], research_context="[1] a source.")
    assert degenerate_reasons(output, task=task, prompt=synth) == ()
    # one stray scaffolding line is not an echo (two markers are needed); the answer keeps its scores
    assert degenerate_reasons(output + "\n\nWrite the revised answer now.", task=task) == ()


def test_copying_the_prompt_lines_is_an_echo_when_the_prompt_is_given():
    from evaluators.deterministic import degenerate_reasons, prompt_echo_reasons

    revise = revision_messages(TASK, GOOD_DRAFT, "Explain why each of the five practices matters in production.",
                               ("no explanation of why each practice matters", "no Python versions named"), 5.0)
    copied = ("Explain why each of the five practices matters in production.\n\n"
              "- no explanation of why each practice matters\n- no Python versions named")
    assert degenerate_reasons(copied, task=TASK) == ()  # no scaffolding markers: invisible without the prompt
    assert prompt_echo_reasons(copied, prompt=revise) == ("prompt echo: 3 of 3 lines copied from the prompt",)
    assert degenerate_reasons(copied, task=TASK, prompt=revise)[0] == "prompt echo: 3 of 3 lines copied from the prompt"
    ev = evaluate(TASK, copied, _judge(), EvaluatorConfig(), prompt=revise, **KW)
    assert ev.composite == 1.0 and all(v <= 1.0 for v in ev.deterministic.values())


@pytest.mark.parametrize(
    "output, degenerate",
    [
        # a sentence twice among distinct ones, or three times among many, is not repetition
        (GOOD_ASYNCIO + "\nNever block the event loop. Never block the event loop.", False),
        (GOOD_RESEARCH + "\n" + "\n".join(["Measure before you optimise anything."] * 3), False),
        # the same sentence three times among eight is
        ("\n".join(["Measure before you optimise anything."] * 3 + [f"Step {i} is to profile part {i} of it." for i in range(5)]), True),
        # ABAB loops: fewer than half of the sentences distinct
        (" ".join(["Use TaskGroup for tasks.", "Use timeouts for calls.", "Use semaphores for limits."] * 3), True),
        # a comparison table repeats its cells legitimately
        ("# Feature matrix\n\nWhich libraries support what:\n\n| Feature | asyncio | trio |\n|---|---|---|\n"
         + "\n".join(f"| feature {i} | yes | yes |" for i in range(12))
         + "\n\nTrio is stricter about structured concurrency; asyncio gained TaskGroup in 3.11.", False),
        # headings whose only content is a code block are not empty
        ("# Setup\n\n## Install\n\n```bash\n# the fast loop\npip install uvloop\n```\n\n## Run\n\n"
         "```python\nimport uvloop\nuvloop.install()\n```\n", False),
        # two of three sections empty is empty structure
        ("# Plan\n\n## Goals\n\nShip the asyncio port of the crawler by the end of May.\n\n## Risks\n\n## Budget\n", True),
        # bare list markers
        ("Five practices for asyncio code that runs in production:\n\n1. Use asyncio.run().\n2.\n3.\n4.", True),
    ],
    ids=["sentence twice", "line 3x among many", "sentence 3x among 8", "ABAB loop", "table", "code sections",
         "empty sections", "bare markers"],
)
def test_repetition_and_structure_thresholds(output, degenerate):
    from evaluators.deterministic import degenerate_reasons

    assert bool(degenerate_reasons(output, task=TASK)) is degenerate, degenerate_reasons(output, task=TASK)


def test_evaluation_api_stays_backward_compatible():
    from evaluators.composite import Evaluation, combine

    ev = Evaluation(rubric=None, deterministic={"structure": 5.0}, composite=5.0)
    assert ev.degenerate == () and ev.to_dict()["degenerate"] == [] and ev.metrics()["degenerate"] == 0.0
    assert combine("deterministic", None, 7.0, 0.6) == (7.0, None)
    assert combine("deterministic", None, 7.0, 0.6, degenerate=("repetition",)) == (1.0, None)
    assert combine("deterministic", None, 0.4, 0.6, degenerate=("empty",)) == (0.4, None)  # a cap, not a floor


# -- a per-item template line is structure, not a loop ----------------------------------------------------------------
# The 1.5B validation model's calibration (docs/CALIBRATION.md, 2026-11-28) floored this answer (its judge: 7.17 of
# 10) as "repetition: the same line 3 times ('asyncio python standard library')": the line each practice's "Tools"
# sub-section carries. A line that recurs once per section, under headings that differ, beside other content, is
# the answer's template; the same line recurring inside one section, or as a section's only content, or under
# headings that differ only by their number, is still a loop.

_PRACTICE = """### {n}. {title}

#### Practical Implementation:
```python
async def main():
    async with asyncio.timeout(10):
        await work()
```

#### Tools and Libraries Used:
- `asyncio` (Python Standard Library)

#### Pitfalls to Avoid:
- {pitfall}
- Be cautious with nested timeouts, as they can lead to unexpected behavior in {title_low}.
"""
_TEMPLATED = "## Task Implementation\n\n" + "\n".join(
    _PRACTICE.format(n=i + 1, title=t, title_low=t.lower(), pitfall=p)
    for i, (t, p) in enumerate([
        ("Handling Timeouts with asyncio.timeout", "Ensure that the timeout suits the slowest expected peer."),
        ("Setting Up Cancellation Handlers for Tasks", "Re-raise CancelledError after cleaning up."),
        ("Ensuring Proper Resource Management", "Close sockets and files in a finally block."),
    ])
) + "\nBy following these practices your applications stay robust and responsive.\n"


@pytest.mark.parametrize(
    "output, degenerate",
    [
        (_TEMPLATED, False),
        # a short label line as each section's only content: filler, still a loop
        ("## Threads\n\nThis is very important here.\n\n## Processes\n\nThis is very important here.\n\n"
         "## Asyncio\n\nThis is very important here.\n", True),
        # the same line three times inside one section
        ("## Tools\n\n- `asyncio` (Python Standard Library)\n- `asyncio` (Python Standard Library)\n"
         "- `asyncio` (Python Standard Library)\n- Profile the event loop with debug mode on.\n\n## Next\n\n"
         "Measure the latency of every await before and after.\n", True),
        # headings that differ only by their number: the whole section repeated
        ("\n".join(f"### {i}. Use asyncio\n\nThe asyncio python standard library.\n- Tools: the asyncio library here.\n"
                   for i in range(1, 4)), True),
    ],
    ids=["template line per practice", "filler as the only content", "3x in one section", "numbered loop"],
)
def test_a_line_per_section_under_distinct_headings_is_template_not_repetition(output, degenerate):
    from evaluators.deterministic import degenerate_reasons

    assert bool(degenerate_reasons(output, task=TASK)) is degenerate, degenerate_reasons(output, task=TASK)
