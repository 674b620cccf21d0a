"""Plain-text helpers several rooms share: the stop-word list, code-fence handling, and safe FTS5 queries.

Pure functions on strings; every pipeline stage that reads model text or builds a keyword query uses these
instead of its own copy.
"""

from __future__ import annotations

import re
from typing import Collection, Iterable

# -- stop words ------------------------------------------------------------------------------------------

# The hashing embedding drops these before it builds features (harness/memory/embeddings.py). They are part of that
# embedding's vector format: Chroma collections on disk hold vectors built with exactly this set, and a query
# embedded with another set no longer lines up with them. Do not edit it without a new embedding name.
FUNCTION_WORDS = frozenset(
    "a an and are as at be by for from has have how i in is it its of on or that the this to was what when "
    "where which who why will with you your do does can should would into about than then there these those "
    "not no".split()
)

# Words that carry no topic of their own in a task or a query: keyword queries (memory FTS, research query
# reformulation, chunk ranking), research novelty and the grounding score skip them. The grounding score also
# skips the filler of advice prose ("important", "practices", "approach"), which a query may still need:
# "asyncio best practices" searches better than "asyncio" (evaluators/deterministic/, _CLAIM_FILLER).
STOPWORDS = FUNCTION_WORDS | frozenset(
    " ".join(
        (
            # more function words
            """above after again against all also although always among another any aren't around because been
            before being below between both but cannot could did doing done down during each either else enough
            even ever every few further get gets getting given gives had having he her here hers him his however
            if isn't itself just less let many may maybe me might more most much must my never nor now off often
            once only other others otherwise our ours out over own per perhaps rather really same shall she since
            so some something sometimes such their theirs them they though through thus too toward under until up
            upon us usually very via want was way ways we well were whatever whether while whom whose within
            without yes yet yours""",
            # what a task asks for rather than what it is about
            """list give write save output file best use used uses using make makes making made need needs keep
            know known see thing things part like likely""",
            # counting and ordering
            "one two three four five six seven eight nine ten first second third next last",
        )
    ).split()
)

# -- code fences -----------------------------------------------------------------------------------------

_INFO = r"[ \t]*([A-Za-z0-9_+-]*)[ \t]*"  # the info string after ``` (a language name), captured
_WRAPPING = re.compile(r"^\s*```" + _INFO + r"\n(.*?)\n?```\s*$", re.DOTALL)
_BLOCK = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_LONE = re.compile(r"^```[^\n`]*(?:\n|$)|```\s*$")  # an opening fence line (any info string) or a closing one
_FENCE_LINE = re.compile(r"^\s*(```|~~~)")


def unwrap_fence(text: str, languages: Collection[str] | None = None) -> str:
    """The body of a code fence that wraps the whole text (surrounding blank space aside); else the text as is.

    languages: the info strings that count as a wrapper, lower-case ("" for a bare fence); None accepts any.
    A report wrapped in ```markdown is unwrapped, while one that is a ```python block may be meant as code.
    """
    m = _WRAPPING.match(text)
    if m is None or (languages is not None and m.group(1).lower() not in languages):
        return text
    return m.group(2)


def fenced_bodies(text: str) -> list[str]:
    """The bodies of the fenced blocks in text, in order. A fence cut off before its closing ``` (a reply stopped
    at max_tokens) runs to the end of the text; a fence needs no newline after its info string (```json{...}```).
    """
    return _BLOCK.findall(text) if "```" in text else []


def drop_lone_fence(text: str) -> str:
    """Remove an opening fence at the very start and a closing fence at the very end, whichever are there: what
    is left when a wrapping fence was cut off at max_tokens, or a stray closing one. Balanced fences inside the
    text are kept."""
    return _LONE.sub("", text)


def is_fence_line(line: str) -> bool:
    """Whether a Markdown line opens or closes a code block (``` or ~~~, indented or not)."""
    return _FENCE_LINE.match(line) is not None


def code_marks(markdown: str) -> Iterable[tuple[str, bool]]:
    """Each line of markdown with whether it is code: inside a fenced block, or a fence line itself.

    Any fence line toggles the block, so an unclosed block runs to the end of the text.
    """
    in_code = False
    for line in markdown.splitlines():
        fence = is_fence_line(line)
        if fence:
            in_code = not in_code
        yield line, in_code or fence


# -- FTS5 queries ----------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+", re.UNICODE)
_WORD_NO_UNDERSCORE = re.compile(r"[^\W_]+", re.UNICODE)


def fts_query(
    text: str,
    *,
    op: str = "OR",
    max_terms: int = 24,
    stopwords: Collection[str] = frozenset(),
    split_underscores: bool = False,
) -> str:
    """A safe FTS5 MATCH expression for user text: each distinct word double-quoted, joined by op; "" when the
    text has no words.

    Quoting makes AND/OR/NOT/NEAR, *, ^, column filters (title:x), parentheses and quotes plain text, so no input
    can raise a syntax error or reach another column. Words are lower-cased and kept in first-seen order, at most
    max_terms of them. stopwords are left out unless the text has nothing else (then searching for them beats
    searching for nothing). split_underscores: snake_case becomes two terms; otherwise it stays one quoted
    string, which FTS5's unicode61 tokenizer matches as the phrase "snake case".
    """
    if op not in ("OR", "AND"):
        raise ValueError(f"fts_query op={op!r}; expected 'OR' or 'AND'")
    pattern = _WORD_NO_UNDERSCORE if split_underscores else _WORD
    tokens = [t.lower() for t in pattern.findall(text or "")]
    if stopwords:
        tokens = [t for t in tokens if t not in stopwords] or tokens
    terms = list(dict.fromkeys(tokens))[:max_terms]
    return f" {op} ".join('"' + t.replace('"', '""') + '"' for t in terms)
