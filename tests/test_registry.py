"""The MLflow Prompt Registry (experiments/sweep/): a sweep registers its baseline and its promoted winner,
aliases move only on promotion, an unwritable registry loses nothing; synth.source resolves prompt URIs for the
sweep baseline, A/B arms and harness runs, whose record names the version."""

from __future__ import annotations

import dataclasses
import hashlib

import mlflow
import optuna
import pytest
from mlflow import MlflowClient
from scripted_harness import BASE, BOOST, ScriptedRunner, scripted_propose

from experiments.config import load_tasks
from experiments.config import ConfigError, compose_config, to_experiment
from experiments.config import registry_uri
from experiments.config._fingerprint import harness_hash
from experiments.runs import baseline_instructions
from experiments.sweep._study import open_study
from experiments.sweep import run_sweep
from experiments.sweep._registry import SweepRegistry, register_texts
from experiments.sweep._registry import _digest
from harness.synthesis import CHAMPION, PREVIOUS, prompt_name

optuna.logging.set_verbosity(optuna.logging.WARNING)

CHAMP = {"enumerated": "Champion list instruction.", "research": "Champion research instruction."}


def _sweep(exp, lines):
    return run_sweep(exp, ScriptedRunner(load_tasks(exp.benchmark)), propose=scripted_propose, out=lines.append)


def _versions(client, name):
    return {int(v.version): v for v in client.search_prompt_versions(name)}


def _aliases(client, name):
    return {a: int(v) for v in _versions(client, name) for a in client.get_prompt_version(name, v).aliases}


def _registry_line(lines):
    found = [ln for block in lines for ln in block.splitlines() if ln.startswith("registry: ")]
    assert len(found) == 1, found
    return found[0]


def _seed_registry(uri, prefix="harness"):
    """Version 1 = BASE, version 2 = CHAMP for each task type; champion -> 2, previous -> 1."""
    client = MlflowClient(tracking_uri=uri)
    register_texts(client, prefix, BASE, message="base", tags=lambda tt: {})
    register_texts(client, prefix, CHAMP, message="champ", tags=lambda tt: {})
    for tt in CHAMP:
        client.set_prompt_alias(prompt_name(prefix, tt), PREVIOUS, 1)
        client.set_prompt_alias(prompt_name(prefix, tt), CHAMPION, 2)
    return client


@pytest.fixture(scope="module")
def _seeded_store(tmp_path_factory):
    uri = f"sqlite:///{tmp_path_factory.mktemp('registry') / 'mlflow.db'}"
    _seed_registry(uri)  # creating an MLflow store takes seconds: once for the read-only tests
    return uri


