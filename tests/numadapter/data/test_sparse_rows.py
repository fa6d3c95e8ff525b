"""Sparse number rows in prepared datasets: the collator gives the batches the dense rows of 0.1.0 gave.

The dense rows come from `tests/fixtures/prepared_v0` (written by 0.1.0's `prepare_dataset`, cases in
`tests/helpers/prepared_cases.py`) and, for random texts, from `NumberTokenizer`'s own per-token output.
"""

from __future__ import annotations

import functools

import datasets
import pytest
import torch
from helpers import prepared_cases as pc
from helpers.strategies import TEXT  # random texts of words and numbers (signs, decimals, thousands separators)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numadapter.data import number_groups, prepare_dataset
from numadapter.data.collator import NumberDataCollator
from numadapter.training.packing import PackedCollator, pack_examples

CAUSAL = [name for name, case in pc.COMPARED.items() if not case.get("seq2seq")]
SEQ2SEQ = [name for name, case in pc.COMPARED.items() if case.get("seq2seq")]
HEAD = [name for name in CAUSAL if pc.COMPARED[name]["settings"]["encoding"] != "digits"]
DENSE_KEYS = ("num_mask", "num_digits", "num_sign", "num_values", "number_group")


@functools.cache
def fixture() -> dict[str, list[dict]]:
    return pc.load_fixture()


@functools.cache
def sparse(name: str) -> tuple[dict, ...]:
    return tuple(pc.prepare(name))


def outcome(collate, rows) -> dict[str, torch.Tensor] | str:
    """The batch, or the error message when the collator refuses."""
    try:
        return dict(collate(list(rows)))
    except ValueError as error:
        return str(error)


def assert_same(got, want) -> None:
    if isinstance(want, str):
        assert got == want
        return
    assert not isinstance(got, str), got
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key].dtype == want[key].dtype, key
        assert torch.equal(got[key], want[key]), key


@pytest.mark.parametrize("name", list(pc.COMPARED))
def test_the_sparse_rows_hold_the_dense_rows_ids_and_one_entry_per_number(name):
    for new, old in zip(sparse(name), fixture()[name], strict=True):
        if old.get("cut_before_more"):  # see prepared_cases.load_fixture: compare what 0.1.0's row shows
            assert len(new["labels"]) == len(old["labels"]) + 1
            new = {**new, "labels": new["labels"][:-1]}
        for key in ("input_ids", "labels", "completion_mask"):
            assert new.get(key) == old.get(key), key
        for prefix in ("", "labels_") if "labels" in old else ("",):
            mask = old[prefix + "num_mask"]
            positions = [t for t, flag in enumerate(mask) if flag]
            assert new[prefix + "number_positions"] == positions
            assert new[prefix + "number_digits"] == [old[prefix + "num_digits"][t] for t in positions]
            assert new[prefix + "number_values"] == [old[prefix + "num_values"][t] for t in positions]
            assert not any(key in new for key in DENSE_KEYS)


CAUSAL_SETTINGS = {
    "right": {},
    "left": {"padding_side": "left"},
    "all_labels": {"completion_only_loss": False},
    "keep_start_10": {"max_length": 10},
    "keep_end_9": {"max_length": 9, "truncation_mode": "keep_end"},
    "multiple_of_8": {"pad_to_multiple_of": 8},
}


@pytest.mark.parametrize("setting", list(CAUSAL_SETTINGS))
@pytest.mark.parametrize("name", CAUSAL)
def test_causal_batches_are_identical(name, setting):
    collate = NumberDataCollator.from_tokenizer(pc.number_tokenizer(name), **CAUSAL_SETTINGS[setting])
    assert_same(outcome(collate, sparse(name)), outcome(collate, fixture()[name]))


@pytest.mark.parametrize("name", HEAD)
def test_head_format_batches_are_identical(name):
    collate = NumberDataCollator.from_tokenizer(pc.number_tokenizer(name), answer_format="head")
    want = outcome(collate, fixture()[name])
    assert "shift_labels" in want and "labels_num_digits" in want
    assert_same(outcome(collate, sparse(name)), want)


@pytest.mark.parametrize("name", ["fone", "xval", "digits_aggregate"])
def test_packed_batches_are_identical(name):
    collate = PackedCollator(NumberDataCollator.from_tokenizer(pc.number_tokenizer(name)))
    batches = []
    for rows in (sparse(name), fixture()[name]):
        packed = pack_examples(datasets.Dataset.from_list(list(rows)), max_length=48)
        batches.append(outcome(collate, list(packed)))
    assert "position_ids" in batches[1]
    assert_same(*batches)


SEQ2SEQ_SETTINGS = {"plain": {}, "target_7": {"max_target_length": 7}, "head": {"answer_format": "head"}}


