"""harness.text (_jsonparse): the json -> dirtyjson ladder and regex extraction on broken model output."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.text import (
    JSONParseError, extract_number_field, extract_string_field, extract_string_list, parse_json, parse_json_object,
)

PARSE_CASES = [
    ("clean", '{"a": 1, "b": ["x"]}', {"a": 1, "b": ["x"]}, "json"),
    ("code fence", '```json\n{"a": 1}\n```', {"a": 1}, "json"),
    ("fence without language", '```\n{"a": 1}\n```\n', {"a": 1}, "json"),
    ("prose around", 'Sure! Here is the plan: {"a": {"b": "}"}} Hope this helps {x}.', {"a": {"b": "}"}}, "json"),
    ("trailing commas", '{"a": [1, 2,], "b": 3,}', {"a": [1, 2], "b": 3}, "dirtyjson"),
    ("unescaped inner quotes", '{"notes": "say "hi" now", "b": 1}', {"notes": 'say "hi" now', "b": 1}, "dirtyjson"),
    ("single quotes, bare keys", "{a: 'x', b: ['y',]}", {"a": "x", "b": ["y"]}, "dirtyjson"),
    ("python literals", '{"a": True, "b": None, "c": False}', {"a": True, "b": None, "c": False}, "dirtyjson"),
    ("comment", '{"a": 1, // note\n "b": 2}', {"a": 1, "b": 2}, "dirtyjson"),
    ("raw newline in string", '{"a": "line one\nline two"}', {"a": "line one\nline two"}, "dirtyjson"),
    ("fence and trailing prose", 'Plan:\n```json\n{"a": [1,],}\n```\nLet me know.', {"a": [1]}, "dirtyjson"),
]


@pytest.mark.parametrize("name,text,expected,parser", PARSE_CASES, ids=[c[0] for c in PARSE_CASES])
def test_parse_json_object_table(name, text, expected, parser):
    obj, used = parse_json_object(text)
    assert obj == expected
    assert used == parser
    assert type(obj) is dict


FAIL_CASES = [
    ("empty", "", "empty"),
    ("whitespace", "   \n", "empty"),
    ("prose only", "I cannot help with that.", "found no '{'"),
    ("truncated", '{"a": ["x", "y', "both failed"),
    ("array only", "[1, 2]", "found no '{'"),
]


@pytest.mark.parametrize("name,text,fragment", FAIL_CASES, ids=[c[0] for c in FAIL_CASES])
def test_parse_json_object_failures_raise_with_reason(name, text, fragment):
    with pytest.raises(JSONParseError) as info:
        parse_json_object(text)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)
    assert info.value.text == text


def test_non_string_input_raises_parse_error():
    with pytest.raises(JSONParseError, match="as text"):
        parse_json_object(None)  # type: ignore[arg-type]


def test_parse_json_accepts_arrays_and_objects():
    assert parse_json('steps: [{"id": 1}]') == ([{"id": 1}], "json")
    assert parse_json('{"a": [1]}') == ({"a": [1]}, "json")


LIST_CASES = [
    ("complete", '{"q": ["a", "b"]}', ["a", "b"]),
    ("truncated mid item", '{"q": ["a", "b", "unfinish', ["a", "b"]),
    ("truncated after comma", '{"q": ["a",', ["a"]),
    ("escaped quote", r'{"q": ["say \"hi\"", "b"]}', ['say "hi"', "b"]),
    ("non-strings skipped", '{"q": ["a", 3, null, "b"]}', ["a", "b"]),
    ("key absent", '{"other": ["a"]}', []),
    ("stops at closing bracket", '{"q": ["a"], "r": ["b"]}', ["a"]),
    ("single-quoted key", "{'q': [\"a\"]}", ["a"]),
    ("blank items dropped", '{"q": ["", "  ", "x"]}', ["x"]),
    ("prose", "no json at all", []),
]


@pytest.mark.parametrize("name,text,expected", LIST_CASES, ids=[c[0] for c in LIST_CASES])
def test_extract_string_list_table(name, text, expected):
    assert extract_string_list(text, "q") == expected


def test_extract_scalar_fields():
    text = '{"task_type": "enumerated", "expected_sections": 5, "notes": "cut off her'
    assert extract_string_field(text, "task_type") == "enumerated"
    assert extract_string_field(text, "notes") == "cut off her"
    assert extract_string_field(text, "missing") is None
    assert extract_number_field(text, "expected_sections") == 5
    assert extract_number_field(text, "missing") is None


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.one_of(st.integers(), st.text(max_size=20), st.lists(st.text(max_size=10), max_size=3)),
        max_size=4,
    ),
    st.sampled_from(["{}", "Here you go:\n{}\nDone.", "```json\n{}\n```"]),
)
def test_any_valid_object_round_trips_through_wrappers(obj, wrapper):
    text = wrapper.replace("{}", json.dumps(obj), 1)
    parsed, parser = parse_json_object(text)
    assert parsed == obj
    assert parser == "json"


@pytest.mark.parametrize("obj", [{"```": []}, {"a": "```"}, {"```json": 1}, {"code": "```python\nx = 1\n```"}])
@pytest.mark.parametrize("wrapper", ["{}", "Here you go:\n{}\nDone.", "```json\n{}\n```"])
def test_backticks_inside_the_json_survive_fence_stripping(obj, wrapper):
    # found by Hypothesis: {"```": []} raised "found no '{'" and {"a": "```"} came back as {"a": ""}
    assert parse_json_object(wrapper.replace("{}", json.dumps(obj), 1)) == (obj, "json")
