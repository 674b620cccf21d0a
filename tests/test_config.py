from harness.config import HarnessConfig, apply_env, config_hash


def test_env_toggles_fold_into_config():
    cfg = apply_env(HarnessConfig(), {"HARNESS_SKIP_PRIOR_KNOWLEDGE": "1", "RESEARCH_CACHE": "true"})
    assert cfg.planner.skip_prior_knowledge and not cfg.planner.prior_knowledge_enabled
    assert cfg.research.reuse_cache
    off = apply_env(HarnessConfig(), {"HARNESS_SKIP_PRIOR_KNOWLEDGE": "0"})
    assert off.planner.prior_knowledge_enabled


def test_apply_env_does_not_mutate_input():
    base = HarnessConfig()
    apply_env(base, {"HARNESS_SKIP_PRIOR_KNOWLEDGE": "1"})
    assert base.planner.skip_prior_knowledge is False


def test_config_hash_changes_with_values():
    a, b = HarnessConfig(), HarnessConfig()
    assert config_hash(a) == config_hash(b)
    b.planner.temperature = 0.5
    assert config_hash(a) != config_hash(b)


def test_single_pass_disables_prior_knowledge():
    cfg = HarnessConfig()
    cfg.planner.mode = "single_pass"
    assert not cfg.planner.prior_knowledge_enabled
