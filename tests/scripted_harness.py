"""A scripted harness for experiment tests: no LLM, scores depend on the instruction text plus seeded noise."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from experiments.objective import candidate_hash

BASE = {
    "enumerated": "List exactly the requested number of items. Give each item a heading and a short explanation.",
    "research": "Summarise the findings from the sources. Attribute each claim to its source.",
}
BOOST = "concrete tool"


@dataclass(frozen=True)
class Rubric:
    dimensions: dict
    feedback: str = "specificity was weak: name tools"
    weaknesses: tuple = ("specificity",)
    judge_sd: float = 0.2


@dataclass(frozen=True)
class Evaluation:
    composite: float
    rubric: Rubric
    deterministic: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    status: str
    output_text: str = ""
    output_path: str | None = None
    evaluation: Evaluation | None = None
    record: dict = field(default_factory=dict)
    error: str | None = None
    smoke: bool = False


class ScriptedRunner:
    """Score = task difficulty + 1.5 when the instruction mentions a concrete tool + seeded noise (sd 0.3).

    Noise depends on (instruction, task, seed): every candidate draws its own. "CRASH" in an instruction makes
    the run fail. Counts prepare/finish calls and records run ids.
    """

    def __init__(self, tasks, noise: float = 0.3, effect: float = 1.5) -> None:
        self.types = {t.task: t.task_type for t in tasks}
        self.noise, self.effect = noise, effect
        self.prepares, self.run_ids, self.calls = 0, [], 0

    def prepare(self, task):
        self.prepares += 1
        self.calls += 2
        return {"task": task, "task_type": self.types[task]}

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0):
        self.calls += 3
        self.run_ids.append(run_id)
        instr = instructions[prepared["task_type"]]
        if "CRASH" in instr:
            return Result(status="failed", error="scripted crash")
        digest = hashlib.sha256(f"{instr}|{prepared['task']}|{seed}".encode()).hexdigest()
        rng = random.Random(int(digest[:12], 16))
        difficulty = int(hashlib.sha256(prepared["task"].encode()).hexdigest()[:4], 16) % 20 / 10
        score = 5.0 + difficulty + (self.effect if BOOST in instr.lower() else 0.0) + rng.gauss(0, self.noise)
        usage = {"producer": {"calls": 3, "cached": 1, "prompt_tokens": 30, "completion_tokens": 20, "latency_s": 0.1}}
        return Result("ok", f"# output\n{instr[:30]}", None, Evaluation(score, Rubric({"depth": score})), {"llm": usage})

    def llm_calls(self) -> int:
        return self.calls


class Candidate:
    def __init__(self, text, operator):
        self.text, self.operator, self.parents, self.note = text, operator, (), operator
        self.hash = candidate_hash({"x": text})


def scripted_propose(name, ctx, llm, *, seen=frozenset()):
    edits = {
        "add_tool": " Name a concrete tool for every point.",
        "noise": f" Keep the tone neutral (variant {ctx.seed}).",
        "crash": " CRASH",
    }
    return Candidate(ctx.base + edits[name], name)
