"""`numadapter.schema`: the side-tensor names and containers, the same objects wherever a module takes them."""

from __future__ import annotations

from numadapter.schema import IGNORE_INDEX, NumberInputs, NumberTargets


def test_the_schema_is_importable_where_it_was():
    import numadapter.data.answer_format
    import numadapter.data.collator
    import numadapter.training.callbacks
    import numadapter.tuner.alignment
    import numadapter.tuner.side_buffer

    for module in (
        numadapter.data.collator,
        numadapter.data.answer_format,
        numadapter.training.callbacks,
        numadapter.tuner.alignment,
    ):
        assert module.IGNORE_INDEX == IGNORE_INDEX == -100
    assert numadapter.tuner.side_buffer.NumberInputs is NumberInputs
    assert numadapter.tuner.alignment.NumberTargets is NumberTargets
