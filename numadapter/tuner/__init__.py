"""PEFT integration of numadapter: registration, the `NumberAdapterModel` tuner and its parts.

- `registration`: adds ``PeftType.NUMADAPTER`` and fills PEFT's mappings (version-guarded, at import).
- `peft_load_hooks`: PEFT's adapter loading wrapped, so a bad file fails naming the file and the fix.
- `model`: `NumberAdapterModel` (a `peft.LoraModel` subclass): binding, number rows and modules, forward.
- `patches`: per-architecture knowledge (embedding call sites, LM head, ties by storage, resize).
- `token_rows`: the [NUM] / [AGG] rows as PEFT trainable tokens with a sparse forward.
- `number_modules`: the per-adapter input module + head container.
- `side_buffer`, `forward_hooks`: how the number tensors reach the embedding during one call.
- `inputs`, `alignment`, `loss`: validation, the causal / T5 alignments, the loss and the output classes.

numadapter's ``PeftType`` name and value live in `numadapter.integrations.peft_type` (the config names it), and the
hook that runs `registration` when PEFT is imported in `numadapter.integrations.import_hooks`. Import the pieces from
their modules; this file stays free of imports, so that importing one piece loads nothing else.
"""
