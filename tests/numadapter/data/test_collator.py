"""NumberDataCollator and dataset preparation, checked against NumberTokenizer's own encodings."""

from __future__ import annotations

import doctest
import functools
import tempfile

import datasets
import pytest
import torch
from helpers import tiny
from helpers.strategies import TEXT
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import numadapter.data.collator
from numadapter.config import NumberAdapterConfig
from numadapter.data import detect_format, prepare_dataset
from numadapter.data.collator import NumberDataCollator, safe_slice
from numadapter.numbers import find_numbers
from numadapter.schema import dense_rows
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer

SIDES = ("num_mask", "num_digits", "num_sign", "num_values")


@functools.cache
def base_tokenizer(kind: str):
    return toy.build_tokenizer(kind, tempfile.mkdtemp(prefix=f"collator-{kind}-"))


def make(kind: str = "digits", encoding: str = "fone", **settings) -> NumberTokenizer:
    config = NumberAdapterConfig(encoding=encoding, int_digits=4, frac_digits=2, **{"fone_numbers": "all", **settings})
    return NumberTokenizer(tiny.copy_tokenizer(base_tokenizer(kind)), config)


def prepared(ntok: NumberTokenizer, rows: list[dict], **kwargs) -> list[dict]:
    return list(prepare_dataset(datasets.Dataset.from_list(rows), ntok, **kwargs))


def tokens(ntok: NumberTokenizer, ids) -> list[str]:
    return ntok.convert_ids_to_tokens([int(i) for i in ids])


def test_docstring_example():
    result = doctest.testmod(numadapter.data.collator)
    assert result.attempted >= 8 and result.failed == 0


ENCODINGS = [("fone", {}), ("xval", {}), ("digits", {"aggregate": True})]
TEXTS = ["The price is 12.5 dollars and -7 apples.", "No numbers.", "Alice paid 1,234 euros on 3 days"]


@pytest.mark.parametrize("kind", ["digits", "llama3", "t5"])
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("encoding,extra", ENCODINGS, ids=[e for e, _ in ENCODINGS])
def test_padding_matches_each_encoding(kind, side, encoding, extra):
    ntok = make(kind, encoding, **extra)
    singles = [ntok(text) for text in TEXTS]
    examples = [{k: v for k, v in enc.items() if k != "number_texts"} for enc in singles]
    batch = NumberDataCollator.from_tokenizer(ntok, padding_side=side)(examples)
    length = max(len(enc["input_ids"]) for enc in singles)
    assert batch["input_ids"].shape == (3, length) and batch["num_digits"].shape == (3, length, 6)
    for b, enc in enumerate(singles):
        n = len(enc["input_ids"])
        real = slice(0, n) if side == "right" else slice(length - n, length)
        pad = slice(n, length) if side == "right" else slice(0, length - n)
        assert batch["input_ids"][b, real].tolist() == enc["input_ids"]
        assert batch["labels"][b, real].tolist() == enc["input_ids"]
        for key in SIDES:
            assert batch[key][b, real].tolist() == enc[key], key
            assert not batch[key][b, pad].any(), key
        assert batch["attention_mask"][b].tolist() == [int(real.start <= t < real.stop) for t in range(length)]
        assert set(batch["input_ids"][b, pad].tolist()) <= {ntok.pad_token_id}
        assert set(batch["labels"][b, pad].tolist()) <= {-100}
    marker = ntok.marker_token_id
    assert torch.equal(batch["num_mask"].bool(), batch["input_ids"] == marker)
    assert batch["num_digits"].dtype == torch.long and batch["num_values"].dtype == torch.float32


def test_completion_only_labels_hand_checked():
    ntok = make("digits", "fone")
    (example,) = prepared(ntok, [{"prompt": "Total:", "completion": " 12 apples"}])
    assert tokens(ntok, example["input_ids"]) == ["<s>", "Total", ":", "\u0120", "[NUM]", "\u0120apples", "</s>"]
    assert example["completion_mask"] == [0, 0, 0, 1, 1, 1, 1]
    batch = NumberDataCollator.from_tokenizer(ntok)([example])
    ids = example["input_ids"]
    assert batch["labels"][0].tolist() == [-100, -100, -100, ids[3], ntok.num_token_id, ids[5], ntok.eos_token_id]
    assert batch["num_values"][0].tolist() == [0, 0, 0, 0, 12.0, 0, 0]
    assert batch["num_digits"][0, 4].tolist() == [0, 0, 1, 2, 0, 0]
    everything = NumberDataCollator.from_tokenizer(ntok, completion_only_loss=False)([example])
    assert everything["labels"][0].tolist() == ids


