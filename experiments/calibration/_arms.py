"""The calibration's extra arms: the A/A' rewrite of the baseline instruction, the greedy decoding, and the
side-by-side (pairwise) judging of the A/A and the positive control."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Mapping, Sequence

from experiments.config import ExperimentConfig, Task
from experiments.runs import RunPool

from ._decompose import pairwise_g

UNREAD_CHARS = 200  # of one unreadable side-by-side judge reply, kept and printed (why the judge failed)


# The A/A' arm's default: a rewrite, written by hand, of each harness.synthesis.DEFAULT_INSTRUCTIONS text: the same
# requirements in other words and another order. A baseline that is not the default text gets rewrite_rule.
REWRITES = {
    "enumerated": (
        "Answer with exactly as many numbered items as the task requests (not one more or fewer), formatted in "
        "Markdown, and use a single numbered list only. Begin with at most one introductory sentence. Each item "
        "starts with a bold title and then 2-3 concrete sentences that name the exact tool, function, setting or "
        "number and explain why it matters. Keep the items from overlapping."
    ),
    "best_practices": (
        "Address a practitioner who will put this into practice today: give best-practice guidance on the technical "
        "topic, in Markdown. Concrete commands and settings beat general advice. For every practice, show how to "
        "implement it at code level (function names, parameters, and a short snippet where useful), name the tools "
        "and libraries to use (with versions when they matter), and list the pitfalls to stay clear of."
    ),
    "research": (
        "Produce a Markdown research synthesis: prose under a few headings. Rather than going through the sources "
        "one at a time, weave them into a single coherent account, noting where they agree and where they differ. "
        "Mark citations as [n] to match the numbered research context, separate what is settled from what is still "
        "open, and close with the practical implications."
    ),
}


def rewrite_rule(text: str) -> str:
    """A deterministic meaning-preserving paraphrase of an instruction: its first sentence moved to the end (a list
    of requirements read in another order); one sentence gets "Instruction: " in front."""
    import re

    parts = [p for p in re.split(r"(?<=[.!?])\s+", text.strip()) if p]
    if len(parts) < 2:
        return f"Instruction: {text.strip()}"
    return " ".join(parts[1:] + parts[:1])


def rewrite_of(task_type: str, baseline: str, configured: str = "") -> tuple[str, str]:
    """(the A/A' text for a task type, where it came from: config | written | rule)."""
    from harness.synthesis import DEFAULT_INSTRUCTIONS

    if configured.strip():
        return configured.strip(), "config"
    if task_type in REWRITES and baseline.strip() == DEFAULT_INSTRUCTIONS.get(task_type, "").strip():
        return REWRITES[task_type], "written"
    return rewrite_rule(baseline), "rule"


def runner_at(runner: Any, decoding: str) -> Any:
    """The runner for a decoding: sampled = the runner as configured; greedy = producer temperature 0 (the
    runner's at_temperature(0.0) when it has one, else a HarnessRunner sibling with synth.temperature 0 sharing
    its roles, memory and search). TypeError (one line) when the runner can do neither."""
    if decoding == "sampled":
        return runner
    if callable(getattr(runner, "at_temperature", None)):
        return runner.at_temperature(0.0)
    cfg, parts = getattr(runner, "cfg", None), getattr(runner, "parts", None)
    if cfg is None or parts is None:
        raise TypeError(f"calibrate.decodings has greedy but the runner {type(runner).__name__} has no "
                        f"at_temperature(t) and is no HarnessRunner; nothing was run")
    return type(runner)(dataclasses.replace(cfg, synth=dataclasses.replace(cfg.synth, temperature=0.0)), parts=parts)


def pairwise_arm(exp: ExperimentConfig, runner: Any, tasks: Sequence[Task], contexts: Mapping[str, Any],
                 gens: Sequence[Any], controls: Sequence[Any], pool: RunPool, *, seed0: int) -> dict[str, Any]:
    """calibrate.pairwise: the A/A (generator run 2's answer against run 1's) and the positive control (control
    run 1 against generator run 1) judged side by side in both orders (evaluators.pairwise.compare_pair, the
    evaluator role at the evaluator's temperature), against the pointwise differences of the same pairs: the
    position bias, the A/A's and the control's mean preference, and g (pairwise_g). The runner's own
    compare_pair(prepared, candidate, baseline, *, seed) is used where it has one (test doubles).

    A pair whose reply could not be read in either order is missing (never a tie): "judge_failures" counts the
    unreadable replies, "unreadable_reply" keeps the first as written, and "not_measured" says why g is not (an arm
    with no pair judged in both orders; "" when g was measured)."""
    from evaluators import compare_pair, parse_preference, position_bias
    from harness.synthesis import expected_count

    text = lambda ev: {s.task_id: (s.output_text, s.score) for s in ev.scores}  # noqa: E731
    g0, g1, ctl = text(gens[0]), text(gens[1]), text(controls[0])
    ids = [t.id for t in tasks if t.id in g0 and t.id in g1 and t.id in ctl]
    by_id = {t.id: t for t in tasks}
    own = getattr(runner, "compare_pair", None)

    def judge(job: tuple[str, str, str, int]) -> Any:
        tid, cand, base, seed = job
        if callable(own):
            return own(contexts[tid], cand, base, seed=seed)
        prepared, ev = contexts[tid], exp.evaluator
        crit = by_id[tid].criteria()
        return compare_pair(prepared.clean_task, cand, base, runner.roles.evaluator, seed=seed,
                            temperature=ev.temperature, judge_retries=ev.judge_retries,
                            expected_count=crit.get("expected_count", expected_count(prepared.clean_task, prepared.plan)))

    jobs = [(t, g1[t][0], g0[t][0], seed0 + 97 + i) for i, t in enumerate(ids)]
    jobs += [(t, ctl[t][0], g0[t][0], seed0 + 197 + i) for i, t in enumerate(ids)]
    with pool.ordered(judge, jobs) as done:
        results = [fut.result() for _, fut in done]
    aa_res, ctl_res = results[:len(ids)], results[len(ids):]
    pw_aa = [r.preference for r in aa_res if r.preference is not None]
    pw_ctl = [r.preference for r in ctl_res if r.preference is not None]
    pt_aa = [g1[t][1] - g0[t][1] for t in ids]
    pt_ctl = [ctl[t][1] - g0[t][1] for t in ids]
    bias = position_bias(results)
    # a reply that could not be read, as the judge wrote it: what the summary shows of why the judge failed
    unread = next((raw for r in results if r.judge_failures for raw in r.raw if parse_preference(raw)[0] is None), "")
    failures, calls = sum(r.judge_failures for r in results), sum(r.calls for r in results)
    # g needs a readable pair of each: an arm with none is a failed measurement (the judge's), never a g of n/a
    not_measured = (f"the side-by-side judge's replies were unreadable in {failures} of {calls}: {len(pw_aa)} of "
                    f"{len(ids)} A/A pairs and {len(pw_ctl)} of {len(ids)} positive-control pairs judged in both "
                    f"orders" if ids and not (pw_aa and pw_ctl) else "")
    return {"n": len(ids), "aa_preferences": [r.preference for r in aa_res],
            "control_preferences": [r.preference for r in ctl_res], "point_aa": pt_aa, "point_control": pt_ctl,
            "aa_mean": statistics.fmean(pw_aa) if pw_aa else None,
            "control_mean": statistics.fmean(pw_ctl) if pw_ctl else None,
            "first_wins": bias.first_wins, "decided": bias.decided, "position_bias": bias.rate,
            "judge_failures": failures, "unreadable_reply": unread[:UNREAD_CHARS], "not_measured": not_measured,
            "g": pairwise_g(pt_aa, pt_ctl, pw_aa, pw_ctl), "calls": calls}
