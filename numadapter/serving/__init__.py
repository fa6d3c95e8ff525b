"""Serving an export with transformers: its config.json marks number exports, and numadapter teaches transformers
to load them.

- `marking`: what `numadapter.export_merged` writes into ``config.json`` (numadapter's own ``model_type`` and
  ``architectures`` when the [NUM] / [AGG] token carries values, so software without numadapter refuses the export)
  and how `numadapter.load_exported` reads the base's config back (plain JSON; it sits below the export, which
  writes it).
- `auto`: the config and loader classes registered with transformers' ``AutoConfig``, ``AutoModelForCausalLM`` and
  ``AutoModelForSeq2SeqLM``, so that after ``import numadapter``, ``from_pretrained(DIR)`` returns the
  `load_exported` model.
- `text_generation`: ``pipeline("text-generation")`` on a numadapter model gives the number-aware pipeline.

Registration happens as soon as transformers' auto classes or pipelines are imported in a process that imported
numadapter (`numadapter.integrations.import_hooks`). This file imports nothing.
"""
