"""The downstream check (``rmb downstream``): does a benchmark's accuracy predict how well a reward model
picks the best of N samples of a policy?

``best_of_k`` holds the arithmetic (exact expected grade of an RM's pick, curves, bounds, intervals,
correlations across RMs), ``config`` the YAML, ``run`` the pipeline (samples, grades and RM scores,
all cached), ``outputs`` downstream.json, report.md and the two plots.
"""
