"""The examples behind ``tests/fixtures/prepared_v0/``: datasets prepared by numadapter 0.1.0's dense
``prepare_dataset`` (one number row per token), kept so that today's collator can be checked against them.

``dense_rows.json`` holds the rows; ``t5_tokenizer/`` the T5 tokenizer they were made with (the toy T5 tokenizer's
ids changed from process to process then, so it is stored; the other toy tokenizers are rebuilt).

Each case names the tokenizer kind, the number settings, the `prepare_dataset` arguments and the rows. The fixture
holds, per case, the prepared rows exactly as the dense version wrote them (``input_ids``, ``num_mask``,
``num_digits`` ``[T][P]``, ``num_sign``, ``num_values``, ``number_group``, ``completion_mask``; T5: ``labels`` and
``labels_*``).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile

from helpers import tiny
from helpers.paths import FIXTURES
from numadapter.config import NumberAdapterConfig
from numadapter.tokenization import NumberTokenizer

FIXTURE_DIR = str(FIXTURES / "prepared_v0")
FIXTURE = os.path.join(FIXTURE_DIR, "dense_rows.json")

PROMPT_COMPLETION = [
    {"prompt": "Add 12.5 and -7:", "completion": " 5.5"},
    {"prompt": "What is 3 plus 4? Answer:", "completion": " 7"},
    {"prompt": "No numbers here:", "completion": " none at all"},
    {"prompt": "Big 123456 stays text, then 1,234:", "completion": " -0.25 and 8"},
    {"prompt": "x", "completion": " 42"},
    {"prompt": "Total: 12", "completion": "34 apples"},
]
TEXTS = [
    {"text": "aa 1234 bb -5 cc 77.5 dd"},
    {"text": "no digits at all"},
    {"text": "H2O is 18.02 g/mol, -3.5 and 99"},
]

CASES: dict[str, dict] = {
    "fone": {"kind": "digits", "settings": {"encoding": "fone"}, "rows": PROMPT_COMPLETION},
    "fone_sign_feature": {
        "kind": "llama3",
        "settings": {"encoding": "fone", "sign_policy": "feature"},
        "rows": PROMPT_COMPLETION,
    },
    "xval": {
        "kind": "digits",
        "settings": {"encoding": "xval", "sign_policy": "feature", "xval_scale": 100.0},
        "rows": PROMPT_COMPLETION,
    },
    "digits_aggregate": {
        "kind": "digits",
        "settings": {"encoding": "digits", "aggregate": True},
        "rows": PROMPT_COMPLETION,
    },
    "digits_plain": {"kind": "digits", "settings": {"encoding": "digits"}, "rows": PROMPT_COMPLETION},
    "text_truncated_fone": {
        "kind": "digits",
        "settings": {"encoding": "fone"},
        "rows": TEXTS,
        "prepare": {"max_length": 9, "truncation_mode": "keep_end"},
    },
    "text_truncated_digits_aggregate": {
        "kind": "digits",
        "settings": {"encoding": "digits", "aggregate": True},
        "rows": TEXTS,
        "prepare": {"max_length": 10},
    },
    "t5_fone": {"kind": "t5", "settings": {"encoding": "fone"}, "rows": PROMPT_COMPLETION, "seq2seq": True},
    "t5_digits_aggregate": {
        "kind": "t5",
        "settings": {"encoding": "digits", "aggregate": True},
        "rows": PROMPT_COMPLETION,
        "seq2seq": True,
        "prepare": {"max_target_length": 8},
    },
}

# Cases whose 0.1.0 rows no longer show what this version prepares, and cannot be rebuilt from them by hand.
RETIRED = {
    # 0.1.0 put [AGG] in language-modeling text, whose every digit is trained, so it leaked them; such data now gets
    # no [AGG] (numadapter.data.prepare.trains_every_token), and the 10-token cut of a row with three [AGG] fewer
    # keeps tokens that 0.1.0's row never held. test_collator's every-token test covers the case instead.
    "text_truncated_digits_aggregate",
}
COMPARED = {name: case for name, case in CASES.items() if name not in RETIRED}


@functools.cache
def _base(kind: str):
    if kind == "t5":
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(os.path.join(FIXTURE_DIR, "t5_tokenizer"))
    return tiny.build_tokenizer(kind, tempfile.mkdtemp(prefix=f"prepared-{kind}-"))


def number_tokenizer(name: str) -> NumberTokenizer:
    """The case's NumberTokenizer (4 integer and 2 fraction places)."""
    case = CASES[name]
    settings = dict(case["settings"])
    if settings["encoding"] == "fone":  # the fixtures hold every number as a [NUM] (fone_numbers="all")
        settings.setdefault("fone_numbers", "all")
    config = NumberAdapterConfig(int_digits=4, frac_digits=2, **settings)
    return NumberTokenizer(tiny.copy_tokenizer(_base(case["kind"])), config)


def prepare(name: str, **overrides) -> list[dict]:
    """The case's rows prepared by this version's `prepare_dataset`."""
    import datasets

    from numadapter.data import prepare_dataset

    case = CASES[name]
    kwargs = {"seq2seq": case.get("seq2seq", False), **case.get("prepare", {}), **overrides}
    return list(prepare_dataset(datasets.Dataset.from_list(case["rows"]), number_tokenizer(name), **kwargs))


def load_fixture() -> dict[str, list[dict]]:
    """``{case: [dense row, ...]}`` as the dense version prepared them, with one later change applied by hand.

    0.1.0 put an [AGG] before the completion's (and a T5 target's) numbers too, which fed the model the answer's
    own digits; since then only the prompt's numbers carry one (`numadapter.data.drop_markers`). The fixture keeps
    0.1.0's rows, and `_without_answer_markers` removes those [AGG] tokens here, written apart from the library.
    """
    with open(FIXTURE, encoding="utf-8") as fh:
        cases = json.load(fh)["cases"]
    for name, rows in cases.items():
        agg = number_tokenizer(name).agg_token_id if CASES[name]["settings"].get("aggregate") else None
        if agg is not None and CASES[name]["rows"] is PROMPT_COMPLETION:
            cases[name] = [_without_answer_markers(row, agg) for row in rows]
    return cases


def _without_answer_markers(row: dict, agg: int) -> dict:
    """`row` with the [AGG] tokens of its completion (``completion_mask`` 1) or of its ``labels`` side removed."""
    row = dict(row)
    if "labels" in row:  # T5: every target [AGG] goes, with its label-side number rows
        keep = [t for t, i in enumerate(row["labels"]) if i != agg]
        # a target cut at max_target_length now has room for one more token, which 0.1.0's row cannot show
        row["cut_before_more"] = len(keep) < len(row["labels"]) and row["labels"][-1] != 1  # 1: T5's eos
        for key in [k for k in row if k == "labels" or k.startswith("labels_")]:
            row[key] = [row[key][t] for t in keep] if row[key] else row[key]
        return row
    keep = [t for t, i in enumerate(row["input_ids"]) if not (i == agg and row["completion_mask"][t])]
    for key in ("input_ids", "completion_mask", "num_mask", "num_digits", "num_sign", "num_values", "number_group"):
        row[key] = [row[key][t] for t in keep] if row.get(key) else row.get(key)
    return row
