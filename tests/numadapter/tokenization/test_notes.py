"""`numadapter.tokenization.notes`: numbers travel with the tensor NumberTokenizer returned (and its views), never
with ids of the same value; a decoding scope serves lists only inside the call that opened it."""

from __future__ import annotations

import pytest
import torch

from numadapter.config import NumberAdapterConfig
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer
from numadapter.tokenization.notes import decoding, texts_in_scope, texts_of

TEMPLATE = ["The year {} is famous", "a {} b {} c"]


@pytest.fixture(scope="module")
def ntok(tmp_path_factory) -> NumberTokenizer:
    tok = toy.build_tokenizer("llama3", tmp_path_factory.mktemp("notes") / "tok")
    return NumberTokenizer(tok, NumberAdapterConfig(encoding="fone", fone_numbers="all", int_digits=4, frac_digits=2))


def test_rows_and_slices_of_the_tokenizer_output_decode_with_their_numbers(ntok):
    """Before, ``ntok.decode(enc["input_ids"][0])`` said to decode what NumberTokenizer returned, which it was."""
    texts = ["The year 1969 is famous", "a 7 b 12.5 c"]
    enc = ntok(texts, return_tensors="pt", padding=True, padding_side="left")
    ids = enc["input_ids"]
    assert [ntok.decode(ids[b]) for b in range(2)] == texts
    assert [ntok.decode(row) for row in ids] == texts  # iteration gives views too
    assert ntok.batch_decode(ids[1:]) == texts[1:]
    assert ntok.decode(ids[1:2]) == texts[1]
    assert ntok.decode(ids.detach()[0]) == texts[0]  # the same memory
    width = ids.shape[1]
    num_at = ids[1].tolist().index(ntok.num_token_id)
    assert ntok.decode(ids[1, num_at + 1 :]) == " b 12.5 c"  # the [NUM] before the slice is skipped
    assert ntok.decode(ids[1, : num_at + 1]) == "a 7"
    assert texts_of(ids[:, num_at + 1 :], ntok.num_token_id)[1] == ["12.5"]
    assert texts_of(ids[:, width - 1 :], ntok.num_token_id) == [[], []]


def test_copies_lists_and_same_valued_ids_get_no_numbers(ntok):
    """Templated prompts share ids: 1969 and 2001 encode alike. A copy of one (which one could it be?) is refused."""
    first = ntok(TEMPLATE[0].format(1969), return_tensors="pt")
    second = ntok(TEMPLATE[0].format(2001), return_tensors="pt")
    assert torch.equal(first["input_ids"], second["input_ids"])
    assert ntok.decode(first["input_ids"][0]) == "The year 1969 is famous"
    assert ntok.decode(second["input_ids"][0]) == "The year 2001 is famous"
    copies = [
        first["input_ids"].clone(),
        first["input_ids"].to("cpu", copy=True),
        torch.tensor(first["input_ids"].tolist()),
        first["input_ids"][0].tolist(),
    ]
    for copy in copies:
        with pytest.raises(ValueError, match=r"1 \[NUM\] tokens needs their numbers, and these ids carry none.*"
                           r"number_texts=.*pipeline\('number-text-generation'"):  # fmt: skip
            ntok.decode(copy)
    assert ntok.decode(first["input_ids"].clone(), number_texts=["1969"]) == "The year 1969 is famous"


def test_ids_written_over_in_place_or_odd_views_lose_their_numbers(ntok):
    enc = ntok(["a 7 b 12.5 c", "a 3 b 4 c"], return_tensors="pt", padding=True)
    ids = enc["input_ids"]
    assert texts_of(ids.t(), ntok.num_token_id) is None  # a transpose: columns are not rows
    assert texts_of(ids[:, 1], ntok.num_token_id) is None  # one column across rows
    assert texts_of(ids.view(-1), ntok.num_token_id) is None  # rows run together
    assert ntok.batch_decode(ids) == ["a 7 b 12.5 c", "a 3 b 4 c"]
    ids[1, -1] += 1  # the user edits the ids in place: the note no longer describes them
    assert texts_of(ids[1], ntok.num_token_id) is None
    assert texts_of(ids[0], ntok.num_token_id) == [["7", "12.5"]]  # the untouched row still matches its note


def test_a_decoding_scope_serves_lists_only_inside_it(ntok):
    num = ntok.num_token_id
    row = [5, num, 6, num, 7]
    assert texts_in_scope(row[2:], num) is None
    with decoding([(row, ["1", "2"])], num):
        assert texts_in_scope(row[2:], num) == ["2"]  # a suffix: the last numbers
        assert texts_in_scope(row[:2], num) == ["1"]  # a prefix: the first ones
        assert texts_in_scope([num, 6], num) is None  # inside, neither prefix nor suffix
        assert ntok.decode(row[2:]) == ntok.decode(row[2:], number_texts=["2"])
    assert texts_in_scope(row[2:], num) is None  # closed
    with decoding([(row, ["1", "2"]), ([8, 6, num, 7], ["9"])], num):
        with pytest.raises(ValueError, match="part of 2 generated sequences with different numbers"):
            texts_in_scope([num, 7], num)
