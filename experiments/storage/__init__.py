"""What a study keeps on disk between processes: the shared Optuna/MLflow stores and locks, the results ledger,
the per-task context cache and stored calibrations."""

from __future__ import annotations

from ._calibration_store import (FAIL, PASS, UNREACHABLE, Calibration, Check, Cost, calibration_dir,
                                 calibration_fingerprint, find_calibration, fingerprint_key, label_for, run_label)
from ._context_cache import ContextCache
from ._ledger import Ledger
from ._rdb import (RETRIES, StaleTrials, check_services, log_stale, mask_secrets, mask_url, requeued, shared_lock,
                   trial_slot, worker_host)

__all__ = [
    "Calibration",
    "Check",
    "ContextCache",
    "Cost",
    "FAIL",
    "Ledger",
    "PASS",
    "RETRIES",
    "StaleTrials",
    "UNREACHABLE",
    "calibration_dir",
    "calibration_fingerprint",
    "check_services",
    "find_calibration",
    "fingerprint_key",
    "label_for",
    "log_stale",
    "mask_secrets",
    "mask_url",
    "requeued",
    "run_label",
    "shared_lock",
    "trial_slot",
    "worker_host",
]
