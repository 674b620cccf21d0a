"""What a run was measured on, as MLflow shows it: the benchmark's splits as datasets, and a run's scores per task as
one table.

Each split of the benchmark (train, holdout) is an MLflow dataset named after the benchmark, with the split's tasks as
its rows (id, task, type, count, required terms), its digest a hash of those tasks (the study fingerprint's recipe:
the holdout's digest is the fingerprint's holdout sha256) and its source the benchmark's YAML. A run logs the splits
it ran on as inputs, context "train" or "holdout" (the runs page's Dataset column); the same tasks give the same
digest, so MLflow stores each split once per experiment and a changed task text is a new dataset.

The whole benchmark is also an MLflow evaluation dataset (mlflow.genai.datasets) linked to the experiment, which
the experiment's Datasets page lists: one record per task, its text the input, expected count and required terms
the expectations, id, split and type as tags; tag benchmark_sha256 the digest of every task. An experiment holds
one per digest (a resume adds none; an edited task is a new one). MLflow keeps evaluation datasets in a SQL
tracking store only (SQLite, the default, or a server): on a file store the run logs as before and one warning
says so (register_benchmark).

A run's per-task scores go to the artifact task_scores.json (MlflowClient.log_table: the UI's artifact view shows it
as a table), not to one metric per task: at 144 holdout tasks a metric per task drew 145 charts a run. The metrics a
user compares stay few (composite, n_tasks, ...).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlparse

from experiments.config import tasks_digest

TASK_SCORES = "task_scores.json"
CONTEXT_TAG = "mlflow.data.context"  # the input tag the UI reads as the dataset's context (mlflow.utils.mlflow_tags)
EVAL_DIGEST_TAG = "benchmark_sha256"  # an evaluation dataset's tag: the digest of every task of the benchmark


def split_digest(tasks: Sequence[Any]) -> str:
    """sha256 (16 hex) of the tasks' whole content, in order: the study fingerprint's own (tasks_digest)."""
    return tasks_digest(tasks)["sha256"]


def benchmark_source(name: str) -> str:
    """The benchmark's YAML: benchmark/<choice>.yaml in the config folders Hydra searched for this command (the
    project's conf/ and any on hydra.searchpath), else conf/benchmark/<name>.yaml of the project (a config composed
    outside a Hydra app, as tests do)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            runtime = HydraConfig.get().runtime
            choice = runtime.choices.get("benchmark") or name
            for src in runtime.config_sources:
                if src.schema == "file":
                    path = Path(src.path) / "benchmark" / f"{choice}.yaml"
                    if path.is_file():
                        return str(path.resolve())
    except (ImportError, ValueError, AttributeError, KeyError):  # no Hydra run here: the project's conf/ below
        pass
    project = Path(__file__).resolve().parents[2] / "conf" / "benchmark" / f"{name}.yaml"
    return str(project) if project.is_file() else f"conf/benchmark/{name}.yaml"


def split_input(name: str, split: str, tasks: Sequence[Any], source: str) -> Any:
    """One split's tasks as an mlflow.entities.DatasetInput with context `split` (mlflow.data.from_pandas infers the
    schema and the row count the UI shows)."""
    import mlflow.data
    import pandas as pd
    from mlflow.entities import Dataset, DatasetInput, InputTag

    frame = pd.DataFrame({"id": [t.id for t in tasks], "task": [t.task for t in tasks],
                          "task_type": [t.task_type for t in tasks],
                          "expected_count": [t.expected_count for t in tasks],
                          "required_terms": [", ".join(t.required_terms) for t in tasks]})
    with warnings.catch_warnings():  # a path resolves as a local source either way; MLflow warns that it could be two
        warnings.simplefilter("ignore", UserWarning)
        d = mlflow.data.from_pandas(frame, source=source, name=name, digest=split_digest(tasks)).to_dict()
    entity = Dataset(name=d["name"], digest=d["digest"], source_type=d["source_type"], source=d["source"],
                     schema=d.get("schema"), profile=d.get("profile"))
    return DatasetInput(entity, tags=[InputTag(CONTEXT_TAG, split)])


