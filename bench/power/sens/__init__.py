"""Helpers of bench/power/sensitivity.py (issue 42): the score model and its worlds (model), the decision rules
vectorised over simulated studies (rules), and the sweep's search and confirmation as designs (design)."""
