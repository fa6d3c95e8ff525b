"""The modules that moved, by old path: read by `tests/numadapter/test_moved_modules.py` (each old path still imports)
and `tests/numadapter/test_import_graph.py` (the old paths are shims, left out of the graph's checks)."""

from __future__ import annotations

# old module -> the module it now hands out
MOVED = {
    "numadapter.cli": "numadapter.app.cli",
    "numadapter.recipe": "numadapter.app.recipe",
    "numadapter.quickstart": "numadapter.app.quickstart",
    "numadapter.toy": "numadapter.app.toy",
    "numadapter.hub": "numadapter.app.hub",
    "numadapter.callbacks": "numadapter.training.callbacks",
    "numadapter.safe_checkpoint": "numadapter.training.safe_checkpoint",
    "numadapter.checkpoint_integrity": "numadapter.training.checkpoint_integrity",
    "numadapter.zero": "numadapter.integrations.deepspeed_zero",
    "numadapter.distributed": "numadapter.integrations.launch",
    "numadapter.quantization": "numadapter.integrations.qlora",
    "numadapter.number_encoding": "numadapter.tokenization.encoding",
    "numadapter.number_decoding": "numadapter.tokenization.decoding",
    "numadapter.number_notes": "numadapter.tokenization.notes",
    "numadapter.tokenizer_options": "numadapter.tokenization.options",
    "numadapter.collator": "numadapter.data.collator",
    "numadapter.answer_format": "numadapter.data.answer_format",
    "numadapter.data_checks": "numadapter.data.checks",
}
SPLIT = {
    "numadapter.train": ("numadapter.app.commands", "numadapter.evaluation"),
    "numadapter.trainer": (
        "numadapter.training.sft",
        "numadapter.training.seq2seq",
        "numadapter.training.base",
        "numadapter.training.packing",
    ),
}
