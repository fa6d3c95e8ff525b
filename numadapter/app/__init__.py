"""The application built on the numadapter library: the ``numadapter`` command, its recipes, the quick start.

- `cli`: the ``numadapter`` command line (``numadapter = "numadapter.app.cli:main"``; also
  ``python -m numadapter.app.cli``).
- `recipe`: one YAML file mapped onto the library's dataclasses (`NumberAdapterConfig`, TRL's ``SFTConfig`` or
  ``Seq2SeqTrainingArguments``) plus model / data / eval / export settings; `RecipeError`.
- `commands`: what ``numadapter train | eval | export`` run: recipe -> base model, data, trainer, metrics, export.
- `hub`: before loading a model named in a recipe: is it local, cached or reachable (one clear error).
- `quickstart`: the offline demo (``numadapter quickstart``): FoNE + LoRA against LoRA only.

The toy tokenizers and tiny bases are the test kit `numadapter.testing`, the quick start's data
`numadapter.data.arithmetic`.

The library (every other module of `numadapter`) never imports this package
(``tests/numadapter/test_import_graph.py``). This file imports nothing, so ``numadapter --help`` stays light.
"""
