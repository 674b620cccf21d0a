"""A simulated world whose truth is known, for judging a search by what it returns.

Each task type has helpful properties: library constraints (mutators.library) that, present in that type's
instruction, raise the judge's score on that type's tasks. Two sizes of gain (big and half), a per-task gain that
varies across tasks (sd = SPREAD x the property's mean gain, so an edit helps some tasks far more than others and
hurts a few), one harmful property per type, and a small per-task spread for any text change (a neutral rewrite
suits some tasks a little better than others). The judge adds run noise (sd SIGMA per run), fixed per
(text, task, seed) as a response cache would replay it.

What the search sees is what it would see against a real model:
- WorldRunner stands behind the Runner seam (experiments.runs): finish() returns a TaskOutcome with the judged
  score and the judge's feedback, which names the weakness of the answer (the missing property that would have
  helped this task most, or a harmful rule that hurt it) in words, as a judge would.
- WorldLLM stands behind harness.inference.LLM for the mutators: it reads the prompt the real mutators wrote
  (opro, reflect, crossover, merge), and makes one edit a mutation request: reflection makes the fix the feedback
  names about half the time (REFLECT_HIT), otherwise any edit (add a library constraint, add a neutral sentence,
  drop a sentence); OPRO sees scores only and makes any edit; crossover takes one rule of the other parent.

The truth: worth(instructions) is the mean over task types of the summed mean gains of the properties present,
the expected judge-scale gain over the baseline on a new task; `available` is the worth of every helpful property
in every type. The search never reads it.

Worlds: "gain" (the above), "null" (no property does anything, neutral spread only) and "zero" (each property's
mean gain is 0 but its per-task spread is as in "gain": edits that help some tasks and hurt others as much).
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from harness.config import TASK_TYPES
from harness.inference import ChatResult
from mutators.library import Constraint, constraints_for

BIG = 0.24  # the mean gain of a big property on its type's tasks; half properties gain BIG / 2
SPREAD = 3.0  # per-task sd of a property's gain, as a multiple of its mean gain
NEUTRAL_SD = 0.1  # per-task spread of any text change (a rewrite suits tasks differently)
SIGMA = 0.5  # judge and run noise of one run's score
HARM = -BIG  # the harmful property of each type
REFLECT_HIT = 0.5  # reflection makes the fix the feedback names this often
CALLS_PER_RUN = 3  # model calls a task run costs the harness here (synthesis, the loop's judge, the re-score)

NEUTRAL_SENTENCES = (
    "Write for a reader who knows the basics.", "Use plain words.", "Keep the tone direct.",
    "Prefer short paragraphs.", "Address the reader as you.", "Be precise in wording.",
    "Avoid rhetorical questions.", "Use active voice.", "Keep sentences short.", "Write in the present tense.",
    "Prefer concrete nouns.", "Do not use emoji.",
)

# the words a judge uses for each weakness: reflection finds the fix by them
WEAKNESS = {
    "tools": "no concrete tool, library or version named", "code_example": "no code example where one would help",
    "pitfall": "pitfalls are missing", "cite": "claims are not cited to the numbered sources",
    "item_length": "items are long-winded", "numbers": "no numbers: versions, figures or limits are missing",
    "bold_name": "item names are not in bold", "why": "it does not say why each item matters",
    "no_filler": "filler and generic advice", "uncertain": "unsupported claims are not marked uncertain",
    "tradeoff": "no trade-off or limitation named", "when_not": "never says when not to use an approach",
    "headings": "no headings for the sections", "summary": "no summary of the main takeaway",
    "no_duplicates": "items repeat each other", "exact_count": "the number of items is not the one asked for",
    "distinct": "items are variants of each other", "steps": "no concrete steps to follow in order",
    "config": "settings and flags are not named exactly", "compare": "approaches are not compared",
    "evidence": "sources and inference are mixed up", "open_questions": "open questions are not listed",
}


def z(*key: object) -> float:
    """A standard normal draw fixed by its key (the same key, the same value, in any process)."""
    digest = hashlib.blake2b("|".join(map(str, key)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "little")).gauss(0.0, 1.0)


def text_key(text: str) -> str:
    return hashlib.blake2b(" ".join(text.split()).encode(), digest_size=6).hexdigest()


@dataclass(frozen=True)
class Prop:
    constraint: Constraint
    gain: float  # mean gain on its type's tasks
    sd: float  # per-task sd of the gain

    @property
    def key(self) -> str:
        return self.constraint.key


@dataclass
class World:
    """One seed's world: its properties per task type and the truth about any set of instructions."""

    seed: int
    kind: str = "gain"  # gain | null | zero
    big: float = BIG
    props: dict[str, tuple[Prop, ...]] = field(default_factory=dict)
    baseline: dict[str, str] = field(default_factory=dict)

    @classmethod
    def make(cls, seed: int, baseline: Mapping[str, str], kind: str = "gain", big: float = BIG) -> "World":
        if kind not in ("gain", "null", "zero"):
            raise ValueError(f"unknown world kind {kind!r}; expected gain, null or zero")
        w = cls(seed, kind, big, {}, dict(baseline))
        rng = random.Random(f"world-{seed}")
        for tt in TASK_TYPES:
            free = [c for c in constraints_for(tt) if not c.present_in(baseline.get(tt, ""))]
            chosen = rng.sample(free, 5)
            means = (big, big, big / 2, big / 2, HARM * big / BIG)
            props = []
            for c, g in zip(chosen, means):
                sd = SPREAD * abs(g)
                props.append(Prop(c, 0.0 if kind != "gain" else g, 0.0 if kind == "null" else sd))
            w.props[tt] = tuple(props)
        return w

    # -- the truth ---------------------------------------------------------------------------------------------

    def present(self, task_type: str, text: str) -> list[Prop]:
        return [p for p in self.props[task_type] if p.constraint.present_in(text)]

    def worth(self, instructions: Mapping[str, str]) -> float:
        """Expected gain over the baseline on a new task (mean over task types of the present properties' gains)."""
        total = 0.0
        for tt in TASK_TYPES:
            text = instructions.get(tt, self.baseline.get(tt, ""))
            total += sum(p.gain for p in self.present(tt, text))
        return total / len(TASK_TYPES)

    @property
    def available(self) -> float:
        """The worth of every helpful property in every type: what a perfect search could return."""
        return sum(p.gain for tt in TASK_TYPES for p in self.props[tt] if p.gain > 0) / len(TASK_TYPES)

    # -- what the judge says -----------------------------------------------------------------------------------

    def task_gain(self, prop: Prop, task_id: str) -> float:
        return prop.gain + prop.sd * z(self.seed, "prop", prop.key, task_id)

    def expected(self, task_type: str, text: str, task_id: str) -> float:
        """A text's expected score on a task before run noise: difficulty, property gains, the rewrite's spread."""
        value = 4.5 + 2.5 * (0.5 + 0.5 * math.tanh(z(self.seed, "difficulty", task_id)))
        value += sum(self.task_gain(p, task_id) for p in self.present(task_type, text))
        if " ".join(text.split()) != " ".join(self.baseline.get(task_type, "").split()):
            value += NEUTRAL_SD * z(self.seed, "text", text_key(text), task_id)
        return value

    def judge(self, task_type: str, text: str, task_id: str, seed: int) -> tuple[float, str]:
        """(score 0-10, the judge's feedback) of one run."""
        score = self.expected(task_type, text, task_id) + SIGMA * z(self.seed, "run", text_key(text), task_id, seed)
        score = min(10.0, max(0.0, score))
        present = {p.key for p in self.present(task_type, text)}
        gains = [(self.task_gain(p, task_id), p) for p in self.props[task_type]]
        worst = min(((g, p) for g, p in gains if p.key in present and g < -0.2), default=None, key=lambda x: x[0])
        best = max(((g, p) for g, p in gains if p.key not in present and g > 0.2), default=None, key=lambda x: x[0])
        if worst and (not best or -worst[0] > best[0]):
            feedback = f"The rule '{worst[1].constraint.text}' made this answer worse."
        elif best:
            feedback = f"Weakness: {WEAKNESS[best[1].key]}."
        else:
            feedback = "Solid answer; no major weakness."
        return score, feedback


