"""How many answers of each family FoNE's context head can form: a signed sum of the last K numbers before them
(``share``), and with ``fone_context_products`` also a product or exact quotient of two (``share_with_products``: the
answers ``fone_numbers="answers"`` writes as [NUM], copies included), and with the pointer (``share_by_pointer``:
a signed sum of any of the last 16, ``fone_context_pointer``, copies included).

No training: each family's held-out rows are tokenized with every number a [NUM] (its number places) and counted
with `numadapter.data.head_coverage` (the check `NumberSFTTrainer` warns with). The share bounds what the context head
can do on a family; what it cannot form it writes through its read-out, which does not learn exact numbers on a
pretrained base. ``python -m eval_harness.suite coverage`` writes ``<out>/coverage.json``; the report shows it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eval_harness.suite.families import FAMILIES, family_rows

COUNT = 4  # fone_context_numbers, the library's default


def family_coverage(name: str, tokenizer: Any, n: int = 200, seed: int = 0) -> dict[str, Any]:
    """The head's coverage of `n` held-out rows of a generated family: ``{"answers", "formed", "share"}``."""
    import datasets

    from numadapter import NumberAdapterConfig, NumberTokenizer, prepare_dataset
    from numadapter.data.head_coverage import head_coverage, head_share
    from numadapter.methods.fone.answer_mode import POINTER_SETTINGS

    found = FAMILIES[name]
    config = NumberAdapterConfig(encoding="fone", int_digits=found.int_digits, frac_digits=found.frac_digits,
                                 fone_numbers="all")  # fmt: skip
    _, held = family_rows(name, 0, n, seed)
    prepared = prepare_dataset(datasets.Dataset.from_list(held), NumberTokenizer(tokenizer, config))
    coverage = head_coverage(prepared, COUNT, limit=n)
    tool = NumberAdapterConfig(encoding="fone", int_digits=found.int_digits, frac_digits=found.frac_digits,
                               fone_numbers="answers", fone_context_products=True, fone_digit_answers=0.0,
                               fone_head_copies=True)  # every answer the head can form, copies included  # fmt: skip
    rows = datasets.Dataset.from_list(held)
    heads, answers = head_share(rows, NumberTokenizer(tokenizer, tool), prepare_dataset, n)
    pointed, _ = head_share(rows, NumberTokenizer(tokenizer, tool), prepare_dataset, n, settings=POINTER_SETTINGS)
    return {"answers": coverage.answers, "formed": coverage.formed, "share": coverage.share,
            "share_with_products": heads / answers if answers else 0.0,
            "share_by_pointer": pointed / answers if answers else 0.0}  # fmt: skip


def write_coverage(base: str, out: Path, n: int = 200) -> dict[str, dict[str, Any]]:
    """`family_coverage` of every generated family, written to ``<out>/coverage.json``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    result = {
        name: family_coverage(name, tokenizer, n) for name, found in FAMILIES.items() if found.draw or found.load
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "coverage.json").write_text(json.dumps(result, indent=1))
    return result
