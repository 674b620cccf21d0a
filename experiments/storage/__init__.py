"""What a study keeps on disk between processes: the shared Optuna/MLflow stores and locks, the results ledger,
the per-task context cache and stored calibrations."""

from __future__ import annotations

from ._calibration_find import find_calibration, label_for, nearest_calibration, same_models_calibration
from ._calibration_store import (FAIL, PASS, UNREACHABLE, Calibration, Check, Cost, aa_tau, calibration_dir,
                                 calibration_fingerprint, edits_tau, fingerprint_key, run_label)
from ._context_cache import ContextCache
from ._ledger import Ledger
from ._rdb import (RETRIES, StaleTrials, check_services, log_stale, mask_secrets, mask_url, requeued, shared_lock,
                   trial_slot, worker_host)
from ._sqlite_files import HalfCreated, created_whole, guard_engines, locked_store, store_stop

__all__ = [
    "Calibration",
    "aa_tau",
    "Check",
    "ContextCache",
    "Cost",
    "FAIL",
    "HalfCreated",
    "Ledger",
    "PASS",
    "RETRIES",
    "StaleTrials",
    "UNREACHABLE",
    "calibration_dir",
    "calibration_fingerprint",
    "check_services",
    "created_whole",
    "edits_tau",
    "find_calibration",
    "fingerprint_key",
    "guard_engines",
    "label_for",
    "locked_store",
    "log_stale",
    "mask_secrets",
    "mask_url",
    "nearest_calibration",
    "requeued",
    "run_label",
    "same_models_calibration",
    "store_stop",
    "shared_lock",
    "trial_slot",
    "worker_host",
]
