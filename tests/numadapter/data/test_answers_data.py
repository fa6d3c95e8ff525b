"""Prepared data and collated batches with ``fone_numbers="answers"``: the completion's numbers are the answers, the
collated number tensors are what `NumberTokenizer` gives with ``answer_start``, and truncation drops a number left
in digits whole."""

from __future__ import annotations

import functools
import tempfile
import warnings

import datasets
import pytest
import torch
from helpers import tiny
from helpers.answers_cases import SUMS_ONLY

from numadapter.config import NumberAdapterConfig
from numadapter.data import prepare_dataset
from numadapter.data.collator import NumberDataCollator
from numadapter.data.head_coverage import head_coverage
from numadapter.schema import KIND_FIELD, dense_rows
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer
from numadapter.training.head_choice import check_head_coverage

SIDES = ("num_mask", "num_digits", "num_sign", "num_values")
CHAT = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
CHAT += "{% if add_generation_prompt %}assistant:{% endif %}"
ROWS = [
    {"prompt": "In 2024: 12 + 345 =", "completion": " 357"},  # a sum: [NUM]
    {"prompt": "7 * 8 =", "completion": " 56"},  # a product: digits
    {"prompt": "Total: 12", "completion": "34, again 1234."},  # 1234 begins in the prompt: digits; its copy: [NUM]
    {"prompt": "No numbers here.", "completion": " None."},
]


@functools.cache
def base_tokenizer(kind: str):
    return toy.build_tokenizer(kind, tempfile.mkdtemp(prefix=f"answers-{kind}-"))


def make(kind: str = "llama3", **settings) -> NumberTokenizer:
    settings = {"encoding": "fone", "int_digits": 4, "frac_digits": 2, **SUMS_ONLY, **settings}
    return NumberTokenizer(tiny.copy_tokenizer(base_tokenizer(kind)), NumberAdapterConfig(**settings))


def prepared(ntok: NumberTokenizer, rows: list[dict], **kwargs) -> list[dict]:
    return list(prepare_dataset(datasets.Dataset.from_list(rows), ntok, **kwargs))


def assert_same_batch(batch: dict, direct: dict) -> None:
    for key in ("input_ids", "attention_mask", *SIDES):
        assert torch.equal(batch[key], direct[key]), key


@pytest.mark.parametrize("kind", toy.TOKENIZER_KINDS)
@pytest.mark.parametrize("side", ["right", "left"])
def test_prompt_completion_batches_equal_the_tokenizer_with_answer_start(kind, side):
    ntok = make(kind)
    examples = prepared(ntok, ROWS, add_eos=False)
    batch = NumberDataCollator.from_tokenizer(ntok, padding_side=side)(examples)
    texts = [row["prompt"] + row["completion"] for row in ROWS]
    starts = [len(row["prompt"]) for row in ROWS]
    direct = ntok(texts, answer_start=starts, padding=True, return_tensors="pt", padding_side=side)
    assert_same_batch(batch, direct)
    assert [sorted(set(m.tolist()) - {0}) for m in batch["num_mask"]] == [[1, 2], [2], [1, 2], []]
    assert direct["number_texts"] == [["357"], [], ["1234"], []]
    assert [example[KIND_FIELD] for example in examples] == [[2, 2, 2, 1], [2, 2, 2], [2, 1], []]
    for example, row in zip(examples, ROWS):  # the completion starts where the prompt's own encoding ends
        prompt = ntok(row["prompt"])
        start = example["completion_mask"].index(1)
        assert start <= len(prompt["input_ids"]) and example["input_ids"][:start] == prompt["input_ids"][:start]
    # "Total: 12" + "34": the prompt's last number is continued, so its tokens belong to the completion
    assert examples[2]["completion_mask"][examples[2]["number_positions"][0]] == 1


