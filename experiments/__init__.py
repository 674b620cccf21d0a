"""Experiments on the harness: Hydra configs (conf/), the synth_mutation sweep (Optuna ask/tell), A/B tests,
MLflow tracking and the per-trial ledger.

Entry point: `python -m experiments.run [+sweep=synth_mutation|prior_knowledge_ab|single] [overrides]`.
DictConfig stops in this package: experiments.config turns it into dataclasses (ExperimentConfig, HarnessConfig).
"""
