"""``fone_numbers="answers"``: numbers stay the base tokenizer's digit tokens (context rows, ``num_mask`` 2) and only
answers the context head can form become [NUM] (``num_mask`` 1); ``answer_start`` says where the answers begin."""

from __future__ import annotations

import pytest
import torch
from helpers.answers_cases import SUMS_ONLY
from helpers.strategies import TEXT  # random texts of words and numbers (signs, decimals, thousands separators)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numadapter.config import NumberAdapterConfig
from numadapter.numbers import ExactNumber, find_numbers
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer

KINDS = toy.TOKENIZER_KINDS
SIDE_KEYS = ("num_mask", "num_digits", "num_sign", "num_values")
PROMPT = "In 2024: 12 + 345 ="
ANSWER = PROMPT + " 357 and 4140 ok"  # 357 = 12 + 345 (formable); 4140 = 12 * 345 (no sum or difference)


def make(kind: str, tmp_path, **settings) -> NumberTokenizer:
    settings = {"encoding": "fone", "int_digits": 4, "frac_digits": 2, **SUMS_ONLY, **settings}
    tok = toy.build_tokenizer(kind, tmp_path / f"tok-{kind}")
    return NumberTokenizer(tok, NumberAdapterConfig(**settings))


def rows(enc, b: int | None = None) -> list[tuple[int, int, float]]:
    """``(position, mask, value)`` of every side row of one encoding (a row `b` of a tensor batch, or a list one)."""
    mask, values = enc["num_mask"], enc["num_values"]
    if b is not None:
        mask, values = mask[b].tolist(), values[b].tolist()
    return [(t, m, values[t]) for t, m in enumerate(mask) if m]


def token_text(ntok: NumberTokenizer, token_id: int) -> str:
    return ntok.tokenizer.decode([token_id]).strip().replace("\u2581", "")


# -- which numbers become [NUM] -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_a_sum_answer_becomes_num_and_the_other_numbers_are_digit_rows_at_their_last_token(tmp_path, kind):
    ntok = make(kind, tmp_path)
    enc = ntok(ANSWER, answer_start=len(PROMPT))
    assert enc["number_texts"] == ["357"]
    found = rows(enc)
    assert [(m, v) for _, m, v in found] == [(2, 2024.0), (2, 12.0), (2, 345.0), (1, 357.0), (2, 4140.0)]
    for (t, m, v), text in zip(found, ["2024", "12", "345", None, "4140"]):
        if m == 1:
            assert enc["input_ids"][t] == ntok.num_token_id
            continue
        piece = token_text(ntok, enc["input_ids"][t])
        assert piece and text.endswith(piece), (text, piece)  # the token holds the number's last digit(s)
        assert ExactNumber.from_place_digits(enc["num_digits"][t], 4, 2, enc["num_sign"][t]).to_float() == v
    assert enc["input_ids"].count(ntok.num_token_id) == 1
    # the prompt part is what the base tokenizer makes of the prompt: the base reads its text as in pretraining
    prompt_ids = ntok.tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    start = 1 if ntok.tokenizer.bos_token_id is not None else 0
    assert enc["input_ids"][start : start + len(prompt_ids)] == prompt_ids


@pytest.mark.parametrize("kind", KINDS)
def test_a_product_answer_stays_in_digits(tmp_path, kind):
    ntok = make(kind, tmp_path)
    prompt = "7 * 8 ="
    enc = ntok(prompt + " 56", answer_start=len(prompt))
    assert enc["number_texts"] == [] and ntok.num_token_id not in enc["input_ids"]
    assert [(m, v) for _, m, v in rows(enc)] == [(2, 7.0), (2, 8.0), (2, 56.0)]
    assert enc["input_ids"] == ntok.tokenizer(prompt + " 56")["input_ids"]


