"""What a calibration leaves behind besides its JSON record: plots and one MLflow parent run."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from experiments.config import ExperimentConfig
from experiments.storage import Calibration


def safe_plots(cal: Calibration, folder: Path, out: Callable[[str], None], name: str) -> dict[str, Path]:
    try:
        from experiments.tracking import calibration_plots

        return calibration_plots(cal, folder)
    except Exception as exc:  # the calibration stands without its pictures
        out(f"[{name}] warning: plots failed: {type(exc).__name__}: {exc}")
        return {}


def log_mlflow(exp: ExperimentConfig, cal: Calibration, text: str, plots: Mapping[str, Path]) -> str:
    """One parent run (no children) in experiment mlflow.experiment or sweep.name; returns the UI command."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    from experiments.config import tracking_uri
    from experiments.tracking import trial_params, ui_command
    from harness.stores import enable_wal, sqlite_db, store_lock

    uri = tracking_uri(exp)
    db = sqlite_db(uri)
    name = exp.mlflow.experiment or exp.sweep.name
    with store_lock(db):
        if db is not None:
            enable_wal(db)
        client = MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(name)
        exp_id = found.experiment_id if found is not None else client.create_experiment(
            name, artifact_location=(Path(exp.results_dir) / "mlartifacts").resolve().as_uri())
    tags = {"kind": "calibration", "fingerprint": cal.key, "benchmark": exp.benchmark.name,
            "passed": str(cal.passed).lower(), "mlflow.runName": f"calibration-{cal.key}"}
    if cal.smoke:
        tags["smoke"] = "true"
    rid = client.create_run(exp_id, tags=tags).info.run_id
    params = {**trial_params(exp), **{f"calibrate.{k}": v for k, v in dataclasses.asdict(exp.calibrate).items()}}
    client.log_batch(rid, params=[Param(k, str(v)[:6000]) for k, v in params.items()])
    metrics: dict[str, Any] = {
        "sigma": cal.sigma, "judge_sigma": cal.judge_sigma, "aa_diff": cal.aa.mean_diff, "aa_p": cal.aa.p,
        "control_diff": cal.control.mean_diff, "control_p": cal.control.p, "passed": float(cal.passed),
        "cost_llm_calls": cal.cost.llm_calls, "cost_uncached_calls": cal.cost.uncached_calls,
        "cost_tokens": cal.cost.tokens, "cost_wall_s": cal.cost.wall_s, "elapsed_s": cal.elapsed_s,
        **{f"mde_{k}": v["mde"] for k, v in cal.mde.items()},
        **{f"judge_sd.{k}": v for k, v in cal.judge_dimensions.items()},
        **{f"generator_sd.{k}": v for k, v in cal.generator_dimensions.items()},
        **{f"needed_{k}": v for k, v in cal.needed.items() if isinstance(v, (int, float))},
        **({"control_tau": cal.heterogeneity["tau"], "control_effect_cv": cal.heterogeneity["effect_cv"]}
           if cal.heterogeneity else {}),
        **({"edits_k": cal.edits["k"], "edits_largest_tau": cal.edits["largest_tau"]} if cal.edits else {}),
    }
    now = int(time.time() * 1000)
    items = [Metric(k, float(v), now, 0) for k, v in metrics.items()
             if isinstance(v, (int, float)) and math.isfinite(float(v))]
    client.log_batch(rid, metrics=items)
    client.log_text(rid, text + "\n", "summary.md")
    client.log_text(rid, json.dumps(cal.to_dict(), indent=2, sort_keys=True, default=str), "calibration.json")
    for p in plots.values():
        client.log_artifact(rid, str(p), "plots")
    client.set_terminated(rid, status="FAILED" if cal.failed_out else "FINISHED")
    return ui_command(uri)
