"""The paired A/B test of two harness variants on the same tasks: its design and pre-registration, the cells and
their ledger, the analysis and verdict, the side-by-side judge, the preflight and the report.

Product code calls two names: check_ab_design (the config's design check, before anything runs) and run_ab_test
(the whole A/B, from experiments.run). Tests and bench import the parts from their modules by path."""

from __future__ import annotations

from ._design import check_ab_design
from ._entry import run_ab_test

__all__ = ["check_ab_design", "run_ab_test"]
