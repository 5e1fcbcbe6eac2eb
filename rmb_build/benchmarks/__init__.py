"""The field's benchmark formats beside RMB's own: RewardBench, RewardBench 2 and RM-Bench, each read
into RMB's item model (one module per format, registering its ``base.BenchmarkFormat`` in
``BENCHMARK_FORMATS``), and ``formats.open_release``, the one way to open a release or benchmark, that
detects which."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmb_build.core.registry import Registry

if TYPE_CHECKING:
    from rmb_build.benchmarks.base import BenchmarkFormat

BENCHMARK_FORMATS: Registry[BenchmarkFormat] = Registry("benchmark format", __name__)