@pytest.mark.parametrize("kind", KINDS)
def test_without_head_copies_a_repeated_number_stays_in_digits_and_a_sum_becomes_num(tmp_path, kind):
    """fone_head_copies=False: an answer equal to a number before it is the LM's to copy (digits); a computed one is
    still a [NUM]. With the default (True) the copy is a [NUM] too."""
    prompt = "max(12, 345) ="
    text = prompt + " 345, and 12 + 345 = 357"
    ntok = make(kind, tmp_path, fone_head_copies=False)
    enc = ntok(text, answer_start=len(prompt))
    assert enc["number_texts"] == ["357"]  # 345, 12 and 345 repeat numbers before them
    assert [(m, v) for _, m, v in rows(enc)] == [(2, 12.0), (2, 345.0), (2, 345.0), (2, 12.0), (2, 345.0), (1, 357.0)]
    copying = make(kind, tmp_path, fone_head_copies=True)
    # the answer holds an equation, so its operand 12 is context, not an answer (`test_equation_answers`); the
    # operand 345 repeats the [NUM] 345, whose digits the LM cannot copy: the head's copy
    assert copying(text, answer_start=len(prompt))["number_texts"] == ["345", "345", "357"]
    assert copying(prompt + " 345, then 12 and 345", answer_start=len(prompt))["number_texts"] == ["345", "12", "345"]
    with pytest.raises(ValueError, match="fone_head_copies.*True or False"):
        NumberAdapterConfig(fone_head_copies="no")


@pytest.mark.parametrize("kind", KINDS)
def test_without_answer_start_every_number_stays_in_digits_as_the_base_tokenizes_it(tmp_path, kind):
    ntok = make(kind, tmp_path)
    enc = ntok(ANSWER)
    assert enc["input_ids"] == ntok.tokenizer(ANSWER)["input_ids"]
    assert enc["number_texts"] == []
    assert [(m, v) for _, m, v in rows(enc)] == [(2, 2024.0), (2, 12.0), (2, 345.0), (2, 357.0), (2, 4140.0)]
    assert ntok(ANSWER, answer_start=[None])["input_ids"] == enc["input_ids"]


def test_only_numbers_at_or_after_answer_start_are_answers(tmp_path):
    ntok = make("llama3", tmp_path)
    text = "3 4 7 7"  # offsets 0 2 4 6: the third is 3 + 4, the fourth a copy of the third
    assert ntok(text, answer_start=0)["number_texts"] == ["7", "7"]  # 3 has no number before it
    assert ntok(text, answer_start=5)["number_texts"] == ["7"]
    assert ntok(text, answer_start=len(text))["number_texts"] == []
    one = make("llama3", tmp_path, fone_context_numbers=1)  # only the latest number: 7 is no copy of 4
    assert [m for _, m, _ in rows(one(text, answer_start=0))] == [2, 2, 2, 1]


def test_zero_needs_a_combination_with_a_term_and_out_of_range_numbers_are_no_context(tmp_path):
    ntok = make("llama3", tmp_path, fone_context_numbers=1)
    assert ntok("0", answer_start=0)["number_texts"] == []  # the empty sum is the read-out alone: not exact
    assert ntok("0 then 0", answer_start=0)["number_texts"] == ["0"]  # a copy
    # 99999 needs 5 integer places (int_digits=4): no row, no context, so the last 3 copies the first
    enc = ntok("3 then 99999 then 3", answer_start=0)
    assert [(m, v) for _, m, v in rows(enc)] == [(2, 3.0), (1, 3.0)]


@pytest.mark.parametrize(("sign_policy", "signs", "value"), [("text", [1, 1], 3.0), ("feature", [-1, 1], -3.0)])
def test_signs_follow_sign_policy_in_the_context_rows(tmp_path, sign_policy, signs, value):
    ntok = make("llama3", tmp_path, sign_policy=sign_policy)
    prompt = "-3 + 10 ="
    enc = ntok(prompt + " 7", answer_start=len(prompt))  # 7 = 10 - 3 (text: 10 - |3|); feature: -3 + 10
    assert enc["number_texts"] == ["7"]
    found = rows(enc)
    assert [m for _, m, _ in found] == [2, 2, 1]
    assert [enc["num_sign"][t] for t, _, _ in found[:2]] == signs and found[0][2] == value
    assert ntok.decode(enc) == prompt + " 7"


