from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.config import TASK_TYPES, SynthConfig
from harness.inference import BackendError
from harness.inference._fake import FakeLLM
from harness.synthesis import (
    DEFAULT_INSTRUCTIONS,
    count_from_task,
    expected_count,
    instruction_for,
    strip_fences,
    synthesize,
)
from harness.synthesis._synthesize import synthesis_messages
from harness.text import count_items


@dataclass(frozen=True)
class StubPlan:
    task_type: str = "research"
    expected_sections: int | None = None
    context: str = ""

    def synthesis_context(self) -> str:
        return self.context


def numbered(n: int) -> str:
    return "\n".join(f"{i}. **Item {i}.** Use `tool_{i}()` because it matters." for i in range(1, n + 1))


@pytest.mark.parametrize(
    "task, expected",
    [
        ("List 5 best practices for Python asyncio and save to output.md", 5),
        ("What are the top 10 Rust crates for web servers?", 10),
        ("Give me five best practices for structured logging", 5),
        ("Name twenty command-line tools", 20),
        ("List the top three pitfalls of asyncio", 3),
        ("Describe 3 ways to speed up pandas", 3),
        ("seven habits of effective code reviewers", 7),
        ("a dozen tips for vim", 12),
        ("Research RAG evaluation methods", None),
        ("Explain Python 3 features", None),
        ("Learn Rust in 5 minutes with examples", None),
        ("asyncio changes in 2024", None),
        ("Write 300 words on transformers", None),
    ],
)
def test_count_from_task(task, expected):
    assert count_from_task(task) == expected


@pytest.mark.parametrize(
    "task, plan, expected",
    [
        ("List 5 tips", StubPlan(expected_sections=7), 5),
        ("Best practices for logging", StubPlan(expected_sections=7), 7),
        ("Best practices for logging", StubPlan(expected_sections=None), None),
        ("Best practices for logging", None, None),
        ("Best practices for logging", StubPlan(expected_sections=0), None),
        ("Best practices for logging", object(), None),
    ],
)
def test_expected_count(task, plan, expected):
    assert expected_count(task, plan) == expected


@pytest.mark.parametrize(
    "markdown, expected",
    [
        ("", 0),
        (numbered(5), 5),
        ("Intro line.\n\n" + numbered(3) + "\n\nClosing paragraph.", 3),
        ("## 1. Alpha\ntext\n## 2. Beta\ntext\n1. sub\n2. sub\n", 2),
        ("# Title\n## Overview\nx\n## Caching\nx\n## Timeouts\nx\n## Conclusion\nx", 2),
        ("- a\n- b\n- c\n  - nested\n", 3),
        ("1. a\n   1. nested\n2. b\n", 2),
        (numbered(4) + "\n\n## References\n1. [1] http://a\n2. [2] http://b\n", 4),
        ("```python\n1. not an item\n2. nor this\n```\n1. real\n", 1),
        ("Just a paragraph without items.", 0),
    ],
)
def test_count_items(markdown, expected):
    assert count_items(markdown) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("```markdown\n# Hi\n1. a\n```", "# Hi\n1. a"),
        ("```\nplain\n```\n", "plain"),
        ("<think>hmm</think>\n1. a", "1. a"),
        ("Text with ```code``` inside", "Text with ```code``` inside"),
    ],
)
def test_strip_fences(raw, expected):
    assert strip_fences(raw) == expected


def test_instruction_override_and_default():
    cfg = SynthConfig(instructions={"enumerated": "  Custom count instruction. ", "research": ""})
    assert instruction_for("enumerated", cfg) == "Custom count instruction."
    assert instruction_for("research", cfg) == DEFAULT_INSTRUCTIONS["research"]
    assert instruction_for("best_practices", cfg) == DEFAULT_INSTRUCTIONS["best_practices"]
    assert instruction_for("unknown", SynthConfig()) == DEFAULT_INSTRUCTIONS["research"]
    assert set(DEFAULT_INSTRUCTIONS) == set(TASK_TYPES)