# -- the Runner seam ---------------------------------------------------------------------------------------------


class WorldRunner:
    """experiments.runs' Runner over the world: prepare / finish / identity / llm_calls. Counts task runs and
    the mutation model's calls (llm_calls: CALLS_PER_RUN a task run plus one a mutation request)."""

    smoke = False

    def __init__(self, world: World, tasks: Sequence[Any]) -> None:
        self.world = world
        self.tasks = {t.task: t for t in tasks}  # prepare() receives the task text
        self.task_runs = 0
        self.mutation_llm = WorldLLM(world)

    def prepare(self, task: Any) -> Any:
        return self.tasks[task]

    def identity(self) -> dict:
        return {"producer": {"backend": "sim", "model": f"world-{self.world.kind}-{self.world.seed}"}}

    def llm_calls(self) -> int:
        return self.task_runs * CALLS_PER_RUN + self.mutation_llm.calls

    def finish(self, prepared: Any, *, instructions: Mapping[str, str], run_id: str | None = None,
               criteria: Mapping[str, Any] | None = None, seed: int = 0) -> Any:
        from experiments.runs import TaskOutcome

        self.task_runs += 1
        tt = prepared.task_type
        score, feedback = self.world.judge(tt, instructions.get(tt, ""), prepared.id, seed)
        return TaskOutcome(status="ok", score=score, dimensions={"overall": score}, feedback=feedback,
                           output_text=f"simulated answer to {prepared.id}", rescored=True)