def test_text_data_trains_every_number_as_a_possible_answer():
    ntok = make("digits")
    texts = ["3 + 4 = 7", "7 * 8 = 56", "0 is 0 - 0"]
    examples = prepared(ntok, [{"text": text} for text in texts], add_eos=False)
    batch = NumberDataCollator.from_tokenizer(ntok)(examples)
    direct = ntok(texts, answer_start=0, padding=True, return_tensors="pt")
    assert_same_batch(batch, direct)
    assert direct["number_texts"] == [["7"], [], ["0", "0"]]  # 0 - 0: copies of the first 0
    with_eos = prepared(ntok, [{"text": texts[0]}])[0]  # EOS appended, rows unchanged
    assert with_eos["input_ids"][-1] == ntok.eos_token_id and with_eos[KIND_FIELD] == examples[0][KIND_FIELD]


def test_chat_data_uses_the_rendered_prompt_length_and_messages_the_assistant_turns():
    ntok = make("digits")
    ntok.tokenizer.chat_template = CHAT
    prompt = [{"role": "user", "content": "Add 2 and 3"}]
    completion = [{"role": "assistant", "content": "5, not 9"}]
    (example,) = prepared(ntok, [{"prompt": prompt, "completion": completion}])
    full = ntok.apply_chat_template(prompt + completion, tokenize=False)
    rendered = ntok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    direct = ntok(full, answer_start=len(rendered), add_special_tokens=False)
    assert example["input_ids"] == direct["input_ids"] and direct["number_texts"] == ["5"]  # 9: no combination
    assert example[KIND_FIELD] == [2, 2, 1, 2]
    (lm,) = prepared(ntok, [{"messages": prompt + completion}])
    turn = [(len(rendered), len(full))]  # the assistant's turn: its answers; the user's 2 and 3 stay context
    assert lm["input_ids"] == ntok(full, answer_start=[turn], add_special_tokens=False)["input_ids"]
    assert lm[KIND_FIELD] == example[KIND_FIELD]


def test_seq2seq_is_refused_with_answers():
    ntok = make("t5")
    with pytest.raises(ValueError, match=r"fone_numbers='answers'.*causal LMs for now.*use fone_numbers='all'"):
        prepared(ntok, ROWS, seq2seq=True)


def test_all_mode_prepares_no_kind_column():
    (example, *_) = prepared(make(fone_numbers="all"), ROWS)
    assert KIND_FIELD not in example and example["number_values"] == [2024.0, 12.0, 345.0, 357.0]


# -- truncation -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["keep_start", "keep_end"])
def test_truncation_drops_a_cut_digit_number_whole_and_keeps_rows_aligned(mode):
    ntok = make("digits")  # one token per digit
    text = "aa 1234 bb 5678 cc 6912"  # 6912 = 1234 + 5678
    (full,) = prepared(ntok, [{"text": text}], add_eos=False)
    assert full[KIND_FIELD] == [2, 2, 1]
    ids, positions = full["input_ids"], full["number_positions"]
    # a cut inside 5678 (its first two digits kept on keep_start, its last two on keep_end)
    first_5 = ids.index(ntok.tokenizer.convert_tokens_to_ids("5"))
    limit = first_5 + 2 if mode == "keep_start" else len(ids) - first_5 - 2
    (cut,) = prepared(ntok, [{"text": text}], add_eos=False, max_length=limit, truncation_mode=mode)
    assert not {"5", "6", "7", "8"} & set(ntok.convert_ids_to_tokens(cut["input_ids"]))  # no digit of 5678 left
    assert len(cut["input_ids"]) < limit  # the cut moved to the number's edge
    if mode == "keep_start":  # 1234 stays where it was
        assert (cut["number_positions"], cut["number_values"], cut[KIND_FIELD]) == ([positions[0]], [1234.0], [2])
    else:  # 6912 moved with the cut
        shift = len(ids) - len(cut["input_ids"])
        assert (cut["number_positions"], cut["number_values"], cut[KIND_FIELD]) == (
            [positions[2] - shift],
            [6912.0],
            [1],
        )
        assert cut["input_ids"][cut["number_positions"][0]] == ntok.num_token_id
    # the collator's own truncation of the untruncated example gives the same batch
    collated = NumberDataCollator.from_tokenizer(ntok, max_length=limit, truncation_mode=mode)([full])
    again = NumberDataCollator.from_tokenizer(ntok)([cut])
    for key in ("input_ids", *SIDES):
        assert torch.equal(collated[key], again[key]), key


