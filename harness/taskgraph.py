"""Compound planning, the pure parts (seeds 001 and 004).

- `TaskGraph.from_planner_output` turns planner output (JSON text with fences/prose, a mapping or a list) into
  canonical `TaskNode`s plus objectives, exit criteria and an explanation, normalising aliases.
- `validate()` collects problems (duplicate ids, unknown or forward dependencies, cycles, placeholders to
  undeclared or later steps) instead of raising; `GraphError` is kept for input that is not a plan at all,
  with the raw text attached so a caller can show it with a warning.
- `topological_order()` (stable, natural id order on ties) and `schedule_order()` (seed 001's ranking).
- ReWOO placeholders `#E1`, `#E1.summary`, `#E1.head=N`, `#E1.last=N` resolved from earlier outputs.
- `complexity_score(task)`: 0-10, when planning a step graph pays off (seed 004).
- `telemetry()` / `merge_telemetry()` for the run record (merged, never overwritten).
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from harness.jsonparse import JSONParseError, parse_json

__all__ = [
    "GraphError",
    "TaskNode",
    "TaskGraph",
    "natural_key",
    "find_placeholders",
    "resolve_placeholders",
    "resolve_placeholders_detailed",
    "complexity_score",
    "complexity_breakdown",
    "merge_telemetry",
    "graph_schema",
    "graph_messages",
]


class GraphError(ValueError):
    """Planner output that cannot be read as a task graph. `raw` keeps the original text for display."""

    def __init__(self, message: str, raw: Any = None) -> None:
        super().__init__(message)
        self.raw = raw if isinstance(raw, str) or raw is None else repr(raw)


# -- aliases ------------------------------------------------------------------------------------------

_TASK_LIST_KEYS = ("tasks", "steps", "plan", "subtasks", "nodes", "graph", "task_graph")
_ID_KEYS = ("id", "task_id", "step_id", "step", "key", "name")
_QUESTION_KEYS = ("question", "task", "prompt", "query", "instruction", "description", "goal", "title", "text")
_SUBQ_KEYS = ("sub_questions", "subquestions", "sub_queries", "questions", "follow_ups")
_TOOLS_KEYS = ("tools", "tool", "tools_required", "agents", "agent")
_AFFINITY_KEYS = ("affinity", "tool_affinity", "tool_scores", "affinities", "scores")
_DEPS_KEYS = ("depends_on", "deps", "dependencies", "after", "requires", "needs", "parents", "prerequisites")
_CRITERIA_KEYS = (
    "criteria",
    "completion_criteria",
    "success_criteria",
    "done_when",
    "acceptance_criteria",
    "exit_criteria",
)
_OBJECTIVE_KEYS = ("objectives", "objective", "goals", "goal", "aims")
_EXIT_KEYS = ("exit_criteria", "exit", "done_when", "success_criteria", "exit_conditions", "stop_criteria")
_EXPLANATION_KEYS = ("explanation", "rationale", "reasoning", "summary", "explain", "notes")

_PLACEHOLDER = re.compile(r"#E(\d+)(?!\d)(?:\.(summary)\b|\.head=(\d+)|\.last=(\d+))?", re.IGNORECASE)
_ELLIPSIS = "…"
_ID_LIKE = re.compile(r"#?[\w.:-]{1,32}")


def natural_key(text: str) -> tuple:
    """Sort key that orders E2 before E10."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part.lower()) for part in re.split(r"(\d+)", str(text)) if part)