# -- the mutation model ------------------------------------------------------------------------------------------

FENCE = re.compile(r"```\n(.*?)\n```", re.DOTALL)
_OPRO_TEXT = re.compile(r"text:\n(.*?)\nscore:\n", re.DOTALL)


def _sentences(text: str) -> list[str]:
    from mutators.base import split_sentences

    return [s for s in split_sentences(text) if s.strip()]


class WorldLLM:
    """harness.inference.LLM for the mutators, over the world: one edit a request (module docstring)."""

    backend = "sim"
    model = "world-mutator"

    def __init__(self, world: World) -> None:
        self.world = world
        self.calls = 0
        self.requests: list[str] = []  # the operator each request was read as (opro, reflect, crossover, merge)

    def _task_type(self, prompt: str) -> str:
        """The task type the prompt is about: the mutators' prompts name its output kind (TASK_OUTPUT)."""
        from mutators.operators._prompts import TASK_OUTPUT

        return next((tt for tt, kind in TASK_OUTPUT.items() if kind in prompt), "research")

    def edit(self, text: str, task_type: str, rng: random.Random) -> str:
        """Any one edit: add a library constraint, add a neutral sentence, or drop a sentence."""
        sents = _sentences(text)
        r = rng.random()
        if r < 0.45:
            free = [c for c in constraints_for(task_type) if not c.present_in(text)]
            if free:
                return " ".join(sents + [rng.choice(free).text])
        if r < 0.75 or len(sents) < 2:
            extra = [s for s in NEUTRAL_SENTENCES if s not in text]
            return " ".join(sents + [rng.choice(extra or list(NEUTRAL_SENTENCES))])
        drop = rng.randrange(len(sents))
        return " ".join(s for i, s in enumerate(sents) if i != drop)

    def reflect(self, base: str, prompt: str, task_type: str, rng: random.Random) -> str:
        """The fix the feedback names, REFLECT_HIT of the time: drop a rule it says hurt, else add the rule for the
        weakness it names on the most tasks (a line "[k of n tasks ...]" counts k), not one already tried; else
        any edit."""
        fb = prompt.split("Its feedback", 1)[-1].split("Write an improved instruction", 1)[0]
        lines = [ln for ln in fb.splitlines() if ln.strip()]
        tried = " ".join(ln for ln in lines if "Already tried" in ln)
        if rng.random() < REFLECT_HIT:
            def weight(c: Constraint) -> int:
                total = 0
                for ln in lines:
                    if WEAKNESS[c.key] in ln and "Already tried" not in ln:
                        m = re.search(r"\[(\d+) of \d+ tasks", ln)
                        total += int(m.group(1)) if m else 1
                return total

            harmful = [c for c in constraints_for(task_type) if f"'{c.text}' made" in fb and c.present_in(base)]
            if harmful:
                target = rng.choice(harmful)
                return " ".join(s for s in _sentences(base) if not target.present_in(s)) or base
            named = [c for c in constraints_for(task_type)
                     if weight(c) and not c.present_in(base) and c.text not in tried]
            if named:
                return " ".join(_sentences(base) + [max(named, key=weight).text])
        return self.edit(base, task_type, rng)

    def chat(self, messages: Sequence[Any], *, schema: Any = None, temperature: float = 0.0, max_tokens: int = 0,
             seed: int | None = None, **_: Any) -> ChatResult:
        import json

        self.calls += 1
        prompt = "\n".join(str(m["content"] if isinstance(m, Mapping) else m.content) for m in messages)
        rng = random.Random(f"{self.world.seed}-{seed}-{text_key(prompt)}")
        tt = self._task_type(prompt)
        fences = FENCE.findall(prompt)
        if "Its feedback" in prompt and fences:
            self.requests.append("reflect")
            new = self.reflect(fences[0], prompt, tt, rng)
        elif "Instruction A:" in prompt and len(fences) >= 2:
            self.requests.append("crossover")
            a, b = fences[0], fences[1]
            from_b = [s for s in _sentences(b) if s not in a]
            new = " ".join(_sentences(a) + [rng.choice(from_b)]) if from_b else self.edit(a, tt, rng)
        elif _OPRO_TEXT.search(prompt):
            self.requests.append("opro")
            texts = _OPRO_TEXT.findall(prompt)
            new = self.edit(texts[-1], tt, rng)  # ascending by score: the last is the best
        elif fences:
            self.requests.append("other")
            new = self.edit(fences[0], tt, rng)
        else:
            self.requests.append("unread")
            new = self.edit(self.world.baseline.get(tt, ""), tt, rng)
        text = json.dumps({"instruction": new})
        return ChatResult(text=text, prompt_tokens=len(prompt) // 4, completion_tokens=len(text) // 4,
                          latency_s=0.0, model=self.model, backend=self.backend)
