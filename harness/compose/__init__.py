"""A run's configuration put together: Hydra composes conf/ with the command line's overrides against the typed
schema (harness.config), the environment toggles are applied, synth.source is read from the Prompt Registry, and
every harness setting is checked (one line naming the key, the value and what is allowed), with the judge
warnings. Above the stages: the checks ask the backend registry which kinds exist and what `auto` resolves to.

- _hydra: `compose_hydra`, `harness_config`, `command_line_environ`.
- _checks: `check_harness` and the checks it is made of (`check_choice`, `check_range`, `check_positive`), and the judge
  warnings (`judge_warnings`, `warn_judge`, `warn_once`, `model_family`).
"""

from ._checks import check_choice, check_harness, check_positive, check_range, model_family, warn_judge
from ._hydra import command_line_environ, compose_hydra, harness_config

__all__ = [
    "compose_hydra",
    "harness_config",
    "command_line_environ",
    "check_choice",
    "check_range",
    "check_positive",
    "check_harness",
    "warn_judge",
    "model_family",
]
