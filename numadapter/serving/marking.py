"""The ``config.json`` of an export: marked when its numbers need numadapter, the base's own otherwise.

A plain transformers load of a FoNE / xVal / [AGG] export would run: the [NUM] token is a special token, dropped from
the decoded text, and the LM's next digit tokens follow, so numbers come out wrong with no warning. So
`numadapter.export_merged` writes such an export's ``config.json`` with numadapter's own names:

- ``model_type``: ``"numadapter-<base model_type>"`` (``"numadapter-llama"``), which transformers does not know
  without numadapter: ``AutoConfig``, ``AutoModel*.from_pretrained`` and ``pipeline`` refuse it, and their message
  quotes the model_type, so it names numadapter;
- ``architectures``: ``"Numadapter" + <base class>`` (``["NumadapterLlamaForCausalLM"]``), so engines that pick a
  class by architecture find none;
- ``"numadapter"``: the base's ``model_type`` and ``architectures`` and a note saying how to load the export.

The rest of the file is the base's config, unchanged. `base_config` undoes the marking for `load_exported` (and for
exports written before marking existed, whose ``config.json`` is the base's, it returns the file as it is).

Exports whose numbers are ordinary digit tokens (``encoding="digits"`` without [AGG], or a FoNE answers-mode adapter
whose trainer left the head out, ``fone_head_in_use=False``) are left unmarked: transformers without numadapter
serves them with the answers numadapter gives (`needs_numadapter`).
"""

from __future__ import annotations

from typing import Any

PREFIX = "numadapter-"  # model_type prefix of a marked config.json
CLASS_PREFIX = "Numadapter"  # architectures prefix
FIELD = "numadapter"  # the config.json field with the base's names
NOTE = (
    "A numadapter export: its number token carries values that only numadapter reads and writes, so transformers "
    "without numadapter would write wrong numbers. Load it after `import numadapter` (pip install numadapter), with "
    "AutoModelForCausalLM.from_pretrained(DIR), pipeline('text-generation', model=DIR) or "
    "numadapter.load_exported(DIR)."
)


def needs_numadapter(config: Any) -> bool:
    """Whether an export of an adapter with `config` (a `NumberAdapterConfig`) has a token that carries values.

    True for FoNE and xVal ([NUM]) and digits with ``aggregate`` ([AGG]); False for plain digits and for a FoNE
    answers-mode adapter whose trainer left the head out, which write every number as digit tokens.
    """
    from numadapter.methods.fone.answer_mode import head_left_out
    from numadapter.tuner.number_modules import marker_token_id

    return marker_token_id(config) is not None and not head_left_out(config)


def marked_model_type(base_model_type: str) -> str:
    """``"llama"`` -> ``"numadapter-llama"``."""
    return PREFIX + base_model_type


def mark(config: dict[str, Any]) -> dict[str, Any]:
    """The marked form of a base ``config.json`` (see the module docstring); `config` itself is not changed."""
    base_type = config["model_type"]
    architectures = list(config.get("architectures") or [])
    marked = {key: value for key, value in config.items() if key not in ("model_type", "architectures")}
    marked["model_type"] = marked_model_type(base_type)
    marked["architectures"] = [CLASS_PREFIX + name for name in architectures]
    marked[FIELD] = {"base_model_type": base_type, "base_architectures": architectures, "note": NOTE}
    return marked


def base_model_type(model_type: Any) -> Any:
    """``"numadapter-llama"`` -> ``"llama"``; any other value is returned as it is."""
    if isinstance(model_type, str) and model_type.startswith(PREFIX):
        return model_type[len(PREFIX) :]
    return model_type


def is_marked(config: dict[str, Any]) -> bool:
    """Whether a ``config.json`` carries numadapter's model_type."""
    return base_model_type(config.get("model_type")) != config.get("model_type")


def base_config(config: dict[str, Any]) -> dict[str, Any]:
    """The base's ``config.json`` inside a marked one (`config` unchanged when it is not marked).

    The base's architectures come from the ``"numadapter"`` field, or, when the field was deleted, from the
    architectures with numadapter's prefix removed.
    """
    if not is_marked(config):
        return dict(config)
    field = config.get(FIELD) if isinstance(config.get(FIELD), dict) else {}
    base = {key: value for key, value in config.items() if key != FIELD}
    base["model_type"] = base_model_type(config["model_type"])
    architectures = field.get("base_architectures")
    if not isinstance(architectures, list):
        architectures = [name.removeprefix(CLASS_PREFIX) for name in config.get("architectures") or []]
    base["architectures"] = architectures
    return base


def unreachable_ids(config: Any) -> list[int]:
    """Token ids an unmarked export must never generate: the [NUM] of a FoNE adapter whose head was left out.

    numadapter's forward sets that logit to -inf (`numadapter.tuner.model`); a plain engine reads the merged LM head,
    so the export lists the id in ``generation_config.json``'s ``suppress_tokens``, which transformers applies.
    """
    from numadapter.methods.fone.answer_mode import head_left_out
    from numadapter.tuner.number_modules import marker_token_id

    marker = marker_token_id(config)
    return [marker] if marker is not None and head_left_out(config) else []


def write_config(directory: str, config: Any) -> dict[str, Any]:
    """Marks ``<directory>/config.json`` (written by ``save_pretrained``) when `needs_numadapter`; returns the
    ``config.json`` as it now is, which the export records in ``number_config.json``."""
    import json
    import os

    file = os.path.join(directory, "config.json")
    with open(file, encoding="utf-8") as handle:
        written = json.load(handle)
    if needs_numadapter(config):
        written = mark(written)
        with open(file, "w", encoding="utf-8") as handle:
            json.dump(written, handle, indent=2, sort_keys=True)
            handle.write("\n")
    return written
