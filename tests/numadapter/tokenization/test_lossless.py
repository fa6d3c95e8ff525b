"""Lossless round trips of `NumberTokenizer` on adversarial text, for every encoding (issue 16).

Special-token strings written in a text (``<s>``, ``</s>``, ``<unk>``, ``<pad>``, ``<|begin_of_text|>``, ...) are
encoded as those special tokens, with the base tokenizer's ids (a chat template renders them into the text it
encodes); they come back with ``skip_special_tokens=False``, or with the default decode when the text was encoded
with ``split_special_tokens=True``. ``config.num_token`` and ``config.agg_token`` are refused in every encoding.

The property tests run a modest number of examples in the normal suite; the ``slow`` variant runs 10^4 per encoding and
tokenizer: ``pytest -m slow tests/numadapter/tokenization/test_lossless.py`` (skipped unless ``-m slow`` selects it).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numadapter.config import NumberAdapterConfig
from numadapter.numbers import ExactNumber, find_numbers
from numadapter.testing import toy
from numadapter.tokenization import NumberTokenizer

ENCODINGS = {
    "fone": ("fone", {}),
    "fone-feature-sign": ("fone", {"sign_policy": "feature"}),
    "xval": ("xval", {"sign_policy": "feature", "xval_clip": 1e12}),
    "digits": ("digits", {}),
    "digits-aggregate": ("digits", {"aggregate": True}),
}
KINDS = ("digits", "llama3")  # byte-level: their own round trip is lossless (T5's is not)
SPECIALS = ["<s>", "</s>", "<unk>", "<pad>", "<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>"]


@pytest.fixture(scope="module")
def ntoks(tmp_path_factory):
    root = tmp_path_factory.mktemp("lossless")
    out = {}
    for kind in KINDS:
        for name, (encoding, extra) in ENCODINGS.items():
            tok = toy.build_tokenizer(kind, root / f"{kind}-{name}")
            out[kind, name] = NumberTokenizer(
                tok, NumberAdapterConfig(encoding=encoding, int_digits=6, frac_digits=3, fone_numbers="all", **extra)
            )
    return out


def check_round_trips(ntok: NumberTokenizer, text: str) -> None:
    """Every lossless round trip NumberTokenizer promises, and that the numbers carried are the text's."""
    base = ntok.tokenizer
    specials = [s for s in base.all_special_tokens if s in text]
    kept = ntok(text, add_special_tokens=False)
    assert ntok.decode(kept, skip_special_tokens=False) == text
    split = ntok(text, split_special_tokens=True)
    assert ntok.decode(split) == text
    assert not set(split["input_ids"][1:]) & set(base.all_special_ids)  # the strings are ordinary text now
    if not specials:
        assert ntok.decode(ntok(text)) == text
    if not any(c.isdigit() for c in text):  # no numbers: exactly the base tokenizer's ids
        assert kept["input_ids"] == base(text, add_special_tokens=False)["input_ids"]
        assert split["input_ids"] == base(text, split_special_tokens=True)["input_ids"]
    if ntok.marker_token_id is not None:
        places = ntok.config.int_digits, ntok.config.frac_digits
        at = [t for t, m in enumerate(kept["num_mask"]) if m]
        assert len(at) == len(kept["number_texts"]) == kept["input_ids"].count(ntok.marker_token_id)
        for t, surface in zip(at, kept["number_texts"]):
            exact = ExactNumber.parse(surface)
            assert kept["num_digits"][t] == exact.place_digits(*places)
            assert kept["num_sign"][t] == exact.sign
            assert kept["num_values"][t] == exact.to_float()
        assert kept["number_texts"] == split["number_texts"]


# -- special-token strings, hand-checked ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ENCODINGS)
def test_special_token_strings_round_trip(ntoks, kind, name):
    ntok = ntoks[kind, name]
    base = ntok.tokenizer
    bos, eos = base.bos_token, base.eos_token
    text = f"{bos}Paid <s>12</s> and <unk>-3.5<pad> {eos}: <|end_of_text|>7 {eos}"
    check_round_trips(ntok, text)
    kept = ntok(text, add_special_tokens=False)
    assert kept["input_ids"][0] == base.bos_token_id  # a chat template's rendered bos is the bos token
    assert kept["input_ids"].count(base.eos_token_id) == text.count(eos) >= 2
    # the default decode drops special tokens, written or added, as transformers does
    dropped = base.decode(base(text, add_special_tokens=False)["input_ids"], skip_special_tokens=True)
    assert ntok.decode(kept) == dropped
    assert ntok.decode(ntok(text, split_special_tokens=True)) == text