def test_number_continued_by_the_completion_belongs_to_it():
    ntok = make("digits", "fone")
    (example,) = prepared(ntok, [{"prompt": "Total: 12", "completion": "34"}])
    marker = example["input_ids"].index(ntok.marker_token_id)
    assert example["completion_mask"][:marker] == [0] * marker
    assert example["completion_mask"][marker:] == [1] * (len(example["input_ids"]) - marker)
    assert example["number_positions"] == [marker] and example["number_values"] == [1234.0]
    agg = make("digits", "digits", aggregate=True)
    (example,) = prepared(agg, [{"prompt": "Total: 12", "completion": "34"}])
    assert tokens(agg, example["input_ids"]) == ["<s>", "Total", ":", "\u0120", "1", "2", "3", "4", "</s>"]
    assert example["completion_mask"] == [0, 0, 0, 0, 1, 1, 1, 1, 1]  # the number, written as generated, no [AGG]


def test_aggregate_marks_the_prompts_numbers_not_the_completions():
    """An [AGG] before a trained answer would feed the model the answer's own digits (its embedding aggregates the
    digits after it), and generation never writes one: the completion's numbers are plain digit tokens."""
    ntok = make("digits", "digits", aggregate=True)
    (example,) = prepared(ntok, [{"prompt": "12+3=", "completion": "15 and 7"}])
    agg = ntok.agg_token_id
    assert tokens(ntok, example["input_ids"]) == [
        "<s>", "[AGG]", "1", "2", "+", "[AGG]", "3", "=", "1", "5", "\u0120and", "\u0120", "7", "</s>"
    ]  # fmt: skip
    assert example["completion_mask"] == [0] * 8 + [1] * 6
    places = len(example["number_digits"][0])
    dense = dense_rows(example, "", len(example["input_ids"]), places, "the example")
    assert dense["num_mask"] == [int(i == agg) for i in example["input_ids"]]
    assert [d for d, m in zip(dense["num_digits"], dense["num_mask"]) if m] == [
        [0, 0, 1, 2, 0, 0], [0, 0, 0, 3, 0, 0]
    ]  # fmt: skip
    assert dense["number_group"] == [0, 1, 1, 1, 0, 2, 2, 0, 3, 3, 0, 0, 4, 0]
    batch = NumberDataCollator.from_tokenizer(ntok)([example])
    assert agg not in batch["labels"][0].tolist()
    text = ntok("text 12 and 3")  # language-modeling text keeps its markers (it has no prompt)
    assert text["input_ids"].count(agg) == 2
    (seq2seq,) = prepared(ntok, [{"prompt": "12+3=", "completion": "15"}], seq2seq=True)
    assert seq2seq["input_ids"].count(agg) == 2 and agg not in seq2seq["labels"]
    assert tokens(ntok, seq2seq["labels"]) == ["<s>", "1", "5"]


def test_data_that_trains_every_token_gets_no_marker_and_says_so():
    """Language-modeling text (and prompt/completion with completion_only_loss=False) trains every number's digits,
    so an [AGG] before any of them would leak them: none is written, and a warning says aggregate has no effect."""
    ntok = make("digits", "digits", aggregate=True)
    agg = ntok.agg_token_id
    with pytest.warns(UserWarning, match=r"'text' data trains every token .* no \[AGG\]"):
        (text,) = prepared(ntok, [{"text": "aa 1234 bb -5 cc"}])
    assert tokens(ntok, text["input_ids"]) == [
        "<s>", "a", "a", "\u0120", "1", "2", "3", "4", "\u0120b", "b", "\u0120-", "5", "\u0120c", "c", "</s>"
    ]  # fmt: skip
    assert text["number_positions"] == [] and len(text["number_spans"]) == 2  # the digit runs stay numbers
    with pytest.warns(UserWarning, match="completion_only_loss=False"):
        (full,) = prepared(ntok, [{"prompt": "12+3=", "completion": "15"}], completion_only_loss=False)
    assert tokens(ntok, full["input_ids"]) == ["<s>", "1", "2", "+", "3", "=", "1", "5", "</s>"]
    assert full["completion_mask"] == [0] * 6 + [1] * 3  # the boundary moved with the dropped prompt markers
    (kept,) = prepared(ntok, [{"prompt": "12+3=", "completion": "15"}])  # the default: the prompt's stay
    assert kept["input_ids"].count(agg) == 2
    batch = NumberDataCollator.from_tokenizer(ntok, completion_only_loss=False)([full])
    assert agg not in batch["input_ids"][0].tolist() and not batch["num_mask"].any()