# -- padding, truncation, groups --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("side", ["left", "right"])
def test_padding_moves_the_rows_with_their_tokens(tmp_path, kind, side):
    ntok = make(kind, tmp_path)
    texts, starts = [ANSWER, "x 5", PROMPT], [len(PROMPT), 0, None]
    batch = ntok(texts, answer_start=starts, padding=True, return_tensors="pt", padding_side=side)
    length = batch["input_ids"].shape[1]
    for b, (text, start) in enumerate(zip(texts, starts)):
        single = ntok(text, answer_start=start)
        n = len(single["input_ids"])
        kept = slice(length - n, length) if side == "left" else slice(0, n)
        pads = slice(0, length - n) if side == "left" else slice(n, length)
        assert batch["input_ids"][b, kept].tolist() == single["input_ids"]
        for key in SIDE_KEYS:
            assert batch[key][b, kept].tolist() == single[key], key
            assert not batch[key][b, pads].any(), key
        assert batch["number_texts"][b] == single["number_texts"]
    assert [m for _, m, _ in rows(batch, 0)] == [2, 2, 2, 1, 2]
    assert batch["num_mask"].dtype == torch.int64 and batch["num_values"].dtype == torch.float32


@pytest.mark.parametrize("kind", KINDS)
def test_truncation_drops_a_number_whose_last_token_is_cut(tmp_path, kind):
    ntok = make(kind, tmp_path)
    full = ntok(ANSWER, answer_start=len(PROMPT), add_special_tokens=False)
    last_345 = next(t for t, m, v in rows(full) if v == 345.0)
    ntok.tokenizer.truncation_side = "right"
    cut = ntok(ANSWER, answer_start=len(PROMPT), add_special_tokens=False, truncation=True, max_length=last_345)
    assert [v for _, _, v in rows(cut)] == [2024.0, 12.0]  # 345's last token is the first cut
    assert cut["number_texts"] == []
    cut = ntok(ANSWER, answer_start=len(PROMPT), add_special_tokens=False, truncation=True, max_length=last_345 + 2)
    assert [v for _, _, v in rows(cut)] == [2024.0, 12.0, 345.0]
    ntok.tokenizer.truncation_side = "left"
    keep = len(full["input_ids"]) - last_345  # from 345's last token on: its row stays there
    cut = ntok(ANSWER, answer_start=len(PROMPT), add_special_tokens=False, truncation=True, max_length=keep)
    assert [(t, m, v) for t, m, v in rows(cut)][0] == (0, 2, 345.0)
    cut = ntok(ANSWER, answer_start=len(PROMPT), add_special_tokens=False, truncation=True, max_length=keep - 1)
    assert [(m, v) for _, m, v in rows(cut)] == [(1, 357.0), (2, 4140.0)] and cut["number_texts"] == ["357"]
    assert ntok.decode(cut).endswith("357 and 4140 ok")


@pytest.mark.parametrize("kind", KINDS)
def test_number_groups_cover_every_token_of_each_number(tmp_path, kind):
    ntok = make(kind, tmp_path, sign_policy="text")
    text = "a -12 b 30 c 18"  # 18 = 30 - 12 (|12| with the sign as text)
    enc = ntok(text, answer_start=11, return_number_groups=True)
    group, ids = enc["number_group"], enc["input_ids"]
    assert enc["number_texts"] == ["18"]
    for k, (surface, (t, _, _)) in enumerate(zip(["-12", "30", "18"], rows(enc)), 1):
        tokens = [i for i, g in zip(ids, group) if g == k]
        assert max(i for i, g in enumerate(group) if g == k) == t  # a group ends at its row
        shown = "".join(token_text(ntok, i) if i != ntok.num_token_id else "18" for i in tokens)
        assert shown.replace(" ", "") == surface
    batch = ntok([text], answer_start=11, return_number_groups=True, return_tensors="pt")
    assert batch["number_group"].tolist() == [group]
    with pytest.raises(ValueError, match=r"return_number_groups=True is for fone_numbers='answers'.*'all'"):
        make(kind, tmp_path, fone_numbers="all")(text, return_number_groups=True)