@pytest.mark.parametrize("name", ENCODINGS)
def test_chat_template_keeps_special_tokens(ntoks, name):
    ntok = ntoks["llama3", name]
    ntok.tokenizer.chat_template = (
        "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{{ eos_token }}{% endfor %}"
    )
    messages = [{"role": "user", "content": "2 + 3.5 = ?"}, {"role": "assistant", "content": "5.5"}]
    text = ntok.apply_chat_template(messages, tokenize=False)
    enc = ntok.apply_chat_template(messages)
    assert enc["input_ids"][0] == ntok.tokenizer.bos_token_id  # once: rendered by the template, not added again
    assert enc["input_ids"].count(ntok.tokenizer.bos_token_id) == 1
    assert enc["input_ids"].count(ntok.tokenizer.eos_token_id) == 2
    assert ntok.decode(enc, skip_special_tokens=False) == text


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("field", ["num_token", "agg_token"])
def test_marker_strings_are_refused_in_every_encoding(ntoks, name, field):
    ntok = ntoks["digits", name]
    reserved = getattr(ntok.config, field)
    for split in (False, True):
        with pytest.raises(ValueError, match=rf"Text 1 .*'\[...\]' \(config\.{field}\) at character 4: .*`{field}`"):
            ntok(["ok 1", f"a 5 {reserved} b"], split_special_tokens=split)
    assert ntok.decode(ntok("a 5 (NUM) (AGG) b")) == "a 5 (NUM) (AGG) b"  # the rewrite the error suggests


def test_digits_aggregate_never_decodes_the_agg_marker(ntoks):
    ntok = ntoks["llama3", "digits-aggregate"]
    enc = ntok("x 12 y", add_special_tokens=False)
    assert ntok.agg_token_id in enc["input_ids"]
    assert ntok.decode(enc, skip_special_tokens=False) == "x 12 y"


def test_split_special_tokens_must_be_a_bool(ntoks):
    with pytest.raises(TypeError, match="split_special_tokens"):
        ntoks["digits", "fone"]("a 1", split_special_tokens="yes")


# -- property: adversarial text ---------------------------------------------------------------------------------------
_DIGITS = st.text("0123456789", min_size=1, max_size=12)
_SIGN = st.sampled_from(["", "", "-", "+", "\u2212"])
_NUMBER = st.one_of(
    st.tuples(_SIGN, _DIGITS).map("".join),
    st.tuples(_SIGN, _DIGITS, _DIGITS).map(lambda p: f"{p[0]}{p[1]}.{p[2]}"),
    st.tuples(_SIGN, _DIGITS).map(lambda p: f"{p[0]}.{p[1]}"),
    st.tuples(_SIGN, st.integers(0, 10**12)).map(lambda p: f"{p[0]}{p[1]:,}"),
    st.tuples(_SIGN, st.integers(0, 10**7), _DIGITS).map(lambda p: f"{p[0]}{p[1]:,}.{p[2]}"),
    st.tuples(_SIGN, _DIGITS, st.sampled_from("eE"), _SIGN, st.integers(0, 40)).map(lambda p: "".join(map(str, p))),
    st.tuples(_DIGITS, _DIGITS, st.sampled_from("eE"), _SIGN, st.integers(0, 999)).map(
        lambda p: f"{p[0]}.{p[1]}{p[2]}{p[3]}{p[4]}"
    ),
    st.sampled_from(["-0", "+0.0", ".5", "1.2.3", "192.168.0.1", "1,23", "1,234,56", "5.", "...5", "x.5", "1e99999"]),
    st.sampled_from(["0x3e5", "3e5f", "H2O", "COVID-19", "3rd", "$5", "12%", "\u20ac3.50", "(-4)", "5 -3", "a-7"]),
    st.sampled_from(["\u0663\u0664", "\uff11\uff12", "\u0967\u0968.\u096b", "-\u0663.\u0665", "\u00b2", "\u2155"]),
)
_TEXT_PIECE = st.one_of(
    _NUMBER,
    st.sampled_from(["the", "na\u00efve", "\u65e5\u672c", "caf\u00e9", "\u2014", "\u2013", "x", "e", "\U0001f600"]),
    st.sampled_from([" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2009", "\u200b", "", "\u0301"]),
    st.sampled_from([".", ",", "-", "+", "(", ")", ":", "'", "_", "\u2212", "[", "]", "<", ">", "/", "|"]),
    st.sampled_from(SPECIALS),
    st.text(max_size=3),
)
_TEXT = st.lists(_TEXT_PIECE, max_size=16).map("".join).filter(lambda t: "[NUM]" not in t and "[AGG]" not in t)


def _all_pass(ntoks, text: str) -> None:
    find_numbers(text)  # never raises on a str
    for ntok in ntoks.values():
        check_round_trips(ntok, text)


_FAST = settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])


@_FAST
@given(text=_TEXT)
def test_round_trips_are_lossless(ntoks, text):
    _all_pass(ntoks, text)


@pytest.mark.slow
@settings(deadline=None, max_examples=10_000, suppress_health_check=list(HealthCheck))
@given(text=_TEXT)
def test_round_trips_are_lossless_slow(ntoks, text):
    _all_pass(ntoks, text)
