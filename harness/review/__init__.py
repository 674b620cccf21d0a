"""Stage 7, evaluate and revise: the wiggum loop (evaluate -> revise -> verify), the scorer seam it is handed, and
the advisory review panel of personas.

- _evaluator: `Evaluator`, what the pipeline asks of the scorer it is handed (the scorers are evaluators/'), and
  `NoEvaluator`.
- _wiggum: `wiggum_loop`, `WiggumResult`, the revision messages and the verify re-score (`rescore_config`,
  `rescore_samples`, `RESCORE_SEED_OFFSET`).
- _verify: `verify_rescore`, the verify re-score with a second voice where its attempt verdict and the loop judge's
  differ (`Verified`, `attempt_verdict`, `TIEBREAK_SEED_OFFSET`).
- _panel: `run_panel`, its personas, schema, verdict parsing and summary.
"""

from ._evaluator import Evaluator, NoEvaluator
from ._panel import run_panel
from ._verify import TIEBREAK_SEED_OFFSET, Verified, attempt_verdict, verify_rescore
from ._wiggum import RESCORE_SEED_OFFSET, rescore_config, rescore_samples, wiggum_loop

__all__ = [
    "Evaluator",
    "NoEvaluator",
    "RESCORE_SEED_OFFSET",
    "TIEBREAK_SEED_OFFSET",
    "Verified",
    "attempt_verdict",
    "rescore_config",
    "rescore_samples",
    "verify_rescore",
    "wiggum_loop",
    "run_panel",
]