# -- decoding ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["digits", "llama3"])  # lossless base tokenizers
def test_decode_renders_the_num_and_leaves_the_digits(tmp_path, kind):
    ntok = make(kind, tmp_path)
    text = "Alice had 1,250.5 and paid 0.75 twice: 1,249.75 left, 1251.25 before."
    start = text.index(":")
    enc = ntok(text, answer_start=start)
    assert enc["number_texts"] == ["1,249.75", "1251.25"]  # 1250.5 - 0.75, then 1250.5 + 0.75
    assert ntok.decode(enc) == text
    assert ntok.decode(enc["input_ids"], num_digits=enc["num_digits"]) == text.replace("1,249.75", "1249.75")
    batch = ntok([text, PROMPT], answer_start=[start, None], padding=True, return_tensors="pt", padding_side="left")
    assert ntok.batch_decode(batch["input_ids"]) == [text, PROMPT]
    assert ntok.decode(batch["input_ids"][0]) == text  # the noted tensor's row
    assert ntok.batch_decode(batch["input_ids"], num_digits=batch["num_digits"]) == [
        text.replace("1,249.75", "1249.75"),
        PROMPT,
    ]


# -- fone_numbers="all" and other encodings are unchanged -------------------------------------------------------------
@pytest.mark.parametrize(
    "settings",
    [{"encoding": "fone"}, {"encoding": "xval", "xval_clip": 1e9}, {"encoding": "digits", "aggregate": True}],
)
def test_answer_start_changes_nothing_outside_answers_mode(tmp_path, settings):
    ntok = make("llama3", tmp_path, fone_numbers="all", **settings)
    texts = [ANSWER, "x -5.25 y", PROMPT]
    for options in ({}, {"padding": True, "return_tensors": "pt"}):
        plain = ntok(texts, **options)
        given = ntok(texts, answer_start=[len(PROMPT), 0, None], **options)
        assert sorted(plain) == sorted(given)
        for key in plain:
            tensor = isinstance(plain[key], torch.Tensor)
            same = torch.equal(plain[key], given[key]) if tensor else plain[key] == given[key]
            assert same, key
    if settings["encoding"] == "fone":  # every in-range number is a [NUM], as before
        assert plain["number_texts"][0] == ["2024", "12", "345", "357", "4140"]
        assert set(plain["num_mask"].unique().tolist()) == {0, 1}


# -- bad input --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("answer_start", "error", "needles"),
    [
        ("5", TypeError, ["`answer_start` must be None, an int or a list", "str"]),
        (1.5, TypeError, ["`answer_start` must be None, an int or a list", "float"]),
        (True, TypeError, ["`answer_start` must be None, an int or a list", "bool"]),
        ([0], ValueError, ["1 entries for a batch of 2 texts", "one offset (or None) per text"]),
        ([0, "1"], TypeError, ["text 1 must be an int", "'1'"]),
        (-1, ValueError, ["text 0 is -1, outside [0, 4]", "len(prompt)"]),
        ([0, 6], ValueError, ["text 1 is 6, outside [0, 5]", "or None for none"]),
        (
            [[(0, 4)], [(2, 9)]],
            ValueError,
            ["text 1 holds the range [2, 9), outside [0, 5]", "ranges within the text"],
        ),
        ([[(3, 1)], None], ValueError, ["text 0 holds the range [3, 1)", "reversed"]),
        ([[(0, "4")], None], TypeError, ["text 0 must be an int", "None or a list of (start, end)"]),
    ],
)
def test_bad_answer_start_names_the_value_and_the_fix(tmp_path, answer_start, error, needles):
    ntok = make("digits", tmp_path)
    with pytest.raises(error) as raised:
        ntok(["a 12", "b 3 4"], answer_start=answer_start)
    for needle in needles:
        assert needle in str(raised.value)
    with pytest.raises(ValueError, match=r"outside \[0, 4\]"):  # checked in every mode
        make("digits", tmp_path, fone_numbers="all")("a 12", answer_start=5)


