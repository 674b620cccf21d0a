"""Compression: the planner-role model turns a finished run into an observation, or the fallback builds one."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from harness.security import DataMarker

from ._observation import (
    FACT_MAX,
    FACTS_MAX,
    NARRATIVE_MAX,
    TITLE_MAX,
    Observation,
    fallback_observation,
    observation_from_model,
)

log = logging.getLogger("harness.memory")

OUTPUT_PROMPT_CHARS = 3000

COMPRESS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": TITLE_MAX},
        "narrative": {"type": "string", "maxLength": NARRATIVE_MAX},
        "key_facts": {
            "type": "array",
            "items": {"type": "string", "maxLength": FACT_MAX},
            "maxItems": FACTS_MAX,
        },
    },
    "required": ["title", "narrative", "key_facts"],
}

COMPRESS_SYSTEM = (
    "You compress a finished research run into a memory observation for future runs. "
    "Reply with one JSON object only: "
    '{"title": "<short topic title>", "narrative": "<2-3 sentences: what was asked, what was found>", '
    '"key_facts": ["<concrete, reusable fact>", ...]} with at most 5 key_facts.'
)


@dataclass(frozen=True)
class Compression:
    """How a run became an observation: which parser read the model's JSON, or why it fell back."""

    run_id: str
    parser: str  # "json" | "dirtyjson" | "fallback"
    fallback: bool
    reason: str = ""


def compress_messages(task: str, output: str, plan: Any = None) -> list[dict[str, str]]:
    parts = [f"Task: {task}"]
    task_type = getattr(plan, "task_type", None)
    if task_type:
        parts.append(f"Task type: {task_type}")
    summary = getattr(plan, "prior_work_summary", "")
    if summary:
        parts.append(f"Prior work: {summary}")
    # the output was written from untrusted sources: a data block, so an instruction planted there is not obeyed
    # (and not carried into memory, where every later run would read it)
    marker = DataMarker.for_run(task)
    parts.append(marker.notice())
    parts.append("Output of the run:\n" + marker.wrap((output or "")[:OUTPUT_PROMPT_CHARS], "output"))
    parts.append("Return the JSON observation now.")
    return [{"role": "system", "content": COMPRESS_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def compress_run(task: str, output: str, plan: Any, llm: Any, run_id: str) -> tuple[Observation, Compression]:
    """Ask the model for an observation; never raises: any model or parse trouble gives the fallback."""
    from harness.text import JSONParseError, parse_json_object

    created = time.time()
    try:
        reply = llm.chat(
            compress_messages(task, output, plan), schema=COMPRESS_SCHEMA, temperature=0.1, max_tokens=320, seed=0
        )
        data, parser = parse_json_object(reply.text)
        obs = observation_from_model(data, task, run_id, created)
        return obs, Compression(run_id, parser, False)
    except JSONParseError as exc:
        reason = f"unparseable reply: {exc}"
    except ValueError as exc:
        reason = f"invalid observation: {exc}"
    except Exception as exc:  # noqa: BLE001 - model trouble of any kind becomes the fallback
        reason = f"model call failed: {type(exc).__name__}: {exc}"
    log.info("compress_and_store fell back for %s: %s", run_id, reason)
    return fallback_observation(task, output, run_id, created), Compression(run_id, "fallback", True, reason[:300])
