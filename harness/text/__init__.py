"""Text every stage reads or writes: plain-text helpers, the tolerant JSON reader of model replies, and Markdown.

- _plain: the stop words (`FUNCTION_WORDS`, `STOPWORDS`), code-fence handling and safe FTS5 queries.
- _jsonparse: model JSON read json -> dirtyjson -> `JSONParseError`, and the regex fallbacks that also read
  truncated JSON (`extract_string_list`, `extract_string_field`, `extract_number_field`).
- _markdown: heading, list-item and line-prefix patterns, the lines outside code fences, `count_items`.
"""

from ._jsonparse import (
    JSONParseError,
    extract_number_field,
    extract_string_field,
    extract_string_list,
    parse_json,
    parse_json_object,
)
from ._markdown import ANY_LIST, HEADING, LINE_PREFIX, NUMBERED_ITEM, URL, count_items, lines_outside_code
from ._plain import FUNCTION_WORDS, STOPWORDS, code_marks, drop_lone_fence, fts_query, is_fence_line, unwrap_fence

__all__ = [
    "FUNCTION_WORDS",
    "STOPWORDS",
    "unwrap_fence",
    "drop_lone_fence",
    "is_fence_line",
    "code_marks",
    "fts_query",
    "JSONParseError",
    "parse_json",
    "parse_json_object",
    "extract_string_list",
    "extract_string_field",
    "extract_number_field",
    "HEADING",
    "ANY_LIST",
    "LINE_PREFIX",
    "NUMBERED_ITEM",
    "URL",
    "lines_outside_code",
    "count_items",
]
