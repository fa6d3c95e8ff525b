"""Speed benchmarks. Each module has ``run(...) -> dict`` (for the aggregate runner) and ``main(argv)`` (CLI); each
measures its sides in one run (interleaved repetitions in rotating order) and prints their ratios:

- ``table_tokens``: tokens per table and per number on generated numeric tables, digit-wise vs Llama-3-style
  subword vs FoNE / xVal (one [NUM] per number); deterministic counts, no timing
  (``python -m eval_harness.bench.table_tokens``).
- ``tokenizer_speed``: NumberTokenizer vs the raw fast tokenizer on number-heavy text
  (``python -m eval_harness.bench.tokenizer_speed``).
- ``train_step``: one training step of the number adapter vs LoRA alone (``python -m eval_harness.bench.train_step``).
- ``ntl_overhead``: cross-entropy alone vs cross-entropy + Number Token Loss
  (``python -m eval_harness.bench.ntl_overhead``).
- ``generate_speed``: per-token time of ``numadapter.generation.generate`` vs transformers' ``generate``
  (``python -m eval_harness.bench.generate_speed``).
- ``train_throughput``: training throughput from scratch, FoNE vs digit-wise vs subword (FoNE Table 1: time per
  epoch) (``python -m eval_harness.bench.train_throughput``).
- ``real``: the real checkpoint (SmolLM2-135M-Instruct, `numadapter.smollm2_path`): a training step of the number
  adapter vs LoRA alone, epoch time of digit tokens vs FoNE, ``model.generate`` adapted vs base per token, and the
  adapter's trainable parameters / saved bytes / peak RSS vs LoRA's; opt-in in the aggregate runner (``--real``)
  (``python -m eval_harness.bench.real``).
- ``import_time``: ``import numadapter`` vs loading every public name, in fresh interpreters; not in the aggregate
  runner (``python -m eval_harness.bench.import_time``).

All at once, with ``bench.json`` and ``bench.md`` (headline ratios against their targets, machine info):
``python -m eval_harness.bench [--out eval_harness/results/bench] [--quick] [--only table_tokens,train_step]
[--threads 1 --clock thread] [--device cuda]`` (see `eval_harness.bench.all`).
"""
