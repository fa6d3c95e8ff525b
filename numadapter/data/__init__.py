"""Data: dataset preparation (`prepare_dataset`) and the collator (`NumberDataCollator`) of the number trainers.

The room holds `numadapter.data.prepare` (text datasets -> token ids and the numbers as sparse rows),
`numadapter.data.collator` (pads, truncates and masks every per-token column with the same slice as ``input_ids``),
`numadapter.data.answer_format` (one-number answers trained at the number head) and `numadapter.data.checks` (clear
errors for datasets that leave nothing to train on); `numadapter.data.arithmetic` generates arithmetic tasks.
docs/DESIGN.md, "Data", describes them.
"""

from numadapter.data.prepare import (
    TOKEN_COLUMNS,
    detect_format,
    drop_markers,
    number_groups,
    prepare_dataset,
    prepared_features,
)

__all__ = ["TOKEN_COLUMNS", "detect_format", "drop_markers", "number_groups", "prepare_dataset", "prepared_features"]