def benchmark_inputs(name: str, tasks: Iterable[Any], source: str) -> dict[str, Any]:
    """split -> its DatasetInput, for each split that has tasks, in the benchmark's order of splits."""
    by_split: dict[str, list[Any]] = {}
    for t in tasks:
        by_split.setdefault(t.split, []).append(t)
    return {s: split_input(name, s, ts, source) for s, ts in by_split.items()}


def evaluation_records(tasks: Iterable[Any]) -> list[dict[str, Any]]:
    """The benchmark's tasks as evaluation dataset records: inputs (the task's text), expectations (expected count,
    required terms: what the deterministic criteria check), tags (id, split, type)."""
    return [{"inputs": {"task": t.task},
             "expectations": {"expected_count": t.expected_count, "required_terms": list(t.required_terms)},
             "tags": {"id": t.id, "split": t.split, "task_type": t.task_type}} for t in tasks]


def _quoted(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def register_benchmark(client: Any, uri: str, experiment_id: str, name: str, tasks: Sequence[Any]) -> str:
    """The benchmark as an evaluation dataset of the experiment (the module docstring): found by its digest among
    the experiment's datasets, else one of the same name and digest elsewhere in the store linked to it, else
    created with its records. Returns "" when it is there, else one line saying why not (a file store keeps no
    evaluation datasets); never raises for MLflow's refusal, so the run logs all the same."""
    from mlflow.exceptions import MlflowException

    from ._traces import exporting_to

    sha = tasks_digest(tasks)["sha256"]
    by_digest = f"tags.{EVAL_DIGEST_TAG} = {_quoted(sha)}"
    try:
        found = list(client.search_datasets(experiment_ids=[experiment_id], filter_string=by_digest, max_results=1))
        if not found:
            found = list(client.search_datasets(filter_string=f"name = {_quoted(name)} AND {by_digest}",
                                                max_results=1))
            if found:
                client.add_dataset_to_experiments(found[0].dataset_id, [experiment_id])
        dataset = found[0] if found else client.create_dataset(
            name=name, experiment_id=[experiment_id], tags={EVAL_DIGEST_TAG: sha, "tasks": str(len(tasks))})
        # the records go through MLflow's process-wide tracking URI (EvaluationDataset.merge_records): this store's,
        # for the duration; a dataset left without records (a run stopped after creating it) gets them now
        with exporting_to(uri):
            if not client.get_dataset(dataset.dataset_id).has_records():
                dataset.merge_records(evaluation_records(tasks))
    except MlflowException as exc:
        why = str(exc).splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        file_store = "not supported with FileStore" in str(exc) or urlparse(uri).scheme in ("", "file")
        return (f"MLflow: the benchmark {name!r} is not registered as an evaluation dataset of the experiment "
                + ("(evaluation datasets need a SQL tracking store such as sqlite:///<file>; this one is a file "
                   "store); each run still logs its splits as input datasets" if file_store else f"({why})"))
    return ""


def task_table(scores: Mapping[str, float], tasks: Mapping[str, Any]) -> dict[str, list[Any]]:
    """A run's scores as table columns: task_id, split, task_type, score (one row per scored task; split and type
    empty for a task the benchmark no longer has)."""
    ids = list(scores)
    return {"task_id": ids,
            "split": [getattr(tasks.get(t), "split", "") for t in ids],
            "task_type": [getattr(tasks.get(t), "task_type", "") for t in ids],
            "score": [float(scores[t]) for t in ids]}


def log_task_table(client: Any, run_id: str, table: Mapping[str, list[Any]]) -> None:
    with warnings.catch_warnings():  # pandas 3's note on str columns inside MLflow's table check
        warnings.simplefilter("ignore")
        client.log_table(run_id, data=dict(table), artifact_file=TASK_SCORES)


def read_task_scores(client: Any, run_id: str) -> dict[str, float]:
    """task_id -> score from a run's task_scores.json ({} when the run has none)."""
    import tempfile

    if not any(f.path == TASK_SCORES for f in client.list_artifacts(run_id)):
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        path = client.download_artifacts(run_id, TASK_SCORES, tmp)
        table = json.loads(Path(path).read_text())
    col = table["columns"]
    return {row[col.index("task_id")]: float(row[col.index("score")]) for row in table["data"]}
