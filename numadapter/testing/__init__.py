"""The test kit: small local tokenizers and tiny pretrained bases, built offline in seconds.

- `toy`: byte-level BPE and Unigram tokenizers trained on a built-in corpus with numbers (``"digits"``, ``"llama3"``,
  ``"t5"``), and that corpus.
- `tiny_base`: a tiny Llama / Granite pretrained on generated text with numbers (`build_tiny_base`) and its sizes.

The tests, eval_harness, the benchmarks and ``numadapter quickstart --tiny`` share them. This file imports nothing.
"""