@pytest.fixture
def seeded(_seeded_store, monkeypatch):
    """The tracking store (and so the registry) is a seeded one: see _seed_registry."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", _seeded_store)
    return _seeded_store


def _compose(*overrides):
    return to_experiment(compose_config(["backend=fake", *overrides]))


# -- the sweep writes the registry ------------------------------------------------------------------------


def test_promoting_sweep_registers_baseline_and_winner_with_evidence(make_exp):
    exp = make_exp("sweep.n_trials=6", mlflow=True)
    lines: list[str] = []
    s = _sweep(exp, lines)
    assert s.promoted
    uri = registry_uri(exp)
    client = MlflowClient(tracking_uri=uri)
    changed = [tt for tt in BASE if s.promoted_instructions[tt] != BASE[tt]]
    assert changed and any(BOOST in s.promoted_instructions[tt] for tt in changed)
    fingerprint = open_study(exp).user_attrs["fingerprint"]
    mlflow.set_tracking_uri(uri)
    try:
        for tt in BASE:
            name = prompt_name("harness", tt)
            versions = _versions(client, name)
            assert versions[1].template == BASE[tt] and versions[1].tags["role"] == "baseline"
            champ = mlflow.genai.load_prompt(f"prompts:/{name}@{CHAMPION}", cache_ttl_seconds=0)
            assert champ.template == s.promoted_instructions[tt]
            prev = mlflow.genai.load_prompt(f"prompts:/{name}@{PREVIOUS}", cache_ttl_seconds=0)
            assert prev.version == 1 and prev.template == BASE[tt]
            if tt not in changed:
                assert sorted(versions) == [1] and champ.version == 1
                continue
            assert sorted(versions) == [1, 2] and champ.version == 2
            tags = champ.tags
            assert tags["study"] == exp.sweep.name and tags["trial"] == str(s.promoted_trial)
            row = next(r for r in s.holdout if r.trial == s.promoted_trial)
            assert tags["operator"] == row.operator and tags["parent_version"] == "1"
            assert tags["candidate_hash"] == s.promoted_hash
            assert tags["backend"] == "scripted" and "producer=scripted-1" in tags["models"]
            assert tags["study_fingerprint"] == _digest(fingerprint)
            assert float(tags["holdout_mean"]) == pytest.approx(row.holdout_mean, abs=1e-3)
            assert float(tags["train_p_value"]) < exp.sweep.alpha
            assert float(tags["holdout_p_value"]) <= 1.0 and float(tags["holdout_diff"]) > 0
            for key in ("train_ci", "holdout_ci", "train_diff_ci", "holdout_diff_ci"):
                lo, hi = map(float, tags[key].strip("[]").split(","))
                assert lo <= hi
    finally:
        mlflow.set_tracking_uri(None)
    line = _registry_line(lines)
    assert "champion -> harness-synth-" in line and "synth.source=prompts:/harness@champion" in line
    assert line in (exp.sweep_dir / "summary.md").read_text()


def test_sweep_that_promotes_nothing_moves_no_alias(make_exp):
    exp = make_exp("sweep.n_trials=6", mlflow=True)
    first = _sweep(exp, [])
    assert first.promoted
    client = MlflowClient(tracking_uri=registry_uri(exp))
    before = {tt: (_aliases(client, prompt_name("harness", tt)), sorted(_versions(client, prompt_name("harness", tt))))
              for tt in BASE}

    again = make_exp("sweep.n_trials=5", "sweep.name=noise_only", operators=("noise",), mlflow=True)
    lines: list[str] = []
    s = _sweep(again, lines)
    assert not s.promoted
    after = {tt: (_aliases(client, prompt_name("harness", tt)), sorted(_versions(client, prompt_name("harness", tt))))
             for tt in BASE}
    assert after == before  # same baseline text: no new version; nothing promoted: no alias moved
    assert _registry_line(lines) == ("registry: baseline harness-synth-enumerated v1, harness-synth-research v1; "
                                     "no alias moved (nothing promoted)")


def test_unwritable_registry_keeps_promoted_yaml_and_says_why(make_exp, monkeypatch):
    from mlflow.exceptions import MlflowException

    def refuse(self, *a, **k):
        raise MlflowException("PERMISSION_DENIED: user may not create prompts\nsecond line")

    monkeypatch.setattr(MlflowClient, "register_prompt", refuse)
    exp = make_exp("sweep.n_trials=6", mlflow=True)
    lines: list[str] = []
    s = _sweep(exp, lines)
    assert s.promoted and BOOST in (exp.sweep_dir / "promoted_synth.yaml").read_text()
    line = _registry_line(lines)
    assert line.startswith(f"registry: NOT registered: trial #{s.promoted_trial}'s instructions at sqlite:///")
    assert line.endswith("MlflowException: PERMISSION_DENIED: user may not create prompts; "
                         "promoted_synth.yaml has them")
    assert any(ln.startswith(f"[{exp.sweep.name}] warning: registry: baseline not registered") for ln in lines)


@pytest.mark.parametrize("uri", ["sqlite:////proc/no-such-dir/mlflow.db", None])
def test_registry_that_cannot_be_created_or_is_off_is_one_line(make_exp, uri):
    exp = make_exp()
    exp.mlflow.enabled = uri is not None
    exp.mlflow.tracking_uri = uri
    reg = SweepRegistry(exp, {"producer": {"backend": "fake", "model": "m"}})
    warn = reg.register_baseline(BASE, {})
    line = reg.conclude(BASE, BASE, None)
    assert "\n" not in line
    if uri is None:
        assert warn is None and line == "the baseline instructions not registered (mlflow.enabled=false); " \
                                        "promoted_synth.yaml has them"
    else:
        assert warn.startswith(f"registry: baseline not registered at {uri}: ")
        assert line.startswith(f"NOT registered: the baseline instructions at {uri}: ")


def _enumerated_heavy(exp):
    """7 enumerated + 1 research train tasks, 6 enumerated holdout tasks (the fewest that can reach the first
    look's level 0.025): a win on enumerated alone can confirm."""
    from experiments.config import BenchmarkConfig
    from experiments.config._schema import TaskSpec

    tasks = [TaskSpec(id=f"t{i}", task=f"task number {i}", task_type="research" if i == 0 else "enumerated",
                      split="train" if i < 8 else "holdout") for i in range(14)]
    exp.benchmark = BenchmarkConfig(name="scripted-enumerated", tasks=tasks)
    return exp


def test_a_win_over_the_default_texts_moves_no_champion_and_an_unchanged_type_never_moves(make_exp):
    """Issue 31 item 6. The champion is CHAMP (v2) for both types; a sweep from the default texts (BASE) that changes
    only `enumerated` promotes. Before (6cbf984): enumerated's champion moved to a text never compared with CHAMP,
    and research's champion went back to the baseline text v1, which the study never changed."""
    exp = _enumerated_heavy(make_exp("sweep.n_trials=4", "sweep.mutate_task_types=[enumerated]", operators=("add_tool",),
                                     mlflow=True))
    client = _seed_registry(registry_uri(exp))
    lines: list[str] = []
    s = _sweep(exp, lines)
    assert s.promoted and s.promoted_instructions["research"] == BASE["research"]
    assert BOOST in s.promoted_instructions["enumerated"]
    for tt in BASE:  # both aliases stay where they were
        assert _aliases(client, prompt_name("harness", tt)) == {CHAMPION: 2, PREVIOUS: 1}
    assert sorted(_versions(client, "harness-synth-research")) == [1, 2]  # nothing registered for research
    new = _versions(client, "harness-synth-enumerated")[3]  # the win is kept as evidence, with the reason
    assert new.template == s.promoted_instructions["enumerated"]
    assert new.tags["champion_refused"] == "this study compared against v1 (its baseline), not the champion v2"
    line = _registry_line(lines)
    assert ("harness-synth-enumerated v3 registered, champion stays v2: this study compared against v1 (its "
            "baseline), not the champion v2") in line
    assert "unchanged, alias not moved: harness-synth-research" in line
    assert "no alias moved; to promote over the champion run from synth.source=prompts:/harness@champion" in line


def test_a_win_over_the_champion_moves_it_for_the_changed_type_only(make_exp):
    exp = _enumerated_heavy(make_exp("sweep.n_trials=4", "sweep.mutate_task_types=[enumerated]", operators=("add_tool",),
                                     mlflow=True))
    client = _seed_registry(registry_uri(exp))
    exp = _from_source(exp, "prompts:/harness@champion")  # the study's baseline is the champion
    lines: list[str] = []
    s = _sweep(exp, lines)
    assert s.promoted and s.promoted_instructions["research"] == CHAMP["research"]
    assert _aliases(client, "harness-synth-enumerated") == {CHAMPION: 3, PREVIOUS: 2}
    assert _versions(client, "harness-synth-enumerated")[3].template == s.promoted_instructions["enumerated"]
    assert "champion_refused" not in _versions(client, "harness-synth-enumerated")[3].tags
    assert _aliases(client, "harness-synth-research") == {CHAMPION: 2, PREVIOUS: 1}  # left unchanged: not moved
    line = _registry_line(lines)
    assert "champion -> harness-synth-enumerated v3 (previous v2)" in line
    assert "unchanged, alias not moved: harness-synth-research" in line


# -- synth.source ------------------------------------------------------------------------------------------


def test_source_forms_resolve_to_registered_texts(seeded):
    every = _compose("synth.source=prompts:/harness@champion")
    assert every.synth.instructions["enumerated"] == CHAMP["enumerated"]
    assert every.synth.instructions["research"] == CHAMP["research"]
    assert every.synth.instructions["best_practices"]  # not registered: the YAML text stays
    assert every.synth.resolved == {"enumerated": "prompts:/harness-synth-enumerated/2",
                                    "research": "prompts:/harness-synth-research/2"}
    one = _compose("synth.source=prompts:/harness-synth-research@previous")
    assert one.synth.instructions["research"] == BASE["research"]
    assert one.synth.resolved == {"research": "prompts:/harness-synth-research/1"}
    pinned = _compose("synth.source=prompts:/harness-synth-enumerated/2")
    assert pinned.synth.instructions["enumerated"] == CHAMP["enumerated"]
    # the source is provenance: two configs with the same texts have one objective hash
    plain = dataclasses.replace(pinned.synth, source=None, resolved={})
    assert harness_hash(dataclasses.replace(_compose(), synth=pinned.synth)) == \
        harness_hash(dataclasses.replace(_compose(), synth=plain))


@pytest.mark.parametrize("source, expected", [
    ("prompts:/nosuch-synth-research@champion",
     "no prompt named 'nosuch-synth-research'; registered synthesis prompts: harness-synth-enumerated, "
     "harness-synth-research"),
    ("prompts:/harness-synth-research@champ",
     "prompt 'harness-synth-research' has no alias 'champ'; versions: 1, 2; aliases: champion -> v2, previous -> v1"),
    ("prompts:/harness-synth-research/7", "has no version 7; versions: 1, 2;"),
    ("prompts:/harness@best", "none of harness-synth-enumerated, harness-synth-research has alias 'best'"),
    ("prompts:/other@champion", "no prompt other-synth-<task_type> is registered"),
    ("prompts:/harness/2", "a version pins one prompt"),
    ("harness@champion", "is not a prompt URI"),
])
def test_unknown_prompt_alias_or_version_is_one_line(seeded, source, expected):
    with pytest.raises(ConfigError) as err:
        _compose(f"synth.source={source}")
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert source in str(err.value)


def test_missing_registry_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"no prompt registry at sqlite:///.*nothing\.db \(no such file\)"):
        _compose("synth.source=prompts:/harness@champion", f"mlflow.tracking_uri=sqlite:///{tmp_path}/nothing.db")


