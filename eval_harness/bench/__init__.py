"""Speed benchmarks. Each module has ``run(...) -> dict`` (for an aggregate runner) and ``main()`` (CLI):

- ``tokenizer_speed``: NumberTokenizer vs the raw fast tokenizer on number-heavy text
  (``python -m eval_harness.bench.tokenizer_speed``).
- ``ntl_overhead``: cross-entropy alone vs cross-entropy + Number Token Loss
  (``python -m eval_harness.bench.ntl_overhead``).
"""
