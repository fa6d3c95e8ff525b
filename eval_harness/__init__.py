"""numadapter evaluation harness: the tasks of the FoNE, xVal, NTL and digit-aggregation papers, their metrics,
baselines and speed benchmarks. Entry point: ``python -m eval_harness --help``."""
