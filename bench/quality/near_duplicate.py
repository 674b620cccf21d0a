"""The task supply's near-duplicate rule (experiments.config.same_task) on the labelled pairs in
tests/data/near_duplicate_pairs.jsonl and tests/data/near_duplicate_fresh.jsonl: the share of paraphrases caught and
of siblings and unrelated pairs kept, per half (tune: the rule's constants were chosen on it; heldout: only
reported, but looked at while they were chosen; fresh: 28 other forms written after the constants were chosen and
measured once), and of pairs that share a subject under two different requests (other_request) kept; then the
pairs it gets wrong. `--rule hashing` scores the former rule (cosine >= 0.75 on the hashing embedding) for
comparison.

    python bench/quality/near_duplicate.py [--rule minilm|hashing] [--threshold X]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "tests" / "data" / "near_duplicate_pairs.jsonl"
FRESH = ROOT / "tests" / "data" / "near_duplicate_fresh.jsonl"


def load_pairs(*paths: Path) -> list[dict]:
    return [json.loads(line) for path in (paths or (PAIRS, FRESH))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def judge_pairs(pairs: list[dict], threshold: float) -> list[bool]:
    """One task? for every pair, judged as the task supply judges them (one Texts over all the pairs' texts)."""
    from experiments.config._near_duplicate import TaskTexts

    texts = TaskTexts([p["a"] for p in pairs] + [p["b"] for p in pairs])
    n = len(pairs)
    out = []
    for i in range(n):
        near, _ = texts.judge(slice(i, i + 1), slice(n + i, n + i + 1), threshold)
        out.append(bool(near[0, 0]))
    return out


def judge_hashing(pairs: list[dict], threshold: float) -> list[bool]:
    from harness.memory.embeddings import hashing_vector

    return [float(hashing_vector(p["a"]) @ hashing_vector(p["b"])) >= threshold for p in pairs]


def rates(pairs: list[dict], verdicts: list[bool]) -> dict[tuple[str, str], tuple[int, int]]:
    """(half, label) -> (right, total); right is "caught" for a paraphrase and "kept" for the others."""
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for p, dup in zip(pairs, verdicts):
        for half in (p["half"], "all"):
            cell = out[(half, p["label"])]
            cell[0] += int(dup == (p["label"] == "paraphrase"))
            cell[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rule", choices=("minilm", "hashing"), default="minilm")
    ap.add_argument("--threshold", type=float, default=None)
    args = ap.parse_args()
    from experiments.config._near_duplicate import NEAR_DUPLICATE

    threshold = args.threshold if args.threshold is not None else (NEAR_DUPLICATE if args.rule == "minilm" else 0.75)
    pairs = load_pairs()
    start = time.perf_counter()
    verdicts = (judge_pairs if args.rule == "minilm" else judge_hashing)(pairs, threshold)
    seconds = time.perf_counter() - start
    r = rates(pairs, verdicts)
    print(f"===== NEAR-DUPLICATE RULE: {args.rule}, threshold {threshold:g}, {len(pairs)} pairs, {seconds:.1f} s =====")
    for half in ("tune", "heldout", "fresh", "all"):
        cells = [f"{lab} {'caught' if lab == 'paraphrase' else 'kept'} {r[(half, lab)][0]}/{r[(half, lab)][1]} "
                 f"= {r[(half, lab)][0] / r[(half, lab)][1]:.3f}" for lab in ("paraphrase", "sibling", "unrelated", "other_request") if (half, lab) in r]
        print(f"{half:8s} " + "; ".join(cells))
    wrong = [(p, d) for p, d in zip(pairs, verdicts) if d != (p["label"] == "paraphrase")]
    print(f"wrong: {len(wrong)}")
    for p, d in wrong[:40]:
        print(f"  {p['label']}/{p['kind']} ({p['half']}) judged {'one task' if d else 'two tasks'}: {p['a']!r} | {p['b']!r}")
    print("===== END NEAR-DUPLICATE RULE =====")


if __name__ == "__main__":
    main()
