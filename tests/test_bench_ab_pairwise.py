"""bench/power/ab_pairwise.py's vectorised rules agree with the A/B's real tests (experiments.stats.signflip_test,
paired_ttest), and the script prints its table."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.power.sens.rules import signflip_p, t_p_two_sided  # noqa: E402
from experiments.stats import paired_ttest, signflip_test  # noqa: E402


@pytest.mark.parametrize("reps", [1, 2, 3])
def test_signflip_p_equals_the_exact_signflip_test_on_random_preference_rows(reps):
    rng = np.random.default_rng(reps)
    step = 0.5 / reps  # a task's mean preference over reps pairs, each in {-1, -1/2, 0, 1/2, 1}
    for n in range(1, 17):
        rows = rng.integers(-2 * reps, 2 * reps + 1, size=(25, n)) * step
        rows[0] = 0.0  # all ties: p 1
        rows[1] = np.abs(rows[1]) + step  # one sign only: p 2 / 2^n
        got = signflip_p(rows, step)
        want = np.array([signflip_test(r).pvalue for r in rows])
        np.testing.assert_array_equal(got, want)
        assert got[1] == min(1.0, 2 / 2 ** n)


def test_signflip_p_keeps_the_leading_axes_and_refuses_values_off_the_lattice():
    x = np.array([[[1.0, 0.5, -0.5, 1.0]] * 3] * 2)
    assert signflip_p(x, 0.5).shape == (2, 3)
    with pytest.raises(ValueError, match="multiples of step 0.5"):
        signflip_p(np.array([[0.25, 1.0]]), 0.5)
    with pytest.raises(ValueError, match="exact up to 40"):
        signflip_p(np.ones((1, 41)), 1.0)


def test_t_p_two_sided_equals_paired_ttest_constant_rows_included():
    rng = np.random.default_rng(7)
    rows = rng.normal(0.2, 1.0, size=(40, 12))
    rows[0] = 0.0
    rows[1] = 0.5
    got = t_p_two_sided(rows)
    want = np.array([paired_ttest(r).pvalue for r in rows])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)


def test_the_script_prints_a_row_per_design_and_agrees_with_the_real_rules(capsys):
    from bench.power.ab_pairwise import main

    assert main(["--sims", "200", "--worlds", "test", "--ns", "12", "--check", "20"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 12 |")]
    assert len(rows) == 8
    assert "pointwise t, 4 reps (equal calls)" in out and "pairwise sign-flip, g=0.17" in out
    assert "disagree on 0 of 160 A/Bs" in out