def _from_source(exp, source):
    return to_experiment(dataclasses.replace(exp, synth=dataclasses.replace(exp.synth, source=source, resolved={})))


def test_sweep_baseline_from_a_source_and_its_resume_after_the_alias_moved(make_exp):
    exp = make_exp("sweep.n_trials=3", operators=("noise",), mlflow=True)
    client = _seed_registry(registry_uri(exp))
    exp = _from_source(exp, "prompts:/harness@champion")
    assert baseline_instructions(exp, ["enumerated", "research"]) == CHAMP
    lines: list[str] = []
    _sweep(exp, lines)
    for tt in CHAMP:
        assert sorted(_versions(client, prompt_name("harness", tt))) == [1, 2]  # the champion's texts: no new version
    assert _registry_line(lines).startswith("registry: baseline harness-synth-enumerated v2, harness-synth-research v2")

    for tt in CHAMP:  # the champion moves (another study promoted): the same command resumes from v2, not v1
        client.set_prompt_alias(prompt_name("harness", tt), CHAMPION, 1)
    resumed = _from_source(exp, "prompts:/harness@champion")
    assert resumed.synth.instructions["research"] == BASE["research"]
    resumed.sweep.n_trials = 4
    lines = []
    s = _sweep(resumed, lines)
    assert s.new_trials == 1 and s.baseline_instructions == CHAMP
    assert any("synth.source=prompts:/harness@champion now resolves to harness-synth-enumerated v1, "
               "harness-synth-research v1; this study started from harness-synth-enumerated v2, "
               "harness-synth-research v2 and continues with those" in ln for ln in lines)