def _canonical_id(value: Any) -> str:
    """1, "1", "e1", "#E1" -> "E1"; other ids are kept (trimmed)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    m = re.fullmatch(r"#?[Ee]?(\d+)", text)
    return f"E{int(m.group(1))}" if m else text


def _first(mapping: Mapping[str, Any], keys: Sequence[str]) -> tuple[str | None, Any]:
    lowered = {str(k).strip().lower(): k for k in mapping}
    for key in keys:
        if key in lowered:
            return key, mapping[lowered[key]]
    return None, None


def _strings(value: Any) -> tuple[str, ...]:
    if value is None or isinstance(value, bool):
        return ()
    if isinstance(value, (str, int, float)):
        text = " ".join(str(value).split())
        return (text,) if text else ()
    if isinstance(value, Mapping):
        value = list(value.values())
    out: list[str] = []
    for item in value if isinstance(value, (list, tuple)) else ():
        if isinstance(item, Mapping):
            _, item = _first(item, _QUESTION_KEYS + ("criterion", "value"))
        out.extend(_strings(item))
    return tuple(out)


def _deps(value: Any) -> tuple[str, ...]:
    if value is None or isinstance(value, bool):
        return ()
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\s;]+", value) if v]
    elif not isinstance(value, (list, tuple)):
        value = [value]
    out: list[str] = []
    for item in value:
        if isinstance(item, Mapping):
            _, item = _first(item, _ID_KEYS)
        if item is None or str(item).strip() == "":
            continue
        dep = _canonical_id(item)
        if dep not in out:
            out.append(dep)
    return tuple(out)


# -- nodes and graph ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskNode:
    """One step: a research question with its tools, tool affinity in [0, 1], dependencies and criteria."""

    id: str
    question: str
    sub_questions: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    affinity: dict[str, float] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    criteria: tuple[str, ...] = ()

    def __hash__(self) -> int:
        return hash((self.id, self.question, self.depends_on))

    @property
    def placeholders(self) -> tuple[str, ...]:
        """Ids referenced by #E<n> placeholders in the question and sub-questions, in order."""
        return find_placeholders(" ".join((self.question,) + self.sub_questions))

    def tool_score(self, tool: str) -> float:
        if tool in self.affinity:
            return self.affinity[tool]
        return 1.0 if tool in self.tools else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "sub_questions": list(self.sub_questions),
            "tools": list(self.tools),
            "affinity": dict(self.affinity),
            "depends_on": list(self.depends_on),
            "criteria": list(self.criteria),
        }


def _affinity(value: Any, tid: str, warnings: list[str]) -> dict[str, float]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)):
        out: dict[str, float] = {}
        for item in value:
            if isinstance(item, Mapping):
                _, name = _first(item, ("tool", "name", "id"))
                _, score = _first(item, ("score", "affinity", "value", "weight"))
                out.update(_affinity({str(name): score}, tid, warnings) if name is not None else {})
            elif str(item).strip():
                out[str(item).strip()] = 1.0
        return out
    if not isinstance(value, Mapping):
        warnings.append(f"task {tid}: affinity expected a mapping tool -> score in [0, 1], got {value!r}; ignored")
        return {}
    out = {}
    for tool, raw in value.items():
        try:
            score = float(raw)
        except (TypeError, ValueError):
            warnings.append(f"task {tid}: affinity for {tool!r} is not a number ({raw!r}); ignored")
            continue
        if math.isnan(score):
            warnings.append(f"task {tid}: affinity for {tool!r} is NaN; ignored")
            continue
        clamped = min(1.0, max(0.0, score))
        if clamped != score:
            warnings.append(f"task {tid}: affinity for {tool!r} = {score:g} clamped to {clamped:g}")
        out[str(tool).strip()] = clamped
    return out


def _node(item: Any, index: int, warnings: list[str]) -> TaskNode:
    fallback_id = f"E{index + 1}"
    if isinstance(item, str):
        return TaskNode(id=fallback_id, question=" ".join(item.split()))
    if not isinstance(item, Mapping):
        warnings.append(f"step {index + 1}: expected an object or a string, got {type(item).__name__}; kept as text")
        return TaskNode(id=fallback_id, question=str(item))
    _, raw_id = _first(item, _ID_KEYS)
    _, question = _first(item, _QUESTION_KEYS)
    question_text = " ".join(_strings(question))
    if raw_id is not None and not isinstance(raw_id, bool) and _ID_LIKE.fullmatch(str(raw_id).strip()):
        tid = _canonical_id(raw_id)
    else:
        tid = fallback_id
        warnings.append(f"step {index + 1}: no usable id (got {raw_id!r}); assigned {tid}")
        if raw_id is not None and not question_text:
            question_text = " ".join(_strings(raw_id))
    tools = _strings(_first(item, _TOOLS_KEYS)[1])
    return TaskNode(
        id=tid,
        question=question_text,
        sub_questions=_strings(_first(item, _SUBQ_KEYS)[1]),
        tools=tools,
        affinity=_affinity(_first(item, _AFFINITY_KEYS)[1], tid, warnings),
        depends_on=_deps(_first(item, _DEPS_KEYS)[1]),
        criteria=_strings(_first(item, _CRITERIA_KEYS)[1]),
    )


