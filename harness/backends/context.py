"""The context window a request runs in: estimating a prompt's tokens, choosing a window, catching truncation.

Ollama gives a request without `options.num_ctx` its server default (2048 tokens in its Modelfile documentation,
more on some versions) and cuts a longer prompt from the front, system prompt first, answering 200 OK. So every
request here carries a window, a prompt estimated over it is refused before it is sent, and a reply whose
`prompt_eval_count` shows the prompt was cut is an error, never a result.

Token estimates without the model's tokenizer (servers do not expose one through a stable API):
- `estimate_tokens` is an upper estimate: characters / 3 plus 8 template tokens per message. English prose
  runs ~4 characters per token and code ~3, so it overestimates prose by about a third; a window chosen from it
  has room to spare.
- `min_tokens` is a lower bound: one token per whitespace-separated word. The tokenizers these servers run
  (BPE and SentencePiece, which split on whitespace before merging) never merge two words into one token, so a
  reply that counts fewer prompt tokens than the prompt has words was cut. 0.9 of it leaves room for a server
  that counts a few words together.
Ollama's `prompt_eval_count` includes the tokens served from its prompt cache (ollama PRs #5371 and #16428), so
a cached prefix does not look like a cut.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from harness.config import ROLES
from harness.inference import ContextOverflow

CHARS_PER_TOKEN = 3.0  # upper estimate: prose runs ~4 characters per token, code ~3
TEMPLATE_TOKENS = 8  # chat-template tokens per message (role markers, separators)
MIN_WORD_SHARE = 0.9  # a reply counting fewer prompt tokens than this share of the prompt's words was cut
ROUND_TO = 1024  # windows are chosen in steps of 1024 tokens

# The harness's largest prompt per role, in characters, with room to spare over what bench/faults/ollama_truncation.py
# measured on a compound run (3 steps) whose memory held one earlier run: producer 16,346 characters (the assembly
# synthesis: step outputs, memory, instruction), judge 6,805, planner 4,188, compressor under 4,200. The assembly
# grows with orchestrator.max_steps (4) and memory.k (4 observations), hence ~1.5x for the producer.
LARGEST_PROMPT_CHARS = {"planner": 8000, "producer": 24000, "evaluator": 12000, "compressor": 9000}
ROLE_MAX_TOKENS = {"planner": 400, "producer": 700, "evaluator": 420, "compressor": 400}


def _contents(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(m.get("content") or "") for m in messages]


def estimate_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Upper estimate of a chat prompt's tokens (see the module docstring)."""
    contents = _contents(messages)
    return math.ceil(sum(len(c) for c in contents) / CHARS_PER_TOKEN) + TEMPLATE_TOKENS * len(contents)


def min_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Lower bound of a chat prompt's tokens: its whitespace-separated words."""
    return sum(len(c.split()) for c in _contents(messages))


def round_up(tokens: int, step: int = ROUND_TO) -> int:
    return max(step, math.ceil(tokens / step) * step)


def default_num_ctx(role: str) -> int:
    """The window a role needs for the harness's largest prompt plus its max_tokens, rounded up to 1024."""
    return round_up(math.ceil(LARGEST_PROMPT_CHARS[role] / CHARS_PER_TOKEN) + 2 * TEMPLATE_TOKENS
                    + ROLE_MAX_TOKENS[role])


def role_setting(value: Any, role: str, key: str) -> Any:
    """A setting given as one value or as a mapping role -> value (roles left out get None)."""
    if isinstance(value, Mapping):
        unknown = sorted(set(map(str, value)) - set(ROLES))
        if unknown:
            raise ValueError(f"{key} names unknown role(s) {', '.join(unknown)}; expected keys among {', '.join(ROLES)}")
        return value.get(role)
    return value


def configured_num_ctx(value: Any, role: str) -> int | None:
    """backend.num_ctx for one role: None (choose it), or a positive int; anything else is a one-line error."""
    got = role_setting(value, role, "backend.num_ctx")
    if got is None:
        return None
    if isinstance(got, bool) or not isinstance(got, int) or got < 256:
        raise ValueError(f"backend.num_ctx for {role} is {got!r}; expected an integer >= 256 (tokens), "
                         f"or a mapping role -> integer")
    return int(got)


def model_num_ctx(cfg: Any, model: str, trained: int | None) -> tuple[int, str]:
    """One window per model for the whole run (a changed num_ctx makes Ollama reload the model): the largest of
    what its roles need or were given, capped by the model's trained context. Returns (num_ctx, how chosen)."""
    roles = [r for r in ROLES if cfg.model_for(r) == model]
    given = {r: configured_num_ctx(cfg.num_ctx, r) for r in roles}
    wanted = {r: given[r] if given[r] is not None else default_num_ctx(r) for r in roles}
    n = max(wanted.values())
    how = ", ".join(f"{r} {'backend.num_ctx' if given[r] is not None else 'default'} {wanted[r]}" for r in roles)
    if trained and n > trained:
        return trained, f"{how}; capped at the model's trained context {trained}"
    return n, how


@dataclass(frozen=True)
class Window:
    """The window one role's requests run in (num_ctx None: the server does not say), and the checks around a
    request."""

    role: str
    model: str
    num_ctx: int | None
    where: str  # the server, for messages
    setting: str = "backend.num_ctx"  # what to raise
    trained: int | None = None  # the model's trained context: no advice goes past it

    def overflow(self, tokens: int, what: str) -> ContextOverflow:
        window = f"the context window is {self.num_ctx} tokens" if self.num_ctx else "the server's window is unknown"
        advice = round_up(tokens * 2)
        if self.trained and advice > self.trained:  # a window past the trained context does not exist
            if tokens <= self.trained:
                advice = self.trained
            else:
                return ContextOverflow(
                    f"{self.role} prompt for {self.model} at {self.where} {what} ({tokens} tokens): longer than "
                    f"{self.model}'s trained context of {self.trained} tokens, so no window fits it: the task (or what "
                    f"research adds to it) is too long for this model; shorten the task or use a model with a longer "
                    f"context")
        return ContextOverflow(
            f"{self.role} prompt for {self.model} at {self.where} {what} ({tokens} tokens) but {window}: raise "
            f"{self.setting} (e.g. {self.setting}.{self.role}={advice}) or shorten the prompt"
        )

    def check_before(self, messages: Sequence[Mapping[str, Any]], max_tokens: int) -> int:
        """Refuse a prompt estimated over the window (its estimate plus max_tokens); returns the estimate."""
        est = estimate_tokens(messages)
        if self.num_ctx and est + int(max_tokens) > self.num_ctx:
            raise self.overflow(est + int(max_tokens), f"is estimated at {est} tokens plus max_tokens {max_tokens}")
        return est

    def check_after(self, messages: Sequence[Mapping[str, Any]], prompt_count: int | None, completion: int) -> None:
        """A reply whose prompt count shows the prompt was cut (fewer tokens than its words, or prompt and
        reply overran the window) is an error. A server that reports no count is not checked here."""
        if not prompt_count:
            return
        words = min_tokens(messages)
        if prompt_count < MIN_WORD_SHARE * words:
            raise self.overflow(words, f"was cut: the server kept {prompt_count} tokens of at least {words}")
        if self.num_ctx and prompt_count + completion > self.num_ctx:
            raise self.overflow(prompt_count + completion,
                                f"and its reply overran the window: {prompt_count} prompt + {completion} reply tokens")