def test_messages_use_the_chat_template():
    ntok = make("digits", "fone")
    ntok.tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    rows = [{"messages": [{"role": "user", "content": "Add 2 and 3"}, {"role": "assistant", "content": "5"}]}]
    (example,) = prepared(ntok, rows)
    digits = NumberDataCollator.from_tokenizer(ntok)([example])["num_digits"][0]
    assert ntok.decode(example["input_ids"], num_digits=digits) == "user: Add 2 and 3\nassistant: 5\n"
    assert example["number_values"] == [2.0, 3.0, 5.0]
    assert "completion_mask" not in example


CHAT = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
CHAT += "{% if add_generation_prompt %}assistant:{% endif %}"


def test_conversational_prompt_completion_masks_the_prompt():
    ntok = make("digits", "fone")
    ntok.tokenizer.chat_template = CHAT
    row = {
        "prompt": [{"role": "user", "content": "Add 2 and 3"}],
        "completion": [{"role": "assistant", "content": "5"}],
    }
    (example,) = prepared(ntok, [row])
    trained = [t for t, keep in zip(example["input_ids"], example["completion_mask"]) if keep]
    assert (
        ntok.decode(trained, num_digits=[[0, 0, 0, 5, 0, 0] if t == ntok.num_token_id else [0] * 6 for t in trained])
        == " 5\n"
    )
    assert example["number_values"] == [2.0, 3.0, 5.0]


def test_iterable_dataset_and_formatting_func():
    ntok = make("digits", "xval", xval_scale=10.0)
    rows = [{"q": "7 cats", "a": "and 8 dogs"}, {"q": "no", "a": "numbers"}]
    iterable = datasets.Dataset.from_list(rows).to_iterable_dataset()
    joined = lambda example: example["q"] + " " + example["a"]  # noqa: E731
    streamed = list(prepare_dataset(iterable, ntok, formatting_func=joined))
    direct = prepared(ntok, [{"text": joined(row)} for row in rows])
    assert streamed == direct and direct[0]["number_values"] == [7.0, 8.0]


def test_seq2seq_messages_target_the_last_assistant_message():
    ntok = make("t5", "fone")
    ntok.tokenizer.chat_template = CHAT
    messages = [{"role": "user", "content": "Add 2 and 3"}, {"role": "assistant", "content": "It is 5"}]
    (example,) = prepared(ntok, [{"messages": messages}], seq2seq=True)
    assert example["labels"] == ntok("It is 5")["input_ids"]
    assert example["labels_number_positions"] == [example["labels"].index(ntok.num_token_id)]
    assert example["labels_number_values"] == [5.0]
    assert example["input_ids"] == ntok("user: Add 2 and 3\nassistant:")["input_ids"]
    with pytest.raises(ValueError, match="must end with the assistant's message"):
        prepared(ntok, [{"messages": messages[:1]}], seq2seq=True)


def test_truncation_drops_a_cut_digits_number_whole():
    ntok = make("digits", "digits", aggregate=True)
    # the numbers in a prompt, where they keep their [AGG] (language-modeling text trains them: no [AGG])
    (example,) = prepared(ntok, [{"prompt": "aa 1234 bb -5 cc", "completion": ""}])
    names = tokens(ntok, example["input_ids"])
    assert names[:10] == ["<s>", "a", "a", "\u0120", "[AGG]", "1", "2", "3", "4", "\u0120b"]
    collate = NumberDataCollator.from_tokenizer(ntok, max_length=7)  # would keep "[AGG] 1 2": the number goes
    batch = collate([example])
    assert tokens(ntok, batch["input_ids"][0]) == ["<s>", "a", "a", "\u0120"]
    assert not batch["num_mask"].any()
    # keep_end with 5 tokens would start at "[AGG] 5" after "Ġ-": the whole -5 is dropped
    end = NumberDataCollator.from_tokenizer(ntok, max_length=5, truncation_mode="keep_end")([example])
    assert tokens(ntok, end["input_ids"][0]) == ["\u0120c", "c", "</s>"]
    end = NumberDataCollator.from_tokenizer(ntok, max_length=6, truncation_mode="keep_end")([example])
    assert tokens(ntok, end["input_ids"][0]) == ["\u0120-", "[AGG]", "5", "\u0120c", "c", "</s>"]
    assert end["num_mask"][0].tolist() == [0, 1, 0, 0, 0, 0] and end["num_values"][0, 1] == 5.0