@pytest.mark.parametrize("setting", list(SEQ2SEQ_SETTINGS))
@pytest.mark.parametrize("name", SEQ2SEQ)
def test_seq2seq_batches_are_identical(name, setting):
    if setting == "head" and "digits" in name:
        pytest.skip("answer_format='head' has no number head with encoding='digits'")
    collate = NumberDataCollator.from_tokenizer(pc.number_tokenizer(name), seq2seq=True, **SEQ2SEQ_SETTINGS[setting])
    # rows whose 0.1.0 target was cut one token earlier (prepared_cases.load_fixture) are compared above, not here
    cut = {i for i, row in enumerate(fixture()[name]) if row.get("cut_before_more")}
    assert len(cut) <= 1
    rows = [{k: v for k, v in row.items() if k != "cut_before_more"} for row in fixture()[name]]
    want = outcome(collate, [row for i, row in enumerate(rows) if i not in cut])
    assert "labels_num_mask" in want
    assert_same(outcome(collate, [row for i, row in enumerate(sparse(name)) if i not in cut]), want)


def test_a_batch_may_mix_sparse_and_dense_rows():
    collate = NumberDataCollator.from_tokenizer(pc.number_tokenizer("fone"), padding_side="left")
    mixed = [row if i % 2 else dense for i, (row, dense) in enumerate(zip(sparse("fone"), fixture()["fone"]))]
    assert_same(outcome(collate, mixed), outcome(collate, fixture()["fone"]))


def test_stored_types_do_not_depend_on_the_first_batch():
    ntok = pc.number_tokenizer("fone")
    rows = [{"text": "no numbers"}] * 3 + [{"text": "now 12.5 and -3"}]
    prepared = prepare_dataset(datasets.Dataset.from_list(rows), ntok, batch_size=2)
    features = prepared.features
    assert features["number_digits"].feature.feature.dtype == "int8" and features["number_digits"].feature.length == 6
    assert features["number_sign"].feature.dtype == "int8"
    assert features["number_positions"].feature.dtype == "int32"
    assert features["number_values"].feature.dtype == "float64"
    assert prepared[0]["number_positions"] == [] and prepared[0]["number_spans"] == []
    assert prepared[3]["number_values"] == [12.5, 3.0] and prepared[3]["number_digits"][0] == [0, 0, 1, 2, 5, 0]


def test_an_iterable_dataset_gets_the_same_rows():
    ntok = pc.number_tokenizer("xval")
    data = datasets.Dataset.from_list(pc.PROMPT_COMPLETION)
    assert list(prepare_dataset(data.to_iterable_dataset(), ntok)) == list(prepare_dataset(data, ntok))


def test_bad_sparse_rows_are_refused():
    collate = NumberDataCollator(pad_token_id=0, num_places=2)
    row = {"input_ids": [5, 9, 7], "number_positions": [1], "number_digits": [[4, 2]], "number_sign": [1]}
    row["number_values"] = [42.0]
    assert collate([row])["num_digits"][0, 1].tolist() == [4, 2]
    with pytest.raises(
        ValueError, match=r"both sparse number rows \(`number_positions`\) and dense ones \(\['num_mask'\]\)"
    ):
        collate([{**row, "num_mask": [0, 1, 0]}])
    with pytest.raises(ValueError, match=r"`number_positions` = \[3\] must be increasing positions in \[0, 3\)"):
        collate([{**row, "number_positions": [3]}])
    with pytest.raises(ValueError, match=r"one entry per number each, got sizes .*'number_sign': 2"):
        collate([{**row, "number_sign": [1, 1]}])
    with pytest.raises(ValueError, match=r"`number_digits` rows have 3 places.*num_places=2"):
        collate([{**row, "number_digits": [[4, 2, 0]]}])
    with pytest.raises(ValueError, match=r"`number_spans` holds \[2, 4\), outside its 3 tokens"):
        collate([{**row, "number_spans": [[2, 4]]}])


# -- property: random texts, sparse prepared rows vs NumberTokenizer's own dense rows ------------------------------
def tokenizer_rows(ntok, text: str) -> dict:
    """The dense row of `text` as 0.1.0 prepared it without EOS: the tokenizer's columns plus `number_groups`; less
    its [AGG] tokens (and their entries), which language-modeling data no longer gets (every digit is trained)."""
    enc = ntok(text)
    row = {key: enc[key] for key in ("input_ids", "num_mask", "num_digits", "num_sign", "num_values")}
    row["number_group"] = number_groups(ntok, text, enc["input_ids"], enc["number_texts"])
    keep = [t for t, i in enumerate(row["input_ids"]) if i != ntok.agg_token_id]
    return {key: [column[t] for t in keep] for key, column in row.items()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(TEXT, min_size=1, max_size=3), max_length=st.integers(3, 30),
       mode=st.sampled_from(["keep_start", "keep_end"]),
       name=st.sampled_from(["fone", "fone_sign_feature", "digits_aggregate", "digits_plain"]))  # fmt: skip
def test_random_texts_collate_alike(texts, max_length, mode, name):
    ntok = pc.number_tokenizer(name)
    rows = list(prepare_dataset(datasets.Dataset.from_list([{"text": t} for t in texts]), ntok, add_eos=False))
    dense = [tokenizer_rows(ntok, text) for text in texts]
    collate = NumberDataCollator.from_tokenizer(ntok, max_length=max_length, truncation_mode=mode)
    assert_same(outcome(collate, rows), outcome(collate, dense))