def test_prompt_assembles_all_parts():
    plan = StubPlan(task_type="enumerated", context="**Planner note:** include version numbers")
    msgs = synthesis_messages(
        "List 5 tips",
        instruction="INSTR",
        plan=plan,
        research_context="[1] research body",
        memory_context="memory body",
        injections=("skill guidance", ""),
        expected=5,
    )
    assert msgs[0] == {"role": "system", "content": "INSTR"}
    user = msgs[1]["content"]
    for part in ("List 5 tips", "memory body", "include version numbers", "[1] research body", "skill guidance",
                 "exactly 5 numbered items"):
        assert part in user
    assert user.index("memory body") < user.index("Planner note") < user.index("research body") < user.index("skill")


def test_count_retry_happens_once_and_only_once():
    fake = FakeLLM([numbered(3), numbered(4)])
    result = synthesize(
        "List 5 best practices for asyncio", plan=StubPlan(task_type="enumerated"), research_context="",
        memory_context="", instruction="INSTR", llm=fake, cfg=SynthConfig(),
    )
    assert len(fake.calls) == 2
    retry_prompt = fake.calls[1].messages[-1]["content"]
    assert "has 3 items" in retry_prompt and "exactly 5" in retry_prompt
    assert fake.calls[1].messages[-2] == {"role": "assistant", "content": numbered(3)}
    assert result.retried and result.expected == 5 and result.found == 4 and result.first_found == 3
    assert result.text == numbered(4)


def test_no_retry_when_count_hits():
    fake = FakeLLM(["```markdown\n" + numbered(5) + "\n```"])
    result = synthesize(
        "List 5 tips", plan=StubPlan(), research_context="r", memory_context="m", instruction="I", llm=fake,
        cfg=SynthConfig(),
    )
    assert len(fake.calls) == 1 and not result.retried and result.found == 5
    assert result.text == numbered(5)


def test_retry_that_is_worse_keeps_first_attempt():
    fake = FakeLLM([numbered(4), numbered(9)])
    result = synthesize("List 5 tips", plan=None, research_context="", memory_context="", instruction="I", llm=fake,
                        cfg=SynthConfig())
    assert result.retried and result.found == 4 and result.text == numbered(4)


def test_no_count_check_for_research_without_count_in_task():
    fake = FakeLLM(["## A\ntext\n## B\ntext"])
    result = synthesize("Research RAG evaluation", plan=StubPlan(task_type="research", expected_sections=5),
                        research_context="", memory_context="", instruction="I", llm=fake, cfg=SynthConfig())
    assert len(fake.calls) == 1 and not result.retried


def test_count_retry_can_be_disabled():
    fake = FakeLLM([numbered(2)])
    result = synthesize("List 5 tips", plan=None, research_context="", memory_context="", instruction="I", llm=fake,
                        cfg=SynthConfig(count_retry=False))
    assert len(fake.calls) == 1 and not result.retried and result.found == 2


def test_retry_backend_error_keeps_first_attempt():
    class Flaky(FakeLLM):
        def chat(self, messages, **kw):
            if self.calls:
                raise BackendError("fake: down")
            return super().chat(messages, **kw)

    fake = Flaky([numbered(2)])
    result = synthesize("List 5 tips", plan=None, research_context="", memory_context="", instruction="I", llm=fake,
                        cfg=SynthConfig())
    assert result.text == numbered(2) and result.retried and "down" in result.retry_error


def test_empty_instruction_is_refused():
    with pytest.raises(ValueError, match="instruction is empty"):
        synthesize("x", plan=None, research_context="", memory_context="", instruction=" ", llm=FakeLLM(),
                   cfg=SynthConfig())


def test_sampling_options_come_from_config():
    fake = FakeLLM(["text"])
    synthesize("Research X", plan=None, research_context="", memory_context="", instruction="I", llm=fake,
               cfg=SynthConfig(temperature=0.9, max_tokens=123), seed=7)
    call = fake.calls[0]
    assert (call.temperature, call.max_tokens, call.seed) == (0.9, 123, 7)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_counting_never_raises(text):
    assert count_items(text) >= 0
    n = count_from_task(text)
    assert n is None or 1 <= n <= 50
    assert isinstance(strip_fences(text), str)
