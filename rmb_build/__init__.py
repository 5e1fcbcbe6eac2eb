"""rmb_build: build, audit, publish and evaluate RMB-style reward-model benchmarks."""

__version__ = "0.1.0"
