"""The field's benchmark formats beside RMB's own: RewardBench, RewardBench 2 and RM-Bench, each read
into RMB's item model (one module per format), and ``formats.open_release``, the one way to open a release
or benchmark, that detects which."""
