"""The objective: rubric, deterministic criteria, or a blend of both, chosen by EvaluatorConfig.composite.

blend = rubric_weight * rubric + (1 - rubric_weight) * deterministic (both 0-10). When the judge's reply could
not be parsed, blend and rubric modes fall back to the deterministic score and say so in `fallback`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaluators.deterministic import aggregate, count_items, deterministic_scores
from evaluators.rubric import EvalResult, score_rubric
from harness.config import EvaluatorConfig

__all__ = ["MODES", "Evaluation", "combine", "evaluate"]

MODES = ("rubric", "deterministic", "blend")
_WEAK_BELOW = 6.0
_ADVICE = {
    "terms": "cover the required topics named in the task",
    "structure": "organise the answer with headings or numbered items and short paragraphs",
    "specificity": "add concrete names, numbers, versions and code-level details",
    "grounding": "tie claims to the gathered sources and cite them",
}


@dataclass(frozen=True)
class Evaluation:
    """One scored output: the rubric verdict (None in deterministic mode), the deterministic criteria, their
    aggregate, and the composite used as the objective. `fallback` says why the composite is not what the mode
    asked for (e.g. the judge's reply could not be parsed)."""

    rubric: EvalResult | None
    deterministic: dict[str, float | None]
    composite: float
    mode: str = "blend"
    deterministic_score: float = 0.0
    fallback: str | None = None
    expected_count: int | None = None
    found_count: int | None = None

    @property
    def feedback(self) -> str:
        """The judge's feedback when there is one, else advice derived from the weakest deterministic criteria."""
        if self.rubric is not None and not self.rubric.failed and self.rubric.feedback:
            return self.rubric.feedback
        advice = list(self._deterministic_weaknesses())
        return "; ".join(advice) if advice else "No specific weakness detected."

    @property
    def weaknesses(self) -> tuple[str, ...]:
        if self.rubric is not None and not self.rubric.failed and self.rubric.weaknesses:
            return self.rubric.weaknesses
        return self._deterministic_weaknesses()[:3]

    def _deterministic_weaknesses(self) -> tuple[str, ...]:
        out = []
        count = self.deterministic.get("count")
        if count is not None and count < 10 and self.expected_count:
            out.append(f"has {self.found_count} items but the task asks for exactly {self.expected_count}")
        ranked = sorted(
            ((v, k) for k, v in self.deterministic.items() if k in _ADVICE and v is not None and v < _WEAK_BELOW)
        )
        out.extend(_ADVICE[k] for _, k in ranked)
        return tuple(out)

    def metrics(self) -> dict[str, float]:
        """Flat numeric metrics for tracking (MLflow): composite, deterministic criteria, rubric dimensions."""
        out: dict[str, float] = {"composite": self.composite, "deterministic": self.deterministic_score}
        for name, value in self.deterministic.items():
            if value is not None:
                out[f"det_{name}"] = float(value)
        if self.rubric is not None:
            if self.rubric.weighted is not None:
                out["rubric"] = self.rubric.weighted
            out["judge_sd"] = self.rubric.judge_sd
            out["rubric_parse_failures"] = float(self.rubric.parse_failures)
            for name, value in self.rubric.dimensions.items():
                out[f"dim_{name}"] = float(value)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "composite": self.composite,
            "deterministic_score": self.deterministic_score,
            "deterministic": dict(self.deterministic),
            "rubric": self.rubric.to_dict() if self.rubric is not None else None,
            "fallback": self.fallback,
            "expected_count": self.expected_count,
            "found_count": self.found_count,
            "feedback": self.feedback,
            "weaknesses": list(self.weaknesses),
        }


def combine(mode: str, rubric: EvalResult | None, deterministic: float, rubric_weight: float) -> tuple[float, str | None]:
    """(composite, fallback reason or None) for one mode."""
    if mode not in MODES:
        raise ValueError(f"evaluator.composite must be one of {', '.join(MODES)}, got {mode!r}")
    if not 0.0 <= rubric_weight <= 1.0:
        raise ValueError(f"evaluator.rubric_weight must be in [0, 1], got {rubric_weight!r}")
    if mode == "deterministic":
        return round(deterministic, 4), None
    if rubric is None or rubric.failed:
        return round(deterministic, 4), f"rubric unparsed; {mode} fell back to deterministic"
    if mode == "rubric":
        return round(float(rubric.weighted), 4), None
    return round(rubric_weight * float(rubric.weighted) + (1.0 - rubric_weight) * deterministic, 4), None


def evaluate(
    task: str,
    output: str,
    llm: Any,
    cfg: EvaluatorConfig,
    *,
    expected_count: int | None = None,
    required_terms: Sequence[str] = (),
    sources: Sequence[Any] = (),
    task_type: str = "research",
    seed: int = 0,
) -> Evaluation:
    """Score one output per cfg.composite. The judge is called only in rubric and blend modes."""
    if cfg.composite not in MODES:
        raise ValueError(f"evaluator.composite must be one of {', '.join(MODES)}, got {cfg.composite!r}")
    det = deterministic_scores(
        output, task=task, expected_count=expected_count, required_terms=required_terms, sources=sources
    )
    det_score = aggregate(det)
    rubric = None
    if cfg.composite != "deterministic":
        if llm is None:
            raise ValueError(f"evaluator.composite={cfg.composite!r} needs an evaluator LLM, got None")
        rubric = score_rubric(task, output, llm, cfg, task_type=task_type, seed=seed, expected_count=expected_count)
    composite, fallback = combine(cfg.composite, rubric, det_score, cfg.rubric_weight)
    return Evaluation(
        rubric=rubric,
        deterministic=det,
        composite=composite,
        mode=cfg.composite,
        deterministic_score=det_score,
        fallback=fallback,
        expected_count=expected_count,
        found_count=count_items(output) if expected_count else None,
    )