@dataclass(frozen=True)
class TaskGraph:
    tasks: tuple[TaskNode, ...] = ()
    objectives: tuple[str, ...] = ()
    exit_criteria: tuple[str, ...] = ()
    explanation: str = ""
    warnings: tuple[str, ...] = ()

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def from_planner_output(cls, data: Any) -> "TaskGraph":
        """JSON text (fences/prose tolerated), a mapping (tasks under tasks/steps/plan) or a list of steps.

        Raises GraphError (with the raw input kept) only when no list of steps can be found at all;
        structural problems are reported by `validate()`.
        """
        raw = data
        if isinstance(data, (bytes, bytearray)):
            data = data.decode("utf-8", "replace")
        if isinstance(data, str):
            try:
                data, _ = parse_json(data)
            except JSONParseError as exc:
                raise GraphError(f"planner output is not a task graph: {exc}", raw) from exc
        warnings: list[str] = []
        top: Mapping[str, Any] = {}
        if isinstance(data, Mapping):
            top = data
            items = cls._find_tasks(data)
            if items is None:
                keys = sorted(map(str, data))[:10]
                raise GraphError(
                    f"planner output has no list of steps: expected a list under one of {_TASK_LIST_KEYS}, "
                    f"got keys {keys}",
                    raw if isinstance(raw, str) else repr(raw),
                )
        elif isinstance(data, (list, tuple)):
            items = list(data)
        else:
            raise GraphError(
                f"planner output is not a task graph: expected JSON text, a mapping or a list, got {type(data).__name__}",
                raw,
            )
        if not items:
            warnings.append("plan has no steps")
        tasks = tuple(_node(item, i, warnings) for i, item in enumerate(items))
        _, explanation = _first(top, _EXPLANATION_KEYS) if top else (None, None)
        return cls(
            tasks=tasks,
            objectives=_strings(_first(top, _OBJECTIVE_KEYS)[1]) if top else (),
            exit_criteria=_strings(_first(top, _EXIT_KEYS)[1]) if top else (),
            explanation=" ".join(_strings(explanation)),
            warnings=tuple(warnings),
        )

    @staticmethod
    def _find_tasks(data: Mapping[str, Any]) -> list[Any] | None:
        key, value = _first(data, _TASK_LIST_KEYS)
        if isinstance(value, (list, tuple)):
            return list(value)
        if isinstance(value, Mapping):
            nested = TaskGraph._find_tasks(value)
            if nested is not None:
                return nested
        if key is None and any(k in data for k in _QUESTION_KEYS):
            return [data]
        return None

    @classmethod
    def from_subtasks(cls, subtasks: Iterable[str], *, objective: str = "") -> "TaskGraph":
        """Independent steps E1..En from a planner's subtask list."""
        tasks = tuple(TaskNode(id=f"E{i + 1}", question=q) for i, q in enumerate(s for s in subtasks if s.strip()))
        return cls(tasks=tasks, objectives=(objective,) if objective else ())

    # -- lookups -----------------------------------------------------------------------------------

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(t.id for t in self.tasks)

    def get(self, task_id: str) -> TaskNode:
        tid = _canonical_id(task_id)
        for task in self.tasks:
            if task.id == tid:
                return task
        raise KeyError(f"no task {task_id!r}; declared ids: {', '.join(self.ids) or '(none)'}")

    def dependencies(self, task: TaskNode) -> tuple[str, ...]:
        """Declared dependencies plus ids referenced by placeholders (a step needs what it quotes)."""
        declared = set(self.ids)
        extra = [p for p in task.placeholders if p in declared and p != task.id and p not in task.depends_on]
        return task.depends_on + tuple(dict.fromkeys(extra))

    def _edges(self) -> dict[str, tuple[str, ...]]:
        declared = set(self.ids)
        return {t.id: tuple(d for d in self.dependencies(t) if d in declared and d != t.id) for t in self._unique()}

    def _unique(self) -> list[TaskNode]:
        seen: set[str] = set()
        out = []
        for t in self.tasks:
            if t.id not in seen:
                seen.add(t.id)
                out.append(t)
        return out

    # -- validation --------------------------------------------------------------------------------

    def validate(self) -> list[str]:
        """Every structural problem, as messages; [] when the graph is runnable as planned."""
        errors: list[str] = []
        if not self.tasks:
            errors.append("plan has no steps")
        position: dict[str, int] = {}
        for i, task in enumerate(self.tasks):
            if task.id in position:
                errors.append(f"duplicate task id {task.id!r} (steps {position[task.id] + 1} and {i + 1})")
            else:
                position[task.id] = i
            if not task.question.strip():
                errors.append(f"task {task.id} has no question")
        for i, task in enumerate(self.tasks):
            for dep in task.depends_on:
                if dep == task.id:
                    errors.append(f"task {task.id} depends on itself")
                elif dep not in position:
                    errors.append(f"task {task.id} depends on unknown id {dep!r}")
                elif position[dep] >= i:
                    errors.append(f"task {task.id} depends on {dep}, which is not an earlier step")
            for ref in dict.fromkeys(task.placeholders):
                if ref not in position:
                    errors.append(f"task {task.id} references #{ref}, which is not a declared id")
                elif position[ref] >= i:
                    errors.append(f"task {task.id} references #{ref}, which is not an earlier step")
        cycle = self._find_cycle()
        if cycle:
            errors.append("dependency cycle: " + " -> ".join(cycle))
        return errors

    def _find_cycle(self) -> list[str] | None:
        edges = self._edges()
        state: dict[str, int] = {}
        stack: list[str] = []

        def visit(node: str) -> list[str] | None:
            state[node] = 1
            stack.append(node)
            for dep in sorted(edges.get(node, ()), key=natural_key):
                if state.get(dep) == 1:
                    return stack[stack.index(dep) :] + [dep]
                if dep not in state:
                    found = visit(dep)
                    if found:
                        return found
            stack.pop()
            state[node] = 2
            return None

        for node in sorted(edges, key=natural_key):
            if node not in state:
                found = visit(node)
                if found:
                    return found
        return None

    # -- ordering ----------------------------------------------------------------------------------

    def depths(self) -> dict[str, int]:
        """Longest dependency chain above each task (roots 0). Raises GraphError on a cycle."""
        order = self.topological_order()
        edges = self._edges()
        depth: dict[str, int] = {}
        for task in order:
            depth[task.id] = 1 + max((depth[d] for d in edges[task.id]), default=-1)
        return depth

    def topological_order(self) -> list[TaskNode]:
        """Kahn's algorithm; among ready tasks the smallest id (natural order) goes first. GraphError on a cycle."""
        edges = self._edges()
        nodes = {t.id: t for t in self._unique()}
        pending = {tid: set(deps) for tid, deps in edges.items()}
        dependents: dict[str, list[str]] = {tid: [] for tid in nodes}
        for tid, deps in edges.items():
            for dep in deps:
                dependents[dep].append(tid)
        heap = [(natural_key(tid), tid) for tid, deps in pending.items() if not deps]
        heapq.heapify(heap)
        out: list[TaskNode] = []
        while heap:
            _, tid = heapq.heappop(heap)
            out.append(nodes[tid])
            for child in dependents[tid]:
                pending[child].discard(tid)
                if not pending[child]:
                    heapq.heappush(heap, (natural_key(child), child))
        if len(out) != len(nodes):
            cycle = self._find_cycle() or sorted(set(nodes) - {t.id for t in out}, key=natural_key)
            raise GraphError("task graph has a dependency cycle: " + " -> ".join(cycle))
        return out

    def schedule_key(
        self, task: TaskNode, done: Iterable[str] = (), preferred_tools: Sequence[str] = ()
    ) -> tuple:
        """Seed 001 ranking: ready, preferred-tool match, higher affinity, shallower depth, fewer pending
        dependencies, id."""
        done_set = set(done)
        deps = self._edges().get(task.id, ())
        pending = [d for d in deps if d not in done_set]
        tools = list(preferred_tools) or sorted(set(task.affinity) | set(task.tools))
        match = any(task.tool_score(t) > 0 for t in preferred_tools)
        affinity = max((task.tool_score(t) for t in tools), default=0.0)
        depth = self.depths()[task.id]
        return (bool(pending), not match, -affinity, depth, len(pending), natural_key(task.id))

    def ready(self, done: Iterable[str] = (), preferred_tools: Sequence[str] = ()) -> list[TaskNode]:
        """Tasks not done whose dependencies are all done, best first."""
        done_set = set(done)
        edges = self._edges()
        ready = [t for t in self._unique() if t.id not in done_set and all(d in done_set for d in edges[t.id])]
        return sorted(ready, key=lambda t: self.schedule_key(t, done_set, preferred_tools))

    def schedule_order(self, preferred_tools: Sequence[str] = ()) -> list[TaskNode]:
        """The order a one-at-a-time scheduler runs the tasks in. Deterministic; GraphError on a cycle."""
        self.topological_order()
        done: list[str] = []
        remaining = {t.id for t in self._unique()}
        out: list[TaskNode] = []
        while remaining:
            candidates = [self.get(tid) for tid in remaining]
            best = min(candidates, key=lambda t: self.schedule_key(t, done, preferred_tools))
            out.append(best)
            done.append(best.id)
            remaining.discard(best.id)
        return out

    def levels(self) -> list[list[TaskNode]]:
        """Tasks grouped by depth: each level can run in parallel once the previous one finished."""
        depth = self.depths()
        grouped: dict[int, list[TaskNode]] = {}
        for task in self.topological_order():
            grouped.setdefault(depth[task.id], []).append(task)
        return [grouped[d] for d in sorted(grouped)]

    # -- reporting ---------------------------------------------------------------------------------

    def telemetry(self) -> dict[str, Any]:
        edges = self._edges()
        scores = [s for t in self.tasks for s in t.affinity.values()]
        try:
            depth = self.depths()
            max_depth = max(depth.values(), default=-1) + 1
        except GraphError:
            max_depth = None
        return {
            "task_count": len(self.tasks),
            "edge_count": sum(len(d) for d in edges.values()),
            "max_depth": max_depth,
            "root_count": sum(1 for d in edges.values() if not d),
            "mean_affinity": round(sum(scores) / len(scores), 4) if scores else None,
            "tools": sorted({tool for t in self.tasks for tool in (*t.tools, *t.affinity)}),
            "objective_count": len(self.objectives),
            "exit_criteria_count": len(self.exit_criteria),
            "error_count": len(self.validate()),
            "warning_count": len(self.warnings),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": [t.to_dict() for t in self.tasks],
            "objectives": list(self.objectives),
            "exit_criteria": list(self.exit_criteria),
            "explanation": self.explanation,
            "warnings": list(self.warnings),
        }

    def preview(self, preferred_tools: Sequence[str] = ()) -> str:
        """Human-readable plan for --plan-preview: steps, order, warnings and errors. Executes nothing."""
        lines = ["Plan preview (dry run: nothing executed)"]
        if self.objectives:
            lines.append("Objectives: " + "; ".join(self.objectives))
        if self.explanation:
            lines.append("Explanation: " + self.explanation)
        for task in self.tasks:
            deps = ", ".join(self.dependencies(task)) or "-"
            lines.append(f"  {task.id}: {task.question}  [after: {deps}]")
            for sq in task.sub_questions:
                lines.append(f"      ? {sq}")
            if task.affinity or task.tools:
                tools = sorted(set(task.tools) | set(task.affinity))
                lines.append("      tools: " + ", ".join(f"{t}={task.tool_score(t):.2f}" for t in tools))
            if task.criteria:
                lines.append("      done when: " + "; ".join(task.criteria))
        if self.exit_criteria:
            lines.append("Exit criteria: " + "; ".join(self.exit_criteria))
        try:
            lines.append("Order: " + " -> ".join(t.id for t in self.schedule_order(preferred_tools)))
        except GraphError as exc:
            lines.append(f"Order: unavailable ({exc})")
        for warning in self.warnings:
            lines.append(f"WARNING: {warning}")
        for error in self.validate():
            lines.append(f"ERROR: {error}")
        return "\n".join(lines)


