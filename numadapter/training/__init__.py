"""Training with TRL / transformers: the number trainers, their callbacks and pickle-free checkpoints.

- `sft`: `NumberSFTTrainer` (causal LMs, on `trl.SFTTrainer`); its docstring describes the loss path both trainers
  own (docs/DESIGN.md, "Own the loss path").
- `seq2seq`: `NumberSeq2SeqTrainer` (T5, on `transformers.Seq2SeqTrainer`).
- `base`: what both trainers share: the loss from the model's forward, component logging, generation during
  evaluation (`NumberEvalPrediction`, `NumberPredictionOutput`).
- `binding`: the trained `PeftModel` and its `NumberTokenizer` (checked against the adapter's config).
- `packing`: ``packing=True``: `pack_examples` and the padding-free `PackedCollator`.
- `callbacks`: `NumberLossCallback`, `ntl_loss_func` (NTL for a plain `trl.SFTTrainer`) and the loss meter.
- `safe_checkpoint`: optimizer / scheduler / RNG state as safetensors + JSON (docs/DESIGN.md, "Safe to load").
- `checkpoint_integrity`: atomic checkpoint writes and the checks before resuming.

This file imports nothing.
"""