# -- persistence and matching -----------------------------------------------------------------------------------------
def test_save_and_load_keep_fone_numbers_and_a_mismatched_config_is_refused(tmp_path):
    ntok = make("llama3", tmp_path, fone_context_numbers=3)
    ntok.save_pretrained(tmp_path / "saved")
    loaded = NumberTokenizer.from_pretrained(tmp_path / "saved")
    assert (loaded.config.fone_numbers, loaded.config.fone_context_numbers) == ("answers", 3)
    assert loaded(ANSWER, answer_start=len(PROMPT))["input_ids"] == ntok(ANSWER, answer_start=len(PROMPT))["input_ids"]
    from numadapter.tokenization.matching import tokenizer_mismatches

    other = NumberAdapterConfig(encoding="fone", fone_numbers="all", int_digits=4, frac_digits=2)
    assert tokenizer_mismatches(ntok, other) == {"fone_numbers": ("answers", "all"), "fone_context_numbers": (3, 4)}
    assert tokenizer_mismatches(make("llama3", tmp_path, fone_numbers="all"), other) == {}


# -- random texts -----------------------------------------------------------------------------------------------------
_LOSSLESS: dict[tuple[str, str], NumberTokenizer] = {}


def _lossless(kind: str, sign_policy: str, root) -> NumberTokenizer:
    if (kind, sign_policy) not in _LOSSLESS:
        tok = toy.build_tokenizer(kind, root / f"{kind}-{sign_policy}")
        config = NumberAdapterConfig(
            encoding="fone", int_digits=6, frac_digits=2, sign_policy=sign_policy, fone_numbers="answers"
        )
        _LOSSLESS[kind, sign_policy] = NumberTokenizer(tok, config)
    return _LOSSLESS[kind, sign_policy]


@pytest.mark.parametrize("kind", ["digits", "llama3"])
@pytest.mark.parametrize("sign_policy", ["text", "feature"])
@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT, where=st.floats(0, 1))
def test_random_texts_round_trip_and_rows_sit_on_their_numbers(tmp_path_factory, kind, sign_policy, text, where):
    ntok = _lossless(kind, sign_policy, tmp_path_factory.getbasetemp())
    start = int(where * len(text))
    enc = ntok(text, answer_start=start)
    assert ntok.decode(enc) == text
    spans = [s for s in find_numbers(text) if ExactNumber.parse(s.text).fits(6, 2)]
    found = rows(enc)
    assert len(found) == len(spans)  # no two numbers of these texts share a token
    answers = iter(enc["number_texts"])
    for (t, mask, value), span in zip(found, spans):
        exact = ExactNumber.parse(span.text)
        if sign_policy == "text":
            exact = ExactNumber(1, exact.int_digits, exact.frac_digits)
        assert value == exact.to_float()
        if mask == 1:
            assert span.start >= start and enc["input_ids"][t] == ntok.num_token_id
            assert next(answers) == span.text[len(span.sign_text) if sign_policy == "text" else 0 :]
        else:
            assert span.text.endswith(token_text(ntok, enc["input_ids"][t]))


def test_a_share_in_digits_is_its_value_over_100_as_context(tmp_path):
    """ "x * 30%": the head's context reads 30% as 0.3, so the product is formable (before: 30, so x * 30% was x * 30,
    off by 100 times); a share the places cannot hold keeps its written value; an answer keeps its written value."""
    ntok = make("digits", tmp_path, int_digits=6, frac_digits=2, fone_digit_answers=0.0, fone_context_products=True)
    text = "Save 30% of 3,620: 3,620 * 30% = 1086"
    enc = ntok(text, answer_start=text.index("= ") + 2)
    assert enc["number_texts"] == ["1086"]  # formed: 3620 * 0.3
    rows = [v for v, m in zip(enc["num_values"], enc["num_mask"]) if m == 2]
    assert rows == pytest.approx([0.3, 3620.0, 3620.0, 0.3])
    assert ntok.decode(enc["input_ids"], number_texts=enc["number_texts"]) == text  # the text is untouched
    narrow = make("digits", tmp_path, int_digits=6, frac_digits=0)
    assert [v for v, m in zip(narrow("30% of 5")["num_values"], narrow("30% of 5")["num_mask"]) if m == 2] == [
        30.0,
        5.0,
    ]
    as_share = ntok("Half is", answer_start=None)  # no share: nothing changes
    assert as_share["number_texts"] == []
