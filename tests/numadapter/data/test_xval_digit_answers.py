"""``xval_digit_answers``: the answers of a share of the training examples stay the base tokenizer's digit tokens
(the LM keeps writing numbers in digits), picked by the text alone; the prompt's numbers stay [NUM]; the
tokenizer's ``digits_in`` leaves the numbers of given character ranges in digits."""

from __future__ import annotations

import functools
import tempfile

import datasets
import pytest
from helpers import tiny

from numadapter.config import NumberAdapterConfig
from numadapter.data import prepare_dataset
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer

CHAT = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
CHAT += "{% if add_generation_prompt %}assistant:{% endif %}"
ROWS = [{"prompt": f"Convert {m}.5 miles to km:", "completion": f" {m * 1.609:.2f}"} for m in range(100, 160)]


@functools.cache
def base_tokenizer(kind: str):
    return toy.build_tokenizer(kind, tempfile.mkdtemp(prefix=f"xval-digits-{kind}-"))


def make(kind: str = "digits", **settings) -> NumberTokenizer:
    config = NumberAdapterConfig(encoding="xval", int_digits=4, frac_digits=3, xval_scale=100.0, **settings)
    return NumberTokenizer(tiny.copy_tokenizer(base_tokenizer(kind)), config)


def prepared(ntok: NumberTokenizer, rows: list[dict], **kwargs) -> list[dict]:
    return list(prepare_dataset(datasets.Dataset.from_list(rows), ntok, **kwargs))


def trained_text(ntok: NumberTokenizer, row: dict) -> str:
    """The text of the tokens the completion mask trains."""
    ids = [token for token, m in zip(row["input_ids"], row["completion_mask"]) if m]
    return ntok.tokenizer.decode(ids).strip()


def test_a_share_of_the_answers_stays_in_digits_and_the_prompt_keeps_its_num():
    ntok = make(xval_digit_answers=0.5)
    num = ntok.num_token_id
    first, again = prepared(ntok, ROWS), prepared(ntok, ROWS[::-1])[::-1]
    assert first == again  # the form depends on the text alone, not on the batch or the order
    in_digits = [row for row in first if len(row["number_positions"]) == 1]
    assert 15 <= len(in_digits) <= 45  # about half of 60
    for source, row in zip(ROWS, first):
        trained = trained_text(ntok, row)
        assert row["input_ids"].count(num) == len(row["number_positions"])
        if row in in_digits:  # only the prompt's miles are a [NUM]; the answer is the completion's digits
            assert row["number_values"] == [float(source["prompt"].split()[1])]
            assert trained.startswith(source["completion"].strip())
        else:
            assert len(row["number_positions"]) == 2 and num in row["input_ids"][-3:]
            assert row["number_values"][1] == pytest.approx(float(source["completion"]))
    assert all(len(row["number_positions"]) == 2 for row in prepared(make(), ROWS))  # the share 0: every answer


def test_a_chat_keeps_the_assistants_numbers_in_digits_and_masks_its_turn():
    ntok = make(xval_digit_answers=0.5)
    ntok.tokenizer.chat_template = CHAT
    turns = [(f"Convert {m}.5 miles", f"{m * 1.609:.2f} km") for m in range(100, 140)]
    rows = [{"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]} for q, a in turns]
    out = prepared(ntok, rows, assistant_only_loss=True)
    in_digits = [(row, source) for row, source in zip(out, rows) if len(row["number_positions"]) == 1]
    assert 5 <= len(in_digits) <= 35
    for row, source in in_digits:
        assert trained_text(ntok, row).startswith(source["messages"][1]["content"])


def test_a_seq2seq_target_stays_in_digits_for_the_share():
    ntok = make("t5", xval_digit_answers=0.5)
    out = prepared(ntok, ROWS, seq2seq=True)
    kept = [row for row in out if not row["labels_number_positions"]]
    assert 15 <= len(kept) <= 45
    for row in out:
        assert len(row["number_positions"]) == 1  # the source's miles are always a [NUM]
    for row in kept:
        assert ntok.num_token_id not in row["labels"]


def test_digits_in_keeps_the_numbers_of_its_ranges_and_rejects_a_bad_range():
    ntok = make()
    text = "Add 12.5 and 7 to get 19.5"
    enc = ntok([text], digits_in=[[(text.index("19"), len(text))]])
    assert enc["number_texts"] == [["12.5", "7"]]
    assert ntok.tokenizer.decode(enc["input_ids"][0][-4:]).replace(" ", "").endswith("19.5")
    assert ntok([text])["number_texts"] == [["12.5", "7", "19.5"]]
    with pytest.raises(ValueError, match=r"`digits_in` for text 0 is 99, outside \[0, 26\]"):
        ntok([text], digits_in=99)
    with pytest.raises(ValueError, match="`digits_in` has 2 entries for a batch of 1"):
        ntok([text], digits_in=[0, 0])
    with pytest.raises(ValueError, match="xval_digit_answers.*e.g. 0.5"):
        NumberAdapterConfig(encoding="xval", xval_digit_answers=1.0)
