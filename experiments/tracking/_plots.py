"""PNG plots (matplotlib Agg canvas, no global backend switch). A sweep: optimization history, which mutation
operator paid, a per-task score heatmap of the trials, quality against cost with its Pareto front. A calibration: scores, differences, power curves.

The data behind each plot comes from Optuna FrozenTrials (state, value, user attrs) through pure functions
(`history_points`, `operator_stats`, `score_matrix`) that the tests check directly; the plot functions only draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from experiments.config import BASELINE
from experiments.stats import bootstrap_ci, pareto_front

from ._trials import quality_cost_points, trial_operator as _operator, trial_value as _value

HISTORY_PNG = "optimization_history.png"
OPERATORS_PNG = "operator_importance.png"
HEATMAP_PNG = "task_heatmap.png"
QUALITY_COST_PNG = "quality_cost.png"
OUTCOMES = ("improved", "not improved", "pruned", "failed", "duplicate")
OUTCOME_COLORS = {"improved": "#2b7bba", "not improved": "#9ecae1", "pruned": "#e08a00", "failed": "#d1495b",
                  "duplicate": "#b0b0b0"}


# -- data --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryPoint:
    number: int
    operator: str
    state: str  # COMPLETE | PRUNED | FAIL
    value: float | None  # partial mean for PRUNED, None for FAIL
    duplicate: bool
    best_so_far: float | None  # best COMPLETE value up to and including this trial


def history_points(trials: Sequence[Any]) -> list[HistoryPoint]:
    """Finished trials in number order with the running best of COMPLETE values."""
    out, best = [], None
    for t in sorted(trials, key=lambda t: t.number):
        if t.state.name not in ("COMPLETE", "PRUNED", "FAIL"):
            continue
        v = _value(t)
        if t.state.name == "COMPLETE" and v is not None and (best is None or v > best):
            best = v
        out.append(HistoryPoint(t.number, _operator(t), t.state.name, v, t.user_attrs.get("duplicate_of") is not None,
                                best))
    return out


@dataclass(frozen=True)
class OperatorStat:
    """What one mutation operator did over the sweep.

    gains: COMPLETE, non-duplicate trials' value minus the value of the parent they mutated (the best candidate
    at the time, found by its instruction hash). mean_gain and its bootstrap CI summarise them.
    """

    operator: str
    trials: int
    outcomes: dict[str, int]
    gains: tuple[float, ...]
    mean_value: float | None
    mean_gain: float | None
    gain_ci: tuple[float, float] | None


def operator_stats(trials: Sequence[Any]) -> dict[str, OperatorStat]:
    """Per-operator outcome counts and gain over the parent candidate (the baseline trial is left out)."""
    by_hash: dict[str, float] = {}
    for t in sorted(trials, key=lambda t: t.number):
        h = t.user_attrs.get("instruction_hash")
        if t.state.name == "COMPLETE" and t.value is not None and h and h not in by_hash:
            by_hash[h] = float(t.value)
    groups: dict[str, list[Any]] = {}
    for t in trials:
        if t.state.name in ("COMPLETE", "PRUNED", "FAIL") and _operator(t) != BASELINE:
            groups.setdefault(_operator(t), []).append(t)
    stats = {}
    for op, ts in sorted(groups.items()):
        outcomes = dict.fromkeys(OUTCOMES, 0)
        gains, values = [], []
        for t in ts:
            dup = t.user_attrs.get("duplicate_of") is not None
            parent = by_hash.get(t.user_attrs.get("parent_hash") or "")
            if t.state.name == "FAIL":
                outcomes["failed"] += 1
            elif t.state.name == "PRUNED":
                outcomes["pruned"] += 1
            elif dup:
                outcomes["duplicate"] += 1
            else:
                values.append(float(t.value))
                gain = float(t.value) - parent if parent is not None else None
                if gain is not None:
                    gains.append(gain)
                outcomes["improved" if gain is not None and gain > 0 else "not improved"] += 1
        mean_gain = sum(gains) / len(gains) if gains else None
        ci = None
        if len(gains) >= 2:
            b = bootstrap_ci(gains, method="percentile", n_resamples=2000, seed=0)
            ci = (b.low, b.high) if math.isfinite(b.low) else None
        stats[op] = OperatorStat(op, len(ts), outcomes, tuple(gains), sum(values) / len(values) if values else None,
                                 mean_gain, ci)
    return stats


@dataclass(frozen=True)
class ScoreMatrix:
    rows: tuple[str, ...]  # "#3 add_tool"
    numbers: tuple[int, ...]
    train_tasks: tuple[str, ...]
    holdout_tasks: tuple[str, ...]
    values: np.ndarray  # len(rows) x (len(train_tasks) + len(holdout_tasks)), NaN where not evaluated

    @property
    def columns(self) -> tuple[str, ...]:
        return self.train_tasks + self.holdout_tasks


def score_matrix(trials: Sequence[Any], train_tasks: Sequence[str], holdout_tasks: Sequence[str] = (),
                 holdout: Mapping[str, Mapping[str, float]] | None = None) -> ScoreMatrix:
    """Trials x tasks: train scores from each trial's task_scores (partial for pruned trials), holdout scores
    from the study's holdout map (instruction hash -> task -> score). Trials with no scores at all (failed,
    duplicates) are left out."""
    holdout = holdout or {}
    cols = list(train_tasks) + list(holdout_tasks)
    rows, numbers, data = [], [], []
    for t in sorted(trials, key=lambda t: t.number):
        scores = dict(t.user_attrs.get("task_scores") or {})
        if t.user_attrs.get("duplicate_of") is None:
            scores_h = holdout.get(t.user_attrs.get("instruction_hash") or "", {})
        else:
            scores_h = {}
        if not scores and not scores_h:
            continue
        row = [scores.get(c, math.nan) for c in train_tasks] + [scores_h.get(c, math.nan) for c in holdout_tasks]
        label = f"#{t.number} {_operator(t)}" + (" (pruned)" if t.state.name == "PRUNED" else "")
        rows.append(label)
        numbers.append(t.number)
        data.append(row)
    values = np.array(data, dtype=float).reshape(len(rows), len(cols))
    return ScoreMatrix(tuple(rows), tuple(numbers), tuple(train_tasks), tuple(holdout_tasks), values)


# -- drawing -----------------------------------------------------------------------------------------


def _colors(names: Sequence[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    ops = sorted(n for n in set(names) if n != BASELINE)  # same colour per operator in every plot of a sweep
    return {BASELINE: "black", **{n: cmap(i % 10) for i, n in enumerate(ops)}}


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def plot_history(trials: Sequence[Any], path: Path, *, baseline: float | None = None, floor: float | None = None,
                 title: str = "") -> Path:
    """Value per trial (colour = operator; hollow = duplicate, triangle = pruned at its partial mean, x = failed),
    the best-so-far step line, the baseline mean and the noise-floor band above it."""
    pts = history_points(trials)
    colors = _colors([p.operator for p in pts])
    fig = _figure(max(7.0, 0.25 * len(pts) + 5), 4.4)
    ax = fig.add_subplot()
    if baseline is not None:
        ax.axhline(baseline, color="black", lw=1, ls=":", label=f"baseline mean {baseline:.2f}")
        if floor:
            ax.axhspan(baseline, baseline + floor, color="#cccccc", alpha=0.4, lw=0,
                       label=f"noise floor (+{floor:.2f})")
    valued = [p.value for p in pts if p.value is not None]
    y_fail = (min(valued) - 0.05 * (max(valued) - min(valued) + 1)) if valued else 0.0
    for p in pts:
        c = colors[p.operator]
        if p.state == "FAIL":
            ax.scatter([p.number], [y_fail], marker="x", color=c, s=40)
        elif p.state == "PRUNED":
            ax.scatter([p.number], [p.value], marker="v", facecolors="none", edgecolors=c, s=45)
        else:
            ax.scatter([p.number], [p.value], marker="o", s=40, facecolors="none" if p.duplicate else c, edgecolors=c)
    steps = [(p.number, p.best_so_far) for p in pts if p.best_so_far is not None]
    if steps:
        ax.step([s[0] for s in steps], [s[1] for s in steps], where="post", color="#2b7bba", lw=1.5,
                label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel("mean composite over train tasks")
    ax.set_title(f"Optimization history{': ' + title if title else ''}  "
                 "(o complete, hollow duplicate, v pruned, x failed)", fontsize=9)
    return _save_with_operator_key(fig, ax, pts, colors, path)


def _save_with_operator_key(fig: Figure, ax: Any, pts: Sequence[Any], colors: dict[str, Any], path: Path) -> Path:
    """A key entry per operator (baseline first), grid, legend when anything is drawn; laid out and saved."""
    for op in sorted({p.operator for p in pts}, key=lambda o: (o != BASELINE, o)):
        ax.scatter([], [], marker="o", color=colors[op], s=40, label=op)
    ax.grid(alpha=0.3)
    if pts:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    return path


def plot_operators(trials: Sequence[Any], path: Path, *, title: str = "") -> Path:
    """Left: gain over the parent per trial (dots) and its mean with a 95% bootstrap CI, per operator.
    Right: what each operator's trials came to (improved / not improved / pruned / failed / duplicate)."""
    stats = operator_stats(trials)
    ops = list(stats)
    colors = _colors(ops)
    fig = _figure(max(8.0, 1.3 * len(ops) + 6), 4.4)
    ax, bx = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    ax.axhline(0, color="black", lw=1)
    rng = np.random.default_rng(0)
    for i, op in enumerate(ops):
        s = stats[op]
        if s.gains:
            x = i + rng.uniform(-0.12, 0.12, len(s.gains))
            ax.scatter(x, s.gains, color=colors[op], alpha=0.5, s=22)
        if s.mean_gain is not None:
            lo, hi = s.gain_ci if s.gain_ci else (s.mean_gain, s.mean_gain)
            ax.errorbar([i + 0.3], [s.mean_gain], yerr=[[s.mean_gain - lo], [hi - s.mean_gain]], fmt="D",
                        color=colors[op], capsize=4, ms=6)
            ax.annotate(f"{s.mean_gain:+.2f}", (i + 0.38, s.mean_gain), fontsize=7, va="center")
    ax.set_xticks(range(len(ops)), [f"{op}\n(n={stats[op].trials})" for op in ops], fontsize=8)
    ax.set_ylabel("value - parent value (complete trials)")
    ax.set_title("Gain over the parent: dots per trial, mean with 95% CI", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    bottom = np.zeros(len(ops))
    for outcome in OUTCOMES:
        counts = np.array([stats[op].outcomes[outcome] for op in ops], dtype=float)
        if counts.any():
            bx.bar(range(len(ops)), counts, bottom=bottom, color=OUTCOME_COLORS[outcome], label=outcome)
            bottom += counts
    bx.set_xticks(range(len(ops)), ops, fontsize=8)
    bx.set_ylabel("trials")
    bx.set_title("Outcomes per operator", fontsize=9)
    if ops:
        bx.legend(fontsize=7)
    fig.suptitle(f"Which mutation operator paid{': ' + title if title else ''}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    return path


def plot_task_heatmap(matrix: ScoreMatrix, path: Path, *, title: str = "", highlight: Sequence[int] = ()) -> Path:
    """Trials (rows) x tasks (columns, train then holdout) coloured by score; grey = not evaluated."""
    n_rows, n_cols = matrix.values.shape
    fig = _figure(max(6.0, 0.55 * n_cols + 3.5), max(3.0, 0.32 * n_rows + 1.8))
    ax = fig.add_subplot()
    if n_rows and n_cols:
        masked = np.ma.masked_invalid(matrix.values)
        from matplotlib import colormaps

        cmap = colormaps["viridis"].with_extremes(bad="#e6e6e6")
        im = ax.imshow(masked, aspect="auto", cmap=cmap, interpolation="nearest")
        fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, label="composite score")
        if n_rows * n_cols <= 600:
            finite = matrix.values[np.isfinite(matrix.values)]
            mid = float(finite.mean()) if finite.size else 0.0
            for r in range(n_rows):
                for c in range(n_cols):
                    v = matrix.values[r, c]
                    if math.isfinite(v):
                        ax.text(c, r, f"{v:.1f}", ha="center", va="center", fontsize=6,
                                color="white" if v < mid else "black")
        if matrix.holdout_tasks and matrix.train_tasks:
            ax.axvline(len(matrix.train_tasks) - 0.5, color="white", lw=3)
        ax.set_xticks(range(n_cols), matrix.columns, rotation=60, ha="right", fontsize=7)
        labels = [f"{r} *" if n in highlight else r for r, n in zip(matrix.rows, matrix.numbers)]
        ax.set_yticks(range(n_rows), labels, fontsize=7)
    else:
        ax.text(0.5, 0.5, "no task scores yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    split = f"train ({len(matrix.train_tasks)})" + (f" | holdout ({len(matrix.holdout_tasks)})"
                                                     if matrix.holdout_tasks else "")
    ax.set_title(f"Per-task scores{': ' + title if title else ''}  [{split}; * best/promoted]", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    return path


def plot_quality_cost(trials: Sequence[Any], path: Path, *, metric: str = "completion_tokens",
                      promoted: int | None = None, title: str = "") -> Path:
    """Quality (trial value) against cost (mean `metric` per task) of every evaluated candidate (colour =
    operator, triangle = pruned at its partial mean); the Pareto front of the complete trials (higher quality,
    lower cost) ringed and joined; the baseline and the promoted candidate labelled."""
    pts = quality_cost_points(trials, metric)
    done = [p for p in pts if not p.pruned]  # a pruned trial's mean is over fewer tasks: drawn, not on the front
    front = [done[i] for i in pareto_front([(p.value, p.cost) for p in done])]
    colors = _colors([p.operator for p in pts])
    fig = _figure(7.5, 4.8)
    ax = fig.add_subplot()
    if front:
        ax.plot([p.cost for p in front], [p.value for p in front], color="#2b7bba", lw=1.2, ls="--", zorder=1,
                label="Pareto front (higher quality, lower cost)")
        ax.scatter([p.cost for p in front], [p.value for p in front], s=150, facecolors="none",
                   edgecolors="#2b7bba", lw=1.5, zorder=2)
    for p in pts:
        c = colors[p.operator]
        ax.scatter([p.cost], [p.value], marker="v" if p.pruned else "o", s=40, zorder=3, edgecolors=c,
                   facecolors="none" if p.pruned else c)
        label = "baseline" if p.operator == BASELINE else f"promoted #{p.number}" if p.number == promoted else None
        if label:
            ax.annotate(label, (p.cost, p.value), textcoords="offset points", xytext=(8, 6), fontsize=8,
                        weight="bold")
    if not pts:
        ax.text(0.5, 0.5, f"no candidate with a recorded {metric} yet", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel(f"cost: mean {metric} per task")
    ax.set_ylabel("quality: mean composite over train tasks")
    ax.set_title(f"Quality vs cost{': ' + title if title else ''}  (o complete, v pruned; ringed: Pareto front)",
                 fontsize=9)
    return _save_with_operator_key(fig, ax, pts, colors, path)


def sweep_plots(
    trials: Sequence[Any],
    out_dir: Path,
    *,
    train_tasks: Sequence[str],
    holdout_tasks: Sequence[str] = (),
    holdout: Mapping[str, Mapping[str, float]] | None = None,
    baseline: float | None = None,
    floor: float | None = None,
    highlight: Sequence[int] = (),
    title: str = "",
    promoted: int | None = None,
    cost_metric: str = "completion_tokens",
) -> dict[str, Path]:
    """The sweep plots under out_dir; returns name -> path. The quality-vs-cost plot comes when a trial recorded
    its cost (task_costs; a study that records no costs has none)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    matrix = score_matrix(trials, train_tasks, holdout_tasks, holdout)
    plots = {
        "history": plot_history(trials, out_dir / HISTORY_PNG, baseline=baseline, floor=floor, title=title),
        "operators": plot_operators(trials, out_dir / OPERATORS_PNG, title=title),
        "heatmap": plot_task_heatmap(matrix, out_dir / HEATMAP_PNG, title=title, highlight=highlight),
    }
    if any(t.user_attrs.get("task_costs") for t in trials):
        plots["quality_cost"] = plot_quality_cost(trials, out_dir / QUALITY_COST_PNG, metric=cost_metric,
                                                  promoted=promoted, title=title)
    return plots


# -- a calibration ---------------------------------------------------------------------------------------------


def calibration_plots(cal: Any, folder: Path) -> dict[str, Path]:
    """A calibration's (experiments.storage.Calibration) scores.png (per task: generator runs, control runs, judge re-scores), differences.png (A/A and control
    per-task differences), power.png (detection rate against effect for the sweep and A/B designs)."""
    from experiments.stats import Design, detection_rate

    folder.mkdir(parents=True, exist_ok=True)
    ids = list(cal.tasks)
    x = np.arange(len(ids))
    paths: dict[str, Path] = {}

    fig = Figure(figsize=(max(6, 0.9 * len(ids) + 3), 4))
    ax = fig.add_subplot(111)
    for j, run in enumerate(cal.runs["generator"]):
        ax.scatter(x - 0.15, [run[t] for t in ids], color="#2b7bba", label="generator runs" if j == 0 else None)
    for j, run in enumerate(cal.runs["control"]):
        ax.scatter(x + 0.15, [run[t] for t in ids], color="#d1495b", marker="x",
                   label="positive control" if j == 0 else None)
    for i, t in enumerate(ids):
        vals = cal.runs["judge"].get(t, [])
        ax.scatter([i] * len(vals), vals, color="#808080", s=12, label="judge re-scores" if i == 0 else None)
    ax.set_xticks(x, ids, rotation=30, ha="right")
    ax.set_ylabel("composite")
    ax.set_title(f"calibration {cal.key}: scores per task")
    ax.legend(fontsize=8)
    fig.tight_layout()
    FigureCanvasAgg(fig).print_png(str(folder / "scores.png"))
    paths["scores"] = folder / "scores.png"

    fig = Figure(figsize=(8, 3.5))
    for i, (key, title) in enumerate((("aa_diffs", f"A/A (p={cal.aa.p:.3g}, {cal.aa.status})"),
                                      ("control_diffs", f"positive control (p={cal.control.p:.3g}, "
                                                        f"{cal.control.status})"))):
        ax = fig.add_subplot(1, 2, i + 1)
        ax.bar(x, cal.runs[key], color="#9ecae1" if i == 0 else "#d1495b")
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(x, ids, rotation=30, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("per-task difference")
    fig.tight_layout()
    FigureCanvasAgg(fig).print_png(str(folder / "differences.png"))
    paths["differences"] = folder / "differences.png"

    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot(111)
    power = cal.design["power"]
    for name, m in cal.mde.items():
        design = Design(name, m["n"], m["sd_diff"], cal.design["alpha"], m["alternative"], m["test"],
                        2.0 if m.get("floor") else 0.0, effect_cv=float(m.get("effect_cv") or 0.0))
        top = (m["mde"] if math.isfinite(m["mde"]) else 3 * m["sd_diff"]) * 2
        effects = np.linspace(0, max(top, cal.design["target_effect"] * 1.2), 25)
        ax.plot(effects, [detection_rate(design, e, sims=1000) for e in effects], label=f"{name} (n={m['n']})")
        if math.isfinite(m["mde"]):
            ax.axvline(m["mde"], ls=":", color="gray")
    ax.axhline(power, ls="--", color="black", lw=0.8)
    ax.axvline(cal.design["target_effect"], ls="--", color="#d1495b", lw=0.8, label="target effect")
    ax.set_xlabel("true effect (composite points)")
    ax.set_ylabel("detection rate")
    ax.set_title("power of the sweep and A/B designs")
    ax.legend(fontsize=8)
    fig.tight_layout()
    FigureCanvasAgg(fig).print_png(str(folder / "power.png"))
    paths["power"] = folder / "power.png"
    return paths