def test_truncation_keeps_a_text_sign_with_its_number():
    ntok = make("digits", "fone")
    (example,) = prepared(ntok, [{"text": "aa 1234 bb -5 cc"}])
    assert tokens(ntok, example["input_ids"])[7:] == ["\u0120-", "[NUM]", "\u0120c", "c", "</s>"]
    end = NumberDataCollator.from_tokenizer(ntok, max_length=4, truncation_mode="keep_end")([example])
    assert tokens(ntok, end["input_ids"][0]) == ["\u0120c", "c", "</s>"]  # not "[NUM] c c </s>" reading +5
    start = NumberDataCollator.from_tokenizer(ntok, max_length=8)([example])
    assert tokens(ntok, start["input_ids"][0])[-1] == "b" and start["num_mask"][0].sum() == 1


def test_prepare_dataset_truncates_and_drops_untrained_examples():
    ntok = make("digits", "digits", aggregate=True)
    rows = [{"prompt": "Total: 1234 and more words here", "completion": " 99"}, {"prompt": "A", "completion": " 7"}]
    out = prepared(ntok, rows, max_length=6)
    assert len(out) == 1  # the first example's completion was truncated away
    assert tokens(ntok, out[0]["input_ids"]) == ["<s>", "A", "\u0120", "7", "</s>"]  # a completion's number: no [AGG]
    kept = prepared(ntok, rows[:1], max_length=6, completion_only_loss=False)
    assert tokens(ntok, kept[0]["input_ids"]) == ["<s>", "Total", ":", "\u0120"]


def test_without_number_group_digits_truncation_refuses_near_digits():
    ntok = make("digits", "digits", aggregate=True)
    enc = ntok("aa 1234 bb")
    example = {k: v for k, v in enc.items() if k != "number_texts"}
    with pytest.raises(ValueError, match=r"max_length=6.*prepare_dataset"):
        NumberDataCollator.from_tokenizer(ntok, max_length=6)([example])
    far = NumberDataCollator.from_tokenizer(ntok, max_length=3)([example])  # "<s> a a": no digit near the cut
    assert far["input_ids"].shape[1] == 3


def test_fone_without_number_group_truncates_between_tokens():
    ntok = make("digits", "fone")
    enc = ntok("aa 12 bb 34 cc")
    example = {k: v for k, v in enc.items() if k != "number_texts"}
    batch = NumberDataCollator.from_tokenizer(ntok, max_length=5)([example])
    assert batch["input_ids"].shape[1] == 5
    assert torch.equal(batch["num_mask"].bool(), batch["input_ids"] == ntok.num_token_id)
    assert batch["num_values"][0].tolist() == [0, 0, 0, 0, 12.0]


def test_number_longer_than_max_length_is_refused():
    with pytest.raises(ValueError, match=r"spans 4 tokens.*max_length=3"):
        safe_slice(6, 3, "keep_start", group=[0, 1, 1, 1, 1, 0])
    assert safe_slice(6, 3, "keep_start", group=[0, 0, 1, 1, 0, 0]) == slice(0, 2)
    assert safe_slice(6, 3, "keep_end", group=[0, 0, 1, 1, 0, 0]) == slice(4, 6)
    assert safe_slice(6, 3, "keep_end", group=[1, 1, 0, 0, 0, 0]) == slice(3, 6)
    assert safe_slice(3, 3, "keep_start", group=[1, 1, 1]) == slice(0, 3)


def test_misaligned_or_misshaped_columns_are_refused():
    collate = NumberDataCollator(pad_token_id=0, num_places=2)
    with pytest.raises(ValueError, match=r"`num_mask` has 2 entries but its ids have 3"):
        collate([{"input_ids": [1, 2, 3], "num_mask": [0, 1]}])
    with pytest.raises(ValueError, match=r"3 places.*num_places=2"):
        collate([{"input_ids": [1], "num_mask": [1], "num_digits": [[1, 2, 3]]}])
    with pytest.raises(ValueError, match=r"no `input_ids`.*prepare_dataset"):
        collate([{"text": "hello"}])
    with pytest.raises(ValueError, match="empty list"):
        collate([])


@pytest.mark.parametrize(
    "settings,match",
    [
        ({"padding_side": "middle"}, "padding_side"),
        ({"truncation_mode": "keep_middle"}, "truncation_mode"),
        ({"max_length": 0}, "max_length"),
        ({"pad_to_multiple_of": -8}, "pad_to_multiple_of"),
        ({"pad_token_id": None}, "pad token"),
        ({"num_places": 0}, "num_places"),
    ],
)
def test_bad_settings(settings, match):
    with pytest.raises(ValueError, match=match):
        NumberDataCollator(**{"pad_token_id": 0, "num_places": 2, **settings})


