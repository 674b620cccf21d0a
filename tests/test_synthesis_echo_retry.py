"""An answer that echoes the synthesis prompt is asked for once more (harness.synthesis, issue 42).

The 1.5B validation model copied the user message back (its "# Task", "# Plan context", "# Research context"
headings and the research summary under them) on 7 of 28 calibration runs; the degenerate-answer gate scores such
an answer 1, which is run noise of about 6 points that is neither the answer's quality nor the instruction's. The
producer is now asked once more with a note not to copy the message; these tests fail on 1ebf837 (no retry)."""

from __future__ import annotations

from dataclasses import dataclass

from evaluators.deterministic import prompt_echo_reasons
from harness.config import SynthConfig
from harness.inference import BackendError
from harness.inference._fake import FakeLLM
from harness.synthesis import ECHO_RETRY_NOTE, synthesize
from pipeline_fake import Router, make_harness, numbered

TASK = "List 5 best practices for asyncio"


@dataclass
class StubPlan:
    task_type: str = "enumerated"
    expected_sections: int | None = 5

    def synthesis_context(self) -> str:
        return "**Planner note:** name concrete APIs"


def echo_of(task: str = TASK) -> str:
    return (f"# Task\n{task}\n\n# Plan context\n**Planner note:** name concrete APIs\n\n# Research context\n"
            "asyncio.gather runs awaitables concurrently.")


def run(fake: FakeLLM, *, cfg: SynthConfig | None = None, echo=prompt_echo_reasons, seed: int | None = 40):
    return synthesize(TASK, plan=StubPlan(), research_context="asyncio.gather runs awaitables concurrently.",
                      memory_context="", instruction="INSTR", llm=fake, cfg=cfg or SynthConfig(), seed=seed,
                      echo_reasons=echo)


def test_an_echo_is_asked_for_once_more_with_a_note_and_the_answer_is_kept():
    fake = FakeLLM([echo_of(), numbered(5)])
    result = run(fake)
    assert result.text == numbered(5) and result.echo and not result.echo_kept and not result.retried
    assert len(fake.calls) == 2
    first, second = fake.calls
    assert second.messages[:-1] == first.messages[:-1]  # the same system message
    asked, was = second.messages[-1]["content"], first.messages[-1]["content"]
    # the same sections, each opened by its tag in place of its heading, and the task once more after the note
    assert asked.endswith("\n\n" + ECHO_RETRY_NOTE + " " + TASK)
    for heading, tag in [("# Task\n", "<task>\n"), ("# Plan context\n", "<plan_context>\n"),
                         ("# Research context\n", "<research_context>\n")]:
        assert heading in was and heading not in asked and tag in asked
    assert asked[:-len(ECHO_RETRY_NOTE + TASK) - 3] == (
        was.replace("# Task\n", "<task>\n").replace("# Plan context\n", "<plan_context>\n")
        .replace("# Research context\n", "<research_context>\n"))
    assert (first.seed, second.seed) == (40, 42)  # seed + 1 is the count retry's


def test_an_echo_of_the_tagged_retry_is_still_an_echo():
    from harness.synthesis import SECTION_TAGS

    tagged_echo = ("<task>\nList 5 best practices for asyncio\n\n<research_context>\nasyncio.gather runs "
                   "awaitables concurrently.")
    assert prompt_echo_reasons(tagged_echo)
    assert prompt_echo_reasons("Intro line.\n\n" + ECHO_RETRY_NOTE + " " + TASK + "\n\n<task>\n" + TASK)
    for tag in SECTION_TAGS:  # every tag the retry writes is one of the gate's markers
        other = "<plan_context>" if tag != "<plan_context>" else "<research_context>"
        assert tag in prompt_echo_reasons(f"{tag}\nsome text here\n\n{other}\nmore text here")[0]
    fake = FakeLLM([echo_of(), tagged_echo])
    result = run(fake, cfg=SynthConfig(count_retry=False))
    assert result.text == echo_of() and result.echo_kept  # the retry echoed too: the first reply is kept


def test_an_echo_again_or_a_failed_call_keeps_the_first_reply_and_says_so():
    no_count = SynthConfig(count_retry=False)  # (with it on, the count check would ask once more: 0 items of 5)
    fake = FakeLLM([echo_of(), echo_of()])
    result = run(fake, cfg=no_count)
    assert result.text == echo_of() and result.echo and result.echo_kept and len(fake.calls) == 2

    class DownOnRetry(FakeLLM):
        def chat(self, messages, **kw):
            if self.calls:
                raise BackendError("fake: down")
            return super().chat(messages, **kw)

    result = run(DownOnRetry([echo_of()]), cfg=no_count)
    assert result.text == echo_of() and result.echo_kept and result.echo_error == "BackendError: fake: down"


def test_an_answer_that_only_copies_context_lines_is_not_asked_again():
    """The gate floors the prompt's scaffolding, not an answer built from the research summary's lines."""
    copied = "\n".join(f"{i}. asyncio.gather runs awaitables concurrently." for i in range(1, 6))
    fake = FakeLLM([copied, numbered(5)])
    result = run(fake, cfg=SynthConfig(count_retry=False))
    assert len(fake.calls) == 1 and result.text == copied and result.echo == ()


def test_no_second_call_for_an_answer_when_off_or_without_an_echo_check():
    for cfg, echo in [(SynthConfig(count_retry=False), prompt_echo_reasons),
                      (SynthConfig(echo_retry=False, count_retry=False), prompt_echo_reasons),
                      (SynthConfig(count_retry=False), None)]:
        first = numbered(5) if cfg.echo_retry and echo is not None else echo_of()
        fake = FakeLLM([first, numbered(5)])
        result = run(fake, cfg=cfg, echo=echo)
        assert len(fake.calls) == 1 and result.echo == () and not result.echo_kept


def test_the_count_check_runs_on_the_kept_retry_with_the_messages_that_wrote_it():
    fake = FakeLLM([echo_of(), numbered(3), numbered(5)])
    result = run(fake)
    assert result.text == numbered(5) and result.retried and result.first_found == 3 and result.echo
    count_retry = fake.calls[2].messages
    assert ECHO_RETRY_NOTE in count_retry[1]["content"] and count_retry[2] == {"role": "assistant",
                                                                               "content": numbered(3)}


def test_through_the_pipeline_an_echo_is_replaced_recorded_and_scored_as_the_answer(tmp_path):
    router = Router(synth=[echo_of(), numbered(5)])
    result = make_harness(tmp_path, router).run(TASK)
    assert router.calls["synth"] == 2 and result.output_text.strip().endswith(numbered(5).strip().splitlines()[-1])
    synth = result.record["synthesis"]
    assert synth["echo"] and synth["echo_kept"] is False and synth["echo_error"] is None
    assert not result.evaluation.degenerate and result.score > 1.0

    off = make_harness(tmp_path / "off", Router(synth=[echo_of(), numbered(5)]))
    off.cfg.synth.echo_retry = False
    off.cfg.synth.count_retry = False  # (the count check would otherwise ask again: the echo has 0 of 5 items)
    kept = off.run(TASK)
    assert kept.evaluation.degenerate and kept.score <= 1.0  # before: the echo was the answer, floored
