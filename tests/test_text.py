"""harness.text: the stop words, the three code-fence modes, and FTS5 queries that no input can break."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.text import FUNCTION_WORDS, STOPWORDS, code_marks, drop_lone_fence, fts_query, is_fence_line, unwrap_fence
from harness.text._plain import fenced_bodies

# -- stop words ---------------------------------------------------------------------------------------------


def test_function_words_are_pinned_by_the_hashing_embedding():
    """Persisted Chroma collections hold hashing vectors built without exactly these words: editing the set
    silently misaligns new queries with stored vectors. Change it only together with a new embedding name."""
    digest = hashlib.sha256(" ".join(sorted(FUNCTION_WORDS)).encode()).hexdigest()[:16]
    assert digest == "7b73ef14c5fd7af2"


def test_stopwords_hold_function_and_instruction_words_but_not_topics():
    assert FUNCTION_WORDS < STOPWORDS
    assert {"the", "would", "through", "list", "write", "save", "output", "best", "three", "first"} <= STOPWORDS
    # words a query needs keep their meaning: "asyncio best practices", "large files", "new features"
    assert not {"practices", "large", "new", "python", "asyncio", "files", "error"} & STOPWORDS


# -- code fences --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, languages, expected",
    [
        ("```markdown\n# Hi\n1. a\n```", None, "# Hi\n1. a"),
        ("  \n```\nplain\n```\n\n", None, "plain"),
        ("```python\nx = 1\n```", None, "x = 1"),
        ("```python\nx = 1\n```", ("", "markdown"), "```python\nx = 1\n```"),  # code stays code
        ("```Markdown\nbody\n```", ("markdown",), "body"),  # info string compared lower-case
        ("```md \nbody\n```", ("md",), "body"),
        ("```\nA\n```\nB\n```", None, "A\n```\nB"),  # one fence around the whole text, inner fences kept
        ("Intro\n```\ncode\n```", None, "Intro\n```\ncode\n```"),  # prose outside: not a wrapper
        ("```\ncut off at max_tokens", None, "```\ncut off at max_tokens"),
        ("Text with ```code``` inside", None, "Text with ```code``` inside"),
        ("```json {\"a\": 1}```", None, "```json {\"a\": 1}```"),  # no newline after the info string
        ("", None, ""),
    ],
)
def test_unwrap_fence(text, languages, expected):
    assert unwrap_fence(text, languages) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("no fences here {}", []),
        ('Here:\n```json\n{"a": 1}\n```\nthanks', ['{"a": 1}\n']),
        ("```\nfirst\n```\nprose\n```py\nsecond\n```", ["first\n", "second\n"]),
        ('```json{"a": 1}```', ['{"a": 1}']),
        ('```json\n{"a": [1, 2', ['{"a": [1, 2']),  # cut off: runs to the end
        ("```\n```", [""]),
    ],
)
def test_fenced_bodies(text, expected):
    assert fenced_bodies(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("```\nDo the task well.", "Do the task well."),  # opened, cut off at max_tokens
        ("```text\nDo the task well.", "Do the task well."),
        ("Do the task well.\n```", "Do the task well.\n"),  # a stray closing fence
        ("```", ""),
        ("Use ```x``` inline.", "Use ```x``` inline."),
        ("Keep\n```\ncode\n```\nafter", "Keep\n```\ncode\n```\nafter"),  # balanced fences inside are kept
    ],
)
def test_drop_lone_fence(text, expected):
    assert drop_lone_fence(text) == expected


def test_fence_lines_and_code_marks():
    assert [is_fence_line(x) for x in ("```", "  ```py", "~~~", "text ```", "`` x", "    ~~~ ")] == [
        True, True, True, False, False, True,
    ]
    md = "prose\n```py\ncode\n```\nmore\n~~~\nunclosed\nstill code"
    assert list(code_marks(md)) == [
        ("prose", False), ("```py", True), ("code", True), ("```", True), ("more", False),
        ("~~~", True), ("unclosed", True), ("still code", True),
    ]


# -- FTS5 queries -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, kwargs, expected",
    [
        ("asyncio gather", {}, '"asyncio" OR "gather"'),
        ("asyncio gather", {"op": "AND"}, '"asyncio" AND "gather"'),
        ("A a a B", {}, '"a" OR "b"'),
        ("one two three four", {"max_terms": 2}, '"one" OR "two"'),
        ("the asyncio of gather", {"stopwords": STOPWORDS}, '"asyncio" OR "gather"'),
        ("the of and", {"stopwords": STOPWORDS}, '"the" OR "of" OR "and"'),  # nothing else: keep them
        ("snake_case x", {}, '"snake_case" OR "x"'),
        ("snake_case x", {"split_underscores": True}, '"snake" OR "case" OR "x"'),
        ("--", {}, ""),
        (None, {}, ""),
    ],
)
def test_fts_query_table(text, kwargs, expected):
    assert fts_query(text, **kwargs) == expected


def test_fts_query_refuses_an_unknown_operator_in_one_line():
    with pytest.raises(ValueError, match=r"^fts_query op='NOT'; expected 'OR' or 'AND'$"):
        fts_query("x", op="NOT")


@pytest.fixture()
def fts():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize = 'porter unicode61 remove_diacritics 2')")
    conn.executemany(
        "INSERT INTO docs VALUES (?, ?)",
        [("alpha", "zebra crossing near the title page"), ("beta", "and or not"), ("gamma", "asyncio gather star")],
    )
    return conn


def _match(conn: sqlite3.Connection, expr: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT title FROM docs WHERE docs MATCH ? ORDER BY title", (expr,))]


@pytest.mark.parametrize(
    "hostile, words_found",
    [
        ('say "zebra', ["alpha"]),  # unbalanced quote
        ("NEAR(zebra crossing, 1)", ["alpha"]),  # NEAR group syntax: the word "near" is in alpha too
        ("zebra AND", ["alpha", "beta"]),  # dangling operator: "and" is a word of beta
        ("AND OR NOT", ["beta"]),  # operators as the whole query
        ("gath*", []),  # prefix star is not a wildcard: "gath" is no word of any row
        ("title:alpha", ["alpha"]),  # column filter: "title" is a word of alpha's body, not a column choice
        ("body:gamma", ["gamma"]),  # a column filter would have found nothing in body; as words it finds gamma
        ("(((zebra", ["alpha"]),
        ("^zebra -asyncio +x", ["alpha", "gamma"]),
        ("'; DROP TABLE docs; --", []),
    ],
)
def test_hostile_input_is_searched_as_plain_words(fts, hostile, words_found):
    """Each input is either invalid FTS5 syntax or means something else as syntax; quoted, every word is matched
    as a word (OR), the table survives, and nothing raises."""
    expr = fts_query(hostile)
    assert _match(fts, expr) == words_found
    assert fts.execute("SELECT count(*) FROM docs").fetchone()[0] == 3


@pytest.mark.parametrize("raw", ['say "zebra', "zebra AND", "AND OR NOT", "(((zebra", "body:gamma"])
def test_the_hostile_inputs_do_break_or_change_a_raw_match(fts, raw):
    """The cases above matter: unquoted, these raise or match differently."""
    try:
        found = _match(fts, raw)
    except sqlite3.OperationalError:
        return
    assert found != _match(fts, fts_query(raw))


@given(st.text(max_size=200), st.sampled_from(["OR", "AND"]), st.booleans())
@settings(max_examples=200, deadline=None)
def test_fts_query_is_always_valid_fts5(text, op, split):
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize = 'porter unicode61')")
    conn.execute("INSERT INTO t VALUES ('some searchable body text')")
    expr = fts_query(text, op=op, split_underscores=split, stopwords=STOPWORDS if split else frozenset())
    if expr:
        conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (expr,)).fetchall()
