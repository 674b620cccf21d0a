"""Helpers of bench/power/sensitivity.py and bench/power/ab_pairwise.py: the score model and its worlds (model), the
decision rules vectorised over simulated studies (rules), and the sweep's search and confirmation as designs
(design)."""