def test_champion_ab_arms_resolve_their_aliases(seeded):
    from experiments.ab._design import arm_configs

    exp = _compose("+sweep=champion_ab")
    arms = arm_configs(exp)
    assert set(arms) == {"previous", "champion"}
    assert arms["previous"].synth.instructions["research"] == BASE["research"]
    assert arms["champion"].synth.instructions["research"] == CHAMP["research"]
    assert arms["champion"].synth.resolved["enumerated"] == "prompts:/harness-synth-enumerated/2"
    other = _compose("+sweep=champion_ab", "mlflow.prompt_prefix=nosuch")
    with pytest.raises(ConfigError, match=r"ab.a \(arm previous\): .*no prompt nosuch-synth-<task_type>"):
        arm_configs(other)


def test_champion_ab_is_one_command_to_a_verdict(seeded):
    from experiments.ab._entry import run_ab_from_config
    from experiments.tracking import NullTracker

    def arm(name, overrides, task, replication, seed):  # the champion scores 1 point more, little noise
        assert overrides == {"synth.source": f"prompts:/harness@{name}"}
        score = 5.0 + (1.0 if name == CHAMPION else 0.0) + 0.05 * (seed % 7)
        return {"score": score, "dimensions": {"depth": score}, "secondary": {}, "status": "ok", "meta": {}}

    lines: list[str] = []
    run = run_ab_from_config(_compose("+sweep=champion_ab"), run_arm=arm, tracker=NullTracker(),
                             out=lines.append)
    text = "\n".join(lines)
    assert run.result.verdict == "supported", run.result.verdict_reason
    assert run.result.arm_names == (PREVIOUS, CHAMPION) and "champion" in text


# -- the harness run record ---------------------------------------------------------------------------------


def test_run_record_names_the_resolved_prompt_version(seeded, tmp_path):
    from pipeline_fake import Router, config, make_harness

    synth = _compose("synth.source=prompts:/harness@champion").synth
    h = make_harness(tmp_path, Router(), cfg=config(tmp_path, synth=synth))
    result = h.run("List 5 best practices for Python asyncio and save to output.md")
    assert result.status == "ok" and result.record["plan"]["task_type"] == "enumerated"
    assert result.record["instruction"] == CHAMP["enumerated"]
    assert result.record["prompt"] == {
        "source": "prompts:/harness@champion", "uri": "prompts:/harness-synth-enumerated/2", "version": 2,
        "sha256": hashlib.sha256(CHAMP["enumerated"].encode()).hexdigest()[:12]}

    unresolved = dataclasses.replace(synth, resolved={})
    failed = make_harness(tmp_path, Router(), cfg=config(tmp_path, synth=unresolved)).run("List 5 asyncio tips")
    assert failed.status == "failed" and "synth.source=prompts:/harness@champion was not resolved" in failed.error