# -- placeholders -------------------------------------------------------------------------------------


def find_placeholders(text: str) -> tuple[str, ...]:
    """Ids referenced by #E<n> placeholders, in order of appearance (repeats kept)."""
    return tuple(f"E{int(m.group(1))}" for m in _PLACEHOLDER.finditer(text or ""))


def _lookup(outputs: Mapping[str, str], tid: str) -> str | None:
    for key in (tid, tid.lower(), tid[1:], f"#{tid}"):
        if key in outputs:
            value = outputs[key]
            return "" if value is None else str(value)
    return None


def resolve_placeholders_detailed(text: str, outputs: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """Replace placeholders with step outputs -> (text, problems). A placeholder whose id has no output is
    replaced by a visible marker `[missing output for #E3]` and reported."""
    problems: list[str] = []

    def sub(m: re.Match[str]) -> str:
        tid = f"E{int(m.group(1))}"
        value = _lookup(outputs, tid)
        if value is None:
            problems.append(f"#{tid}: no output for {tid} (available: {', '.join(sorted(outputs, key=natural_key)) or 'none'})")
            return f"[missing output for {m.group(0)}]"
        value = value.strip()
        if m.group(2):
            return next((line.strip() for line in value.splitlines() if line.strip()), "")
        if m.group(3) is not None:
            n = int(m.group(3))
            return value if len(value) <= n else value[:n].rstrip() + _ELLIPSIS
        if m.group(4) is not None:
            n = int(m.group(4))
            return value if len(value) <= n else _ELLIPSIS + value[len(value) - n :].lstrip()
        return value

    return _PLACEHOLDER.sub(sub, text or ""), tuple(problems)


def resolve_placeholders(text: str, outputs: Mapping[str, str]) -> str:
    """#E1 (trimmed output), #E1.summary (first non-empty line), #E1.head=N, #E1.last=N -> text.

    Unknown ids stay visible as `[missing output for #E3]`; use resolve_placeholders_detailed for the list.
    """
    return resolve_placeholders_detailed(text, outputs)[0]


# -- complexity ---------------------------------------------------------------------------------------

_ACTION_VERBS = (
    # en
    "implement add create fix refactor write test deploy build run update remove delete rename migrate install "
    "configure document design benchmark measure generate draft research investigate compare analyze analyse "
    "evaluate review summarize summarise synthesize synthesise assemble combine integrate merge debug optimize "
    "optimise profile save publish release "
    # pt-BR (infinitive and imperative)
    "implementar implemente adicionar adicione criar crie corrigir corrija escrever escreva testar teste "
    "refatorar refatore atualizar atualize remover remova executar execute rodar rode construir construa "
    "publicar publique implantar implante configurar configure documentar documente pesquisar pesquise "
    "comparar analisar analise resumir resuma sintetizar sintetize gerar gere salvar salve instalar instale "
    "migrar migre revisar revise avaliar avalie integrar integre otimizar otimize depurar depure"
).split()
_VERB_RE = re.compile(r"\b(" + "|".join(sorted(set(_ACTION_VERBS), key=len, reverse=True)) + r")\b", re.IGNORECASE)
_FILE_RE = re.compile(
    r"(?<![\w/.-])[\w./-]*\w\.(?:go|ts|tsx|js|jsx|mjs|py|pyi|ipynb|md|rst|txt|yaml|yml|json|toml|ini|cfg|conf|"
    r"xml|html|css|sql|sh|bash|rs|java|kt|c|h|cc|cpp|hpp|rb|php|cs|swift|csv|pdf|docx|xlsx|pptx|proto|tf)\b"
    r"|\b(?:Dockerfile|Makefile|Containerfile|Jenkinsfile|Procfile|Vagrantfile|Gemfile|Rakefile|Taskfile)\b"
)
_SEQUENCER_RE = re.compile(
    r"\b(?:e em seguida|em seguida|e depois|depois disso|depois|por fim|por último|finalmente|logo após|após|"
    r"and then|after that|afterwards|then|after|finally|lastly|next|subsequently|followed by|once done)\b",
    re.IGNORECASE,
)
VERB_CAP, FILE_CAP, SEQUENCER_CAP = 5, 3, 2


def complexity_breakdown(task: str) -> dict[str, int]:
    """The three capped signals of complexity_score and their total."""
    text = task or ""
    verbs = min(len(_VERB_RE.findall(text)), VERB_CAP)
    files = min(len(set(m.group(0) for m in _FILE_RE.finditer(text))), FILE_CAP)
    sequencers = min(len(_SEQUENCER_RE.findall(text)), SEQUENCER_CAP)
    return {"verbs": verbs, "files": files, "sequencers": sequencers, "score": verbs + files + sequencers}


def complexity_score(task: str) -> int:
    """0-10: action verbs (cap 5) + file artefacts (cap 3) + sequencers (cap 2); English and pt-BR."""
    return complexity_breakdown(task)["score"]


# -- telemetry ----------------------------------------------------------------------------------------


def merge_telemetry(existing: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> dict[str, Any]:
    """Deep merge without losing earlier values: nested mappings merge, lists extend (no duplicates), a new
    None never erases a value, other new scalars win. Inputs are not modified."""
    out: dict[str, Any] = {k: _copy(v) for k, v in (existing or {}).items()}
    for key, value in (new or {}).items():
        old = out.get(key)
        if value is None and key in out:
            continue
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            out[key] = merge_telemetry(old, value)
        elif isinstance(old, list) and isinstance(value, (list, tuple)):
            out[key] = old + [_copy(v) for v in value if v not in old]
        else:
            out[key] = _copy(value)
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in value]
    return value


# -- the step-graph planner prompt ---------------------------------------------------------------------


def graph_schema(max_tasks: int = 4) -> dict[str, Any]:
    """Bounded JSON schema for a planner asked to emit a step graph."""
    short = {"type": "string", "maxLength": 160}
    return {
        "type": "object",
        "properties": {
            "objectives": {"type": "array", "items": short, "maxItems": 3},
            "tasks": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_tasks,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "maxLength": 8},
                        "question": {"type": "string", "maxLength": 240},
                        "depends_on": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": max_tasks},
                        "criteria": {"type": "array", "items": short, "maxItems": 2},
                    },
                    "required": ["id", "question", "depends_on"],
                    "additionalProperties": False,
                },
            },
            "exit_criteria": {"type": "array", "items": short, "maxItems": 3},
            "explanation": {"type": "string", "maxLength": 300},
        },
        "required": ["objectives", "tasks", "exit_criteria", "explanation"],
        "additionalProperties": False,
    }


GRAPH_SYSTEM = (
    "You split a compound research task into at most {max_tasks} self-contained research steps. Reply with one "
    "JSON object only: objectives, tasks, exit_criteria, explanation. Each task has an id E1, E2, ..., a "
    "question that web research can answer, depends_on (ids of earlier steps whose output it needs; [] when "
    "independent) and criteria (when the step is done). A question may quote an earlier step's output with "
    "#E1 (full), #E1.summary (first line) or #E1.head=200. Prefer independent steps so they run in parallel. "
    "Do not add a step that synthesizes, assembles or writes the final answer: that happens afterwards."
)


def graph_messages(task: str, memory_context: str = "", max_tasks: int = 4) -> list[dict[str, str]]:
    from harness.planner import memory_block  # the planner's: memory goes in a data block

    user = f"Task: {task}\n\n{memory_block(task, memory_context)}"
    return [
        {"role": "system", "content": GRAPH_SYSTEM.replace("{max_tasks}", str(max_tasks))},
        {"role": "user", "content": user},
    ]