def test_dense_rows_refuse_an_unknown_kind():
    example = {"number_positions": [0], "number_digits": [[0, 1]], "number_sign": [1], "number_values": [1.0]}
    with pytest.raises(ValueError, match=r"`number_kind` holds 3, but each row is 1 \(a marker\) or 2"):
        dense_rows({**example, KIND_FIELD: [3]}, "", 2, 2, "Example 0")
    assert dense_rows({**example, KIND_FIELD: [2]}, "", 2, 2, "Example 0")["num_mask"] == [2, 0]
    assert dense_rows(example, "", 2, 2, "Example 0")["num_mask"] == [1, 0]  # no kinds: markers


# -- answer_format="head", coverage -----------------------------------------------------------------------------------
def test_head_answer_format_takes_only_a_num_answer():
    ntok = make("digits")
    sums, products = prepared(ntok, ROWS[:2])
    collator = NumberDataCollator.from_tokenizer(ntok, answer_format="head")
    batch = collator([sums, products])
    num = sums["input_ids"].index(ntok.num_token_id)
    assert batch["attention_mask"][0].sum() == num  # cut before the [NUM] answer, trained at the head
    assert batch["labels_num_mask"][0, num - 1] == 1 and batch["labels_num_values"][0, num - 1] == 357.0
    assert batch["attention_mask"][1].sum() == len(products["input_ids"])  # the digits answer: a token sequence
    assert not batch["labels_num_mask"][1].any()


def test_coverage_counts_context_rows_and_the_trainer_does_not_warn():
    ntok = make("digits", int_digits=6, frac_digits=0)
    rows = [{"prompt": f"{a} km in metres =", "completion": f" {a * 1000}"} for a in range(10, 20)]
    rows += [{"prompt": f"{a} + {a + 1} =", "completion": f" {2 * a + 1}"} for a in range(10, 20)]
    data = prepare_dataset(datasets.Dataset.from_list(rows), ntok)
    coverage = head_coverage(data, count=4)
    assert (coverage.answers, coverage.formed) == (20, 10)  # the sums are [NUM]s, the conversions digits
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_head_coverage(data, ntok.config)
    assert not [w for w in caught if "no sum or difference" in str(w.message)]
    every = make("digits", int_digits=6, frac_digits=0, fone_numbers="all")
    with pytest.warns(UserWarning, match=r"10 of 20 training answers \(50%\) are no sum or difference"):
        check_head_coverage(prepare_dataset(datasets.Dataset.from_list(rows), every), every.config)


def test_digit_answers_keep_a_share_of_the_examples_in_digits_the_same_way_every_time():
    rows = [{"prompt": f"{a} + {b} =", "completion": f" {a + b}"} for a, b in zip(range(100, 160), range(300, 360))]
    ntok = make("digits", fone_digit_answers=0.5)
    first, again = prepared(ntok, rows), prepared(ntok, rows[::-1])[::-1]
    assert first == again  # the form depends on the text alone, not on the batch or the order
    with_num = [row for row in first if 1 in row[KIND_FIELD]]
    assert 15 <= len(with_num) <= 45  # about half of 60
    for row in first:
        if 1 not in row[KIND_FIELD]:  # in digits: the answer is a context-only number at the end
            assert row[KIND_FIELD] == [2, 2, 2] and ntok.num_token_id not in row["input_ids"]
    assert all(1 in row[KIND_FIELD] for row in prepared(make("digits"), rows))
    with pytest.raises(ValueError, match="fone_digit_answers.*e.g. 0.5"):
        NumberAdapterConfig(fone_digit_answers=1.0)
