"""Mutation operators and propose(): scripted FakeLLM only, no real model."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from harness.inference import BackendUnavailable, ChatResult
from harness.inference._fake import FakeLLM
from mutators import MutationContext, instruction_hash, operator_names, propose
from mutators.base import Candidate, bound_length, clean_instruction, degenerate_reason, split_sentences
from mutators.library import CONSTRAINTS, constraints_for, missing_constraints
from mutators.operators import (
    DETERMINISTIC_OPERATORS,
    MAX_TOKENS,
    OPERATORS,
    interleave,
    opro_history,
    opro_messages,
)

BASE = (
    "Write a numbered list with exactly the requested number of items. "
    "Give each item a short bold title. "
    "Explain how each item works in two sentences. "
    "Use only facts from the research context."
)
OTHER = "Use Markdown headings. State one common pitfall per item. Prefer concrete numbers over adjectives."
NEW = "Write a numbered list of distinct items. Name one concrete tool and version per item. Cite sources [n]."


def reply(text: str) -> str:
    return json.dumps({"instruction": text})


def ctx(**kw) -> MutationContext:
    defaults = dict(base=BASE, seed=1)
    defaults.update(kw)
    return MutationContext(**defaults)


class RaisingLLM:
    backend = "ollama"
    model = "glm4:9b"

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, messages, **kw) -> ChatResult:
        self.calls += 1
        raise BackendUnavailable("ollama at http://localhost:11434 is not reachable (model glm4:9b)")


# -- hashing and data --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, same",
    [
        ("Write a list.", "Write a list.", True),
        ("Write  a\n list. ", " Write a list.", True),
        ("Write a list.", "write a list.", False),
        ("Write a list.", "Write a list!", False),
    ],
)
def test_instruction_hash_normalises_whitespace_only(a, b, same):
    assert len(instruction_hash(a)) == 12 and re.fullmatch(r"[0-9a-f]{12}", instruction_hash(a))
    assert (instruction_hash(a) == instruction_hash(b)) is same


def test_candidate_and_context_are_frozen_and_lists_become_tuples():
    c = ctx(history=[["a b c d", 3]], feedback=["too vague"], pool=["x"])
    assert c.history == (("a b c d", 3.0),) and c.feedback == ("too vague",) and c.pool == ("x",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.base = "other"  # type: ignore[misc]
    cand = Candidate.make(NEW, "opro", ("p",))
    assert cand.hash == instruction_hash(NEW)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cand.text = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    "kw, fragment",
    [
        (dict(base=""), "non-empty instruction"),
        (dict(max_chars=10), "max_chars must be an int >= 40"),
        (dict(history=[("only text",)]), "history[0] must be an (instruction, score) pair"),
        (dict(history=[("t", "high")]), "history[0]"),
        (dict(feedback="one string"), "feedback must be a sequence of strings"),
    ],
)
def test_context_validation_says_what_was_expected(kw, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        ctx(**kw)


# -- text helpers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("One. Two! Three?", ["One.", "Two!", "Three?"]),
        ("Use tools, e.g. NumPy 1.26. Then stop.", ["Use tools, e.g. NumPy 1.26.", "Then stop."]),
        ("Version 3.11 is fine. Next.", ["Version 3.11 is fine.", "Next."]),
        ("- First rule.\n- Second rule. More.\n\n", ["- First rule.", "- Second rule.", "More."]),
        ("no terminal punctuation", ["no terminal punctuation"]),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Here is the improved instruction:\nWrite items. Cite.", "Write items. Cite."),
        ("Here's a new instruction: Write items.", "Write items."),
        ('"Write items. Cite sources."', "Write items. Cite sources."),
        ("```\nWrite items. Cite sources.\n```", "Write items. Cite sources."),
        ("```text\nImproved instruction: 'Write items.'\n```", "Write items."),
        ("Sure! New instruction: Write items.", "Write items."),
        ("<INS>Write items.</INS>", "Write items."),
        ("Edit: Write items. Cite.", "Write items. Cite."),
        ("Write items. Cite sources.\nExplanation: I added citations.", "Write items. Cite sources."),
        ("Write items.\nScore: 9.5", "Write items."),
        ('Write "bold" titles. Cite.', 'Write "bold" titles. Cite.'),
        ("```markdown text\nWrite items. Cite sources.", "Write items. Cite sources."),  # cut off, spaced info
        ("```00AAAAAAAAA A A A", ""),  # found by Hypothesis: a fence line and nothing else
        ("Use `asyncio.run` once. Cite.", "Use `asyncio.run` once. Cite."),
        (BASE, BASE),
    ],
)
def test_clean_instruction(raw, expected):
    assert clean_instruction(raw) == expected
    assert clean_instruction(expected) == expected


@pytest.mark.parametrize("limit", [70, 100, 150, 1200])
def test_bound_length_cuts_at_sentence_boundary(limit):
    text, cut = bound_length(BASE, limit)
    assert len(text) <= limit
    assert cut is (len(BASE) > limit)
    assert text.endswith(".")
    assert BASE.startswith(text)


def test_bound_length_cuts_one_long_sentence_at_a_word():
    long = "Write " + "very " * 60 + "carefully."
    text, cut = bound_length(long, 80)
    assert cut and len(text) <= 80 and text.endswith("very.")


@pytest.mark.parametrize(
    "text, base, fragment",
    [
        ("", "", "empty"),
        ("Be good.", "", "too short"),
        ('{"instruction": "write the items with care"}', "", "JSON"),
        ("I'm sorry, but I cannot write that instruction for you.", "", "refusal"),
        ("I cannot help with that request today.", "", "refusal"),
        ("1234 5678 9012 3456 7890 ---- ****", "", "non-letters"),
        ("the the the the the the the the the the the the the", "", "repetitive"),
        ('Reply with the schema: instruction: string maxLength 400 please', "", "echoes"),
        ("Write items about the topic now.", "Write {count} items.", "{count}"),
        (NEW, BASE, None),
    ],
)
def test_degenerate_reason(text, base, fragment):
    reason = degenerate_reason(text, base)
    if fragment is None:
        assert reason is None
    else:
        assert reason is not None and fragment in reason


# -- library -----------------------------------------------------------------------------------------


def test_library_has_concrete_constraints_per_task_type():
    texts = {c.text for c in CONSTRAINTS}
    assert len(CONSTRAINTS) >= 20 and len({c.key for c in CONSTRAINTS}) == len(CONSTRAINTS)
    for must in (
        "Name at least one concrete tool, library or version per item.",
        "Give a one-line code example where it helps.",
        "State one common pitfall per item.",
        "Cite the numbered sources [n] you rely on.",
        "Keep each item under 80 words.",
    ):
        assert must in texts
    assert any(c.key == "exact_count" for c in constraints_for("enumerated"))
    assert not any(c.key == "exact_count" for c in constraints_for("research"))
    assert all(len(c.task_types) == 3 for c in constraints_for("no-such-type"))


@pytest.mark.parametrize(
    "instruction, key",
    [
        ("Keep each item under 120 words.", "item_length"),
        ("Cite the numbered sources [n] you rely on.", "cite"),
        ("Mention a pitfall for each.", "pitfall"),
    ],
)
def test_constraint_already_present_is_not_missing(instruction, key):
    assert key not in {c.key for c in missing_constraints(instruction, "enumerated")}


# -- deterministic operators -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DETERMINISTIC_OPERATORS))
def test_deterministic_operators_new_text_and_reproducible_by_seed(name):
    a = OPERATORS[name](ctx(seed=7), None)
    b = OPERATORS[name](ctx(seed=7), None)
    assert a == b
    assert a.operator == name and a.hash != instruction_hash(BASE) and a.parents == (instruction_hash(BASE),)
    assert a.hash == instruction_hash(a.text)
    outputs = {OPERATORS[name](ctx(seed=s), None).hash for s in range(12)}
    assert len(outputs) > 1, "different seeds should reach different edits"


def test_add_constraint_appends_one_missing_library_constraint():
    c = OPERATORS["add_constraint"](ctx(seed=3), None)
    added = c.text[len(BASE):].strip()
    assert c.text.startswith(BASE)
    assert added in {k.text for k in missing_constraints(BASE, "enumerated")}
    assert added not in BASE


def test_add_constraint_keeps_bullet_layout():
    base = "- Write a numbered list.\n- Give each item a bold title."
    c = OPERATORS["add_constraint"](ctx(base=base), None)
    lines = c.text.splitlines()
    assert lines[:2] == base.splitlines() and len(lines) == 3 and lines[2].startswith("- ")


def test_drop_sentence_removes_exactly_one_and_keeps_template_fields():
    base = "Write {count} items. Bold titles. Two sentences each. Use the sources."
    for seed in range(10):
        c = OPERATORS["drop_sentence"](ctx(base=base, seed=seed), None)
        assert len(split_sentences(c.text)) == 3 and "{count}" in c.text


def test_drop_sentence_never_drops_the_last_one():
    c = propose("drop_sentence", ctx(base="Write a numbered list of the requested items."))
    assert c.operator != "drop_sentence" and "drop_sentence failed" in c.note
    assert c.text.strip()


def test_reorder_is_a_permutation():
    c = OPERATORS["reorder"](ctx(seed=5), None)
    assert sorted(split_sentences(c.text)) == sorted(split_sentences(BASE))
    assert split_sentences(c.text) != split_sentences(BASE)


def test_operators_do_not_touch_their_inputs():
    c = ctx(pool=(BASE, OTHER), feedback=("too vague",), history=((BASE, 5.0),))
    before = dataclasses.asdict(c)
    for name in operator_names():
        propose(name, c, None)
    assert dataclasses.asdict(c) == before


# -- LLM operators -----------------------------------------------------------------------------------


def test_opro_prompt_has_history_ascending_and_bounded_call():
    history = [(OTHER, 7.5), (BASE, 4.0), (NEW, 9.0), ("Write short items in plain words.", 6.25)]
    fake = FakeLLM(keyed={"ascending order of score": reply("Write exactly the requested items. Cite [n].")})
    cand = propose("opro", ctx(history=history, seed=11), fake)
    assert cand.operator == "opro" and cand.text == "Write exactly the requested items. Cite [n]."
    assert cand.hash != instruction_hash(BASE) and cand.parents == (instruction_hash(BASE),)
    (call,) = fake.calls
    prompt = call.messages[-1]["content"]
    scores = [float(s) for s in re.findall(r"score:\n([0-9.]+)", prompt)]
    assert scores == [4.0, 6.25, 7.5, 9.0]
    assert prompt.index(BASE) < prompt.index(OTHER) < prompt.index(NEW)
    assert call.max_tokens == MAX_TOKENS <= 400 and call.temperature <= 0.7 and call.seed == 11
    assert call.schema["properties"]["instruction"]["maxLength"] == 1200


def test_opro_history_merges_duplicates_and_keeps_the_best():
    history = [(f"Instruction number {i} says write items.", float(i)) for i in range(12)]
    history.append(("Instruction number 11 says  write items.", 1.0))  # same hash: mean of 11 and 1
    shown = opro_history(ctx(history=history), limit=4)
    assert [s for _, s in shown] == [7.0, 8.0, 9.0, 10.0]
    assert not any("number 11" in t for t, _ in shown)
    assert "not scored yet" in opro_messages(ctx())[-1]["content"]


def test_reflect_prompt_has_feedback_and_parent():
    feedback = ("Items lack concrete version numbers.", "Two items repeat the same idea.")
    fake = FakeLLM([reply(BASE + " Name the version of each tool.")])
    cand = propose("reflect", ctx(feedback=feedback), fake)
    assert cand.operator == "reflect" and cand.text.endswith("Name the version of each tool.")
    prompt = fake.calls[0].messages[-1]["content"]
    assert BASE in prompt and all(f in prompt for f in feedback)


def test_reflect_without_feedback_falls_back():
    fake = FakeLLM([reply(NEW)])
    cand = propose("reflect", ctx(), fake)
    assert cand.operator in DETERMINISTIC_OPERATORS and "needs evaluator feedback" in cand.note
    assert fake.calls == []


def test_crossover_merges_two_pool_candidates_with_the_model():
    fake = FakeLLM([reply(NEW)])
    cand = propose("crossover", ctx(pool=(BASE, OTHER)), fake)
    assert cand.operator == "crossover" and cand.text == NEW
    assert set(cand.parents) == {instruction_hash(BASE), instruction_hash(OTHER)}
    prompt = fake.calls[0].messages[-1]["content"]
    assert BASE in prompt and OTHER in prompt


@pytest.mark.parametrize("llm", [None, RaisingLLM(), FakeLLM(["I cannot help with that."])])
def test_crossover_falls_back_to_interleaving(llm):
    cand = propose("crossover", ctx(pool=(BASE, OTHER), seed=2), llm)
    assert cand.operator == "crossover" and "interleaved sentences" in cand.note
    assert sorted(split_sentences(cand.text)) == sorted(split_sentences(BASE) + split_sentences(OTHER))


def test_interleave_alternates_and_dedupes():
    assert interleave("A one. A two. Shared.", "B one. Shared. B three.") == "A one. B one. A two. Shared. B three."


# -- propose: cleaning, bounds, fallbacks, duplicates ------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "Here is the improved instruction:\n" + NEW,
        "```json\n" + reply(NEW) + "\n```",
        "Sure! " + reply(NEW),
        '{"instruction": "' + NEW + '",}',
        reply('"' + NEW + '"'),
        "```\n" + NEW + "\n```",
        '{"new_instruction": "' + NEW + '"}',
    ],
)
def test_propose_strips_wrappers(raw):
    cand = propose("opro", ctx(), FakeLLM([raw]))
    assert cand.operator == "opro" and cand.text == NEW, cand.note


def test_propose_uses_truncated_json_reply():
    cut = '{"instruction": "' + NEW + ' Keep each item under 80 words and always cite the'
    cand = propose("opro", ctx(), FakeLLM([cut]))
    assert cand.operator == "opro" and "parser=regex" in cand.note
    assert cand.text.startswith(NEW)


@pytest.mark.parametrize("max_chars", [60, 120, 300])
def test_propose_bounds_length_at_sentence_boundary(max_chars):
    words = "tool version pitfall source claim example metric step limit date library benchmark".split()
    long = " ".join(f"Rule {i}: give each {w} its own {words[(i + 5) % len(words)]}." for i, w in enumerate(words))
    cand = propose("opro", ctx(max_chars=max_chars), FakeLLM([reply(long)]))
    assert cand.operator == "opro" and len(cand.text) <= max_chars
    assert cand.text.endswith(".") and long.startswith(cand.text)
    assert "cut to" in cand.note and cand.hash == instruction_hash(cand.text)


@pytest.mark.parametrize(
    "llm, fragment",
    [
        (FakeLLM(["{{{{ ]]]"]), "opro"),
        (FakeLLM([reply("ok")]), "too short"),
        (FakeLLM([reply("the " * 40)]), "repetitive"),
        (FakeLLM(['{"score": 9}']), "no usable 'instruction'"),
        (FakeLLM([""]), "empty"),
        (FakeLLM([]), "FakeExhausted"),
        (RaisingLLM(), "BackendUnavailable"),
        (None, "needs an LLM"),
    ],
)
def test_propose_falls_back_on_garbage_and_backend_errors(llm, fragment):
    cand = propose("opro", ctx(history=((BASE, 5.0),)), llm)
    assert cand.operator in DETERMINISTIC_OPERATORS
    assert fragment in cand.note and "fell back to" in cand.note
    assert cand.hash != instruction_hash(BASE) and cand.hash == instruction_hash(cand.text)
    again = propose("opro", ctx(history=((BASE, 5.0),)), None)
    assert again.text == propose("opro", ctx(history=((BASE, 5.0),)), None).text


def test_propose_rejects_a_reply_that_repeats_the_parent():
    cand = propose("opro", ctx(), FakeLLM([reply(BASE.replace(" ", "  "))]))
    assert cand.operator != "opro" and "duplicate of the parent" in cand.note


def test_propose_rejects_seen_hashes_and_falls_back_to_something_new():
    first = propose("add_constraint", ctx(seed=4))
    seen = {first.hash}
    second = propose("add_constraint", ctx(seed=4), seen=seen)
    assert second.hash not in seen and second.hash != instruction_hash(BASE)
    assert "duplicate of a seen candidate" in second.note
    llm_dup = propose("opro", ctx(), FakeLLM([reply(NEW)]), seen={instruction_hash(NEW)})
    assert llm_dup.text != NEW and "duplicate" in llm_dup.note


def test_propose_many_rounds_keeps_producing_new_candidates():
    seen: set[str] = set()
    c = ctx(seed=0)
    for i in range(15):
        cand = propose(operator_names()[3 + i % 3], c, seen=seen)
        assert cand.hash not in seen
        seen.add(cand.hash)


def test_propose_exhausted_on_single_sentence_with_every_constraint():
    base = "Follow these rules: " + " and ".join(c.text.rstrip(".").lower() for c in constraints_for("research"))
    base = base + "."
    assert not missing_constraints(base, "research")
    cand = propose("reorder", MutationContext(base=base, task_type="research", max_chars=2000))
    assert cand.operator == "none" and cand.note.startswith("exhausted:") and cand.hash == instruction_hash(base)


def test_unknown_operator_lists_known_ones():
    with pytest.raises(ValueError) as err:
        propose("mutate_harder", ctx(), None)
    assert all(name in str(err.value) for name in operator_names())


def test_operator_names_are_the_registry():
    assert operator_names() == ["opro", "reflect", "crossover", "add_constraint", "drop_sentence", "reorder"]
    assert all(callable(OPERATORS[n]) for n in operator_names())


@pytest.mark.parametrize("name", ["opro", "reflect", "crossover"])
def test_each_llm_operator_returns_new_instruction_and_its_name(name):
    fake = FakeLLM([reply(NEW)])
    cand = propose(name, ctx(feedback=("vague",), pool=(BASE, OTHER), history=((BASE, 5.0),)), fake)
    assert cand.operator == name and cand.hash == instruction_hash(NEW) != instruction_hash(BASE)
    assert len(fake.calls) == 1


@pytest.mark.embedded
def test_reflect_on_the_embedded_model_never_raises(monkeypatch):
    from harness.config import BackendConfig
    from harness.inference import make_llm
    from mutators.operators import _llm

    monkeypatch.setattr(_llm, "MAX_TOKENS", 120)
    llm = make_llm(BackendConfig(kind="embedded"), "producer")
    c = ctx(feedback=("Items lack concrete version numbers.",), max_chars=400)
    cand = propose("reflect", c, llm)
    assert isinstance(cand, Candidate) and cand.hash != instruction_hash(BASE)
    assert len(cand.text) <= 400 and degenerate_reason(cand.text, BASE) is None
    assert cand.operator == "reflect" or "fell back to" in cand.note


# -- an operator that cannot apply is known before it is asked for (issue 31 item 8d) ---------------------------


@pytest.mark.parametrize("name, ctx, reason", [
    ("crossover", MutationContext(base=BASE, pool=(BASE,)), "crossover needs two distinct instructions in "
                                                                      "the pool; it holds 1"),
    ("crossover", MutationContext(base=BASE, pool=(BASE, "  " + BASE + "\n")), "it holds 1"),
    ("crossover", MutationContext(base=BASE, pool=(BASE, OTHER)), None),
    ("crossover", MutationContext(base=OTHER, pool=(BASE,)), None),  # the base is the second text
    ("drop_sentence", MutationContext(base="Write one concise Markdown answer for the reader."), "at least two"),
    ("reorder", MutationContext(base="Write one concise Markdown answer for the reader."), "at least two"),
    ("reorder", MutationContext(base=BASE), None),
    ("opro", MutationContext(base=BASE), None),
    ("add_tool", MutationContext(base=BASE), None),  # a caller's own operator: nothing known against it
])
def test_cannot_apply_says_why_an_operator_would_fall_back_and_propose_agrees(name, ctx, reason):
    from mutators import cannot_apply, propose

    why = cannot_apply(name, ctx)
    assert why is None if reason is None else reason in why
    if name in OPERATORS and name not in ("opro", "reflect"):  # no model: these make their text themselves
        assert (propose(name, ctx, None).operator == name) is (reason is None)
