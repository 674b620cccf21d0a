"""The text the experiments' summaries, reports and preflight print: numbers, intervals, p-values, durations,
backend identities, the smoke label and a design's power line (the statistics themselves are experiments.stats)."""

from __future__ import annotations

from ._text import SMOKE_LINE, ci_text, decision_power_line, hms, identity_text, num, pval, spread_effect_line

__all__ = ["SMOKE_LINE", "ci_text", "decision_power_line", "hms", "identity_text", "num", "pval", "spread_effect_line"]
