"""Numbers, intervals, p-values, durations, backend identities and a design's power as the summaries, reports and
preflight print them."""

from __future__ import annotations

import math
from typing import Any, Mapping

from experiments.stats import MAX_TASKS, DecisionPower, look_block, mde
from harness.inference import smoke_label

SMOKE_LINE = smoke_label([])  # no model named: the one smoke label, "SMOKE RUN (embedded model): ..."


def num(x: Any, signed: bool = False, fmt: str = ".3f") -> str:
    """A number with `fmt` (a sign in front when signed), "n/a" for None, a non-number or a non-finite value."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "n/a"
    if not math.isfinite(v):
        return "n/a"
    return format(v, ("+" if signed else "") + fmt)


def ci_text(ci: tuple[float, float] | None, signed: bool = False) -> str:
    return f"[{num(ci[0], signed)}, {num(ci[1], signed)}]" if ci else "[CI n/a]"


def pval(p: Any) -> str:
    v = num(p, fmt=".4f")
    return "<0.0001" if v != "n/a" and float(p) < 1e-4 else v


def hms(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def identity_text(identity: Mapping[str, Any]) -> str:
    """'producer backend/model, evaluator backend/model' from a backend identity."""
    def one(role: str) -> str:
        i = identity.get(role) or {}
        return f"{i.get('backend', '?')}/{i.get('model', '?')}"

    roles = [r for r in ("producer", "evaluator") if r in identity]
    return ", ".join(f"{r} {one(r)}" for r in roles) or "?"


def _needed_text(dp: DecisionPower) -> str:
    if dp.needed is None:
        return f"more than {MAX_TASKS} holdout tasks"
    t, h = dp.needed
    if dp.train_filter == "wilcoxon":
        what = f"{t} train + {h} holdout tasks"
    elif dp.train_filter == "none":
        what = f"{h} holdout tasks (the train split only searches)"
    else:
        what = f"{h} holdout tasks (and {t} train tasks for the train mean to stay above the baseline's)"
    if dp.confirm.futility_block:
        what += ", the futility looks at the same fractions of the holdout"
    return what


def _design_text(dp: DecisionPower) -> str:
    conf = dp.confirm
    if dp.train_filter == "wilcoxon" and not conf.futility_block:
        return (f"train filter on {dp.filter.n} tasks and confirmation over {conf.n} holdout tasks at level "
                f"{conf.alpha:.4g} together")
    c, b = dp.holdout_runs
    what = (f"confirmation over {conf.n} holdout tasks ({c} candidate + {b} baseline run(s) per task) at level "
            f"{conf.alpha:.4g}")
    if conf.futility_block:
        what += f" with a futility stop every {look_block(conf.n, conf.futility_block)} holdout tasks"
    if dp.train_filter == "positive":
        raced = (f" (raced against the baseline every {look_block(dp.filter.n, dp.filter.race_block)} train tasks)"
                 if getattr(dp.filter, "race_block", 0) else "")
        return f"{what}, after a train mean above the baseline's on {dp.filter.n} train tasks{raced}"
    if dp.train_filter == "none":
        return f"{what}, no train filter"
    return f"{what}, after the train filter on {dp.filter.n} tasks"


def decision_power_line(dp: DecisionPower, *, tau_source: str, sigma_source: str) -> str:
    """The summary's and preflight's line: what this design could have confirmed."""
    need, design = _needed_text(dp), _design_text(dp)
    if dp.no_noise:
        what = ("confirms any mean effect above 0" if math.isfinite(dp.mde)
                else "cannot confirm any effect: its tasks cannot reach the levels")
        return (f"design power: zero noise measured (run noise sigma 0 from {sigma_source}, task x variant spread "
                f"tau 0 from {tau_source}): with no spread this design {what} ({design}), a figure that holds only "
                f"if the noise truly is 0, so it says nothing of the effect real noise would hide; with no noise an "
                f"effect needs {need}")
    size = f"{dp.mde:.3f}" if math.isfinite(dp.mde) else "no effect size"
    return (f"design power: this design confirms a mean effect of {size} composite points with probability "
            f"{dp.power:g} ({design}; task x variant spread tau {dp.confirm.tau:.3f} from "
            f"{tau_source}, run noise sigma {dp.sigma:.3f} from {sigma_source}); an effect of {dp.target_effect:g} "
            f"needs {need}")


def spread_effect_line(design: Any, unit: str, what: str, *, power: float, sims: int) -> str:
    """The detectable effect of `design` when the effect varies across tasks as the calibration's positive control
    did (design.effect_cv: that spread as a share of its mean)."""
    m = mde(design, power=power, sims=sims)
    size = f"{num(m)}{' ' + unit if unit else ''}" if math.isfinite(m) else f"none at any size on {design.n} {what}"
    return (f"detectable effect if it varies across tasks as the calibration's positive control did "
            f"({design.effect_cv:.2f}x its mean): {size}")