def test_pad_to_multiple_of():
    batch = NumberDataCollator(pad_token_id=0, num_places=1, pad_to_multiple_of=4)([{"input_ids": [1, 2, 3, 4, 5]}])
    assert batch["input_ids"].tolist() == [[1, 2, 3, 4, 5, 0, 0, 0]]
    assert batch["labels"].tolist() == [[1, 2, 3, 4, 5, -100, -100, -100]]


@pytest.mark.parametrize("encoding,extra", ENCODINGS, ids=[e for e, _ in ENCODINGS])
def test_seq2seq_labels_carry_their_numbers_unshifted(encoding, extra):
    ntok = make("t5", encoding, **extra)
    rows = [{"prompt": "Add 2 and 3", "completion": "It is 5"}, {"prompt": "Hi", "completion": "Total 1234.5 now"}]
    examples = prepared(ntok, rows, seq2seq=True)
    batch = NumberDataCollator.from_tokenizer(ntok, seq2seq=True, padding_side="left")(examples)
    assert "decoder_input_ids" not in batch and not any(k.startswith("decoder_") for k in batch)
    for b, row in enumerate(rows):
        target = ntok(row["completion"])
        if ntok.agg_token_id is not None:  # a target's numbers are written without [AGG], as they are generated
            keep = [t for t, i in enumerate(target["input_ids"]) if i != ntok.agg_token_id]
            assert len(keep) < len(target["input_ids"])
            target = {key: [target[key][t] for t in keep] for key in ("input_ids", *SIDES)}
        n = len(target["input_ids"])
        assert batch["labels"][b, :n].tolist() == target["input_ids"]  # right-padded, unshifted
        assert set(batch["labels"][b, n:].tolist()) <= {-100}
        for key in SIDES:
            assert batch["labels_" + key][b, :n].tolist() == target[key], key
            assert not batch["labels_" + key][b, n:].any()
        source = ntok(row["prompt"])
        m = len(source["input_ids"])
        assert batch["input_ids"][b, -m:].tolist() == source["input_ids"]  # left-padded source
        assert batch["num_values"][b, -m:].tolist() == source["num_values"]
    assert torch.equal(batch["labels_num_mask"].bool(), batch["labels"] == ntok.marker_token_id)


def test_seq2seq_needs_a_target():
    ntok = make("t5", "fone")
    with pytest.raises(ValueError, match=r"source and a target.*prompt.*completion"):
        prepared(ntok, [{"text": "only text 5"}], seq2seq=True)
    with pytest.raises(ValueError, match="no `labels`"):
        NumberDataCollator.from_tokenizer(ntok, seq2seq=True)([{"input_ids": [5, 1]}])


def test_format_detection_errors():
    with pytest.raises(ValueError, match=r"Cannot tell the dataset format.*dataset_text_field"):
        detect_format({"question": "x"})
    with pytest.raises(ValueError, match="both be strings or both be lists"):
        detect_format({"prompt": "x", "completion": [{"role": "assistant", "content": "y"}]})
    assert detect_format({"input_ids": [1]}) == "tokenized"


# -- property: truncated + collated batches hold whole numbers only, aligned with their markers --------------------


@functools.cache
def property_tokenizer(encoding: str) -> NumberTokenizer:
    return make("digits", encoding, **({"aggregate": True} if encoding == "digits" else {}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT, max_length=st.integers(3, 30), mode=st.sampled_from(["keep_start", "keep_end"]),
       encoding=st.sampled_from(["fone", "digits"]))  # fmt: skip
def test_truncation_never_splits_numbers(text, max_length, mode, encoding):
    if encoding == "fone":  # out-of-range numbers stay text there, tokenized like any text (module docstring)
        assume(all(span.exact.fits(4, 2) for span in find_numbers(text)))
    ntok = property_tokenizer(encoding)
    (example,) = prepared(ntok, [{"text": text}], add_eos=False)
    try:
        batch = NumberDataCollator.from_tokenizer(ntok, max_length=max_length, truncation_mode=mode)([example])
    except ValueError as error:  # only a number longer than max_length may refuse
        assert "more than max_length" in str(error)
        return
    ids = batch["input_ids"][0]
    assert len(ids) <= max_length
    assert torch.equal(batch["num_mask"][0].bool(), ids == ntok.marker_token_id)
    original = [span.exact for span in find_numbers(text)]
    digits, signs = batch["num_digits"][0], batch["num_sign"][0]
    kept = find_numbers(ntok.decode(ids, num_digits=digits, num_sign=signs))
    values = [span.exact for span in kept]
    expected = original[: len(values)] if mode == "keep_start" else original[len(original) - len(values) :]
    assert values == expected  # a contiguous run of whole numbers, signs included
