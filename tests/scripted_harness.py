"""A scripted harness for experiment tests: no LLM, scores depend on the instruction text plus seeded noise."""

from __future__ import annotations

import hashlib
import random

from experiments.runs import TaskOutcome, Usage
from mutators.base import Candidate as MCandidate
from mutators.base import instruction_hash

BASE = {
    "enumerated": "List exactly the requested number of items. Give each item a heading and a short explanation.",
    "research": "Summarise the findings from the sources. Attribute each claim to its source.",
}
BOOST = "concrete tool"


class ScriptedRunner:
    """Score = task difficulty + 1.5 when the instruction mentions a concrete tool + seeded noise (sd 0.3).

    Noise depends on (instruction, task, seed): every candidate draws its own. "CRASH" in an instruction makes
    the run fail. Counts prepare/finish calls and records run ids. finish returns the real TaskOutcome; the
    wiggum loop's selection score is the independent score plus `selection_bias` (a judge that flatters the
    round it picked), so the two can be told apart.
    """

    def __init__(self, tasks, noise: float = 0.3, effect: float = 1.5, *, model: str = "scripted-1",
                 selection_bias: float = 0.4) -> None:
        self.types = {t.task: t.task_type for t in tasks}
        self.noise, self.effect, self.model, self.bias = noise, effect, model, selection_bias
        self.prepares, self.run_ids, self.calls = 0, [], 0

    def identity(self):
        return {role: {"backend": "scripted", "model": self.model} for role in ("planner", "producer", "evaluator")}

    def prepare(self, task):
        self.prepares += 1
        self.calls += 2
        return {"task": task, "task_type": self.types[task]}

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0) -> TaskOutcome:
        self.calls += 3
        self.run_ids.append(run_id)
        instr = instructions[prepared["task_type"]]
        usage = Usage(prompt_tokens=30, completion_tokens=20, latency_s=0.1, llm_calls=3, cached_calls=1)
        if "CRASH" in instr:
            return TaskOutcome.failed("scripted crash", usage=usage)
        digest = hashlib.sha256(f"{instr}|{prepared['task']}|{seed}".encode()).hexdigest()
        rng = random.Random(int(digest[:12], 16))
        difficulty = int(hashlib.sha256(prepared["task"].encode()).hexdigest()[:4], 16) % 20 / 10
        score = 5.0 + difficulty + (self.effect if BOOST in instr.lower() else 0.0) + rng.gauss(0, self.noise)
        return TaskOutcome(
            status="ok", score=score, selection_score=score + self.bias, dimensions={"depth": score},
            judge_sd=0.2, feedback="specificity was weak: name tools", weaknesses=("specificity",), usage=usage,
            output_text=f"# output\n{instr[:30]}", rescored=True,
        )

    judge_noise = 0.1  # sd of a re-score of one fixed text (rescore)

    def rescore(self, prepared, output_text, *, criteria=None, seed=0, run_seed=None) -> TaskOutcome:
        """The evaluator alone on a fixed text: task difficulty + a text-dependent offset + judge noise (sd
        judge_noise) drawn from (text, task, seed). One judge call."""
        self.calls += 1
        digest = hashlib.sha256(f"judge|{output_text}|{prepared['task']}|{seed}".encode()).hexdigest()
        noise = random.Random(int(digest[:12], 16)).gauss(0, self.judge_noise)
        difficulty = int(hashlib.sha256(prepared["task"].encode()).hexdigest()[:4], 16) % 20 / 10
        offset = int(hashlib.sha256(output_text.encode()).hexdigest()[:4], 16) % 10 / 10
        score = 5.0 + difficulty + offset + noise
        usage = Usage(prompt_tokens=20, completion_tokens=10, latency_s=0.01, llm_calls=1, cached_calls=0)
        return TaskOutcome(status="ok", score=score, dimensions={"depth": score}, judge_sd=0.0, usage=usage,
                           output_text=output_text, rescored=True)

    def llm_calls(self) -> int:
        return self.calls


EDITS = {
    "add_tool": " Name a concrete tool for every point.",
    "noise": " Keep the tone neutral (variant {seed}).",
    "crash": " CRASH (variant {seed}).",
}


def scripted_propose(name, ctx, llm, *, seen=frozenset()):
    """mutators.propose's contract without a model: a new instruction whose hash is not in `seen` (nor the
    parent's); when the asked-for edit would repeat one, a 'noise' variant with a shifted seed stands in and the
    returned operator names it (the one used). "typeerror" raises a programming error, as a buggy operator would."""
    if name == "typeerror":
        raise TypeError("scripted operator bug")
    blocked = set(seen) | {ctx.base_hash}
    text = ctx.base + EDITS[name].format(seed=ctx.seed)
    if instruction_hash(text) not in blocked:
        return MCandidate.make(text, name, (ctx.base_hash,), name)
    for k in range(1, 50):
        text = ctx.base + EDITS["noise"].format(seed=ctx.seed + k)
        if instruction_hash(text) not in blocked:
            return MCandidate.make(text, "noise", (ctx.base_hash,), f"{name} rejected: duplicate; fell back to noise")
    raise AssertionError("scripted_propose ran out of variants")
