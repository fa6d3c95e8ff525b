"""Checks of the tiny test tokenizers (`numadapter.testing.toy`) and models (`tests/helpers/tiny.py`) the other tests
build on."""

from __future__ import annotations

import pytest
import torch
from helpers import tiny

from numadapter.testing import toy


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    return {kind: toy.build_tokenizer(kind, root / kind) for kind in toy.TOKENIZER_KINDS}


@pytest.mark.parametrize("kind", toy.TOKENIZER_KINDS)
def test_every_digit_is_one_token(tokenizers, kind):
    tok = tokenizers[kind]
    for digit in "0123456789":
        token_id = tok.convert_tokens_to_ids(digit)
        assert token_id is not None and token_id != tok.unk_token_id, (kind, digit)
        assert tok.convert_ids_to_tokens(token_id) == digit


@pytest.mark.parametrize("kind", toy.TOKENIZER_KINDS)
def test_special_tokens_match_spec(tokenizers, kind):
    tok, spec = tokenizers[kind], toy.CONFIGS[kind]
    assert tok.eos_token_id == spec.eos_token_id
    assert tok.pad_token_id == spec.pad_token_id
    assert tok.bos_token_id == spec.bos_token_id
    ids = tok("abc")["input_ids"]
    if kind == "t5":
        assert ids[-1] == 1 and tok.pad_token_id == 0 and tok.unk_token_id == 2
    else:
        assert ids[0] == spec.bos_token_id and ids[-1] != spec.eos_token_id


def test_digits_kind_splits_every_digit(tokenizers):
    tok = tokenizers["digits"]
    pieces = tok.convert_ids_to_tokens(tok("x 12345.67", add_special_tokens=False)["input_ids"])
    assert [p for p in pieces if any(c.isdigit() for c in p)] == ["1", "2", "3", "4", "5", "6", "7"]


def test_llama3_groups_digits_in_runs_of_three(tokenizers):
    tok = tokenizers["llama3"]
    pieces = tok.convert_ids_to_tokens(tok("12345", add_special_tokens=False)["input_ids"])
    assert "".join(pieces) == "12345"
    assert all(len(p) <= 3 for p in pieces)
    # the pre-tokenizer cuts "123" | "45", so a token boundary falls after the third digit
    boundaries = {sum(len(p) for p in pieces[: i + 1]) for i in range(len(pieces))}
    assert 3 in boundaries
    vocab = tok.get_vocab()
    assert sum(1 for p in vocab if p.isdigit() and len(p) == 2) >= 5
    assert sum(1 for p in vocab if p.isdigit() and len(p) == 3) >= 5


def test_t5_has_metaspace_pieces(tokenizers):
    tok = tokenizers["t5"]
    vocab = tok.get_vocab()
    assert "\u2581the" in vocab
    for digit in "0123456789":
        assert "\u2581" + digit in vocab
    pieces = tok.convert_ids_to_tokens(tok("the 7", add_special_tokens=False)["input_ids"])
    assert pieces == ["\u2581the", "\u25817"]


@pytest.mark.parametrize("kind", ["digits", "llama3"])
def test_byte_level_kinds_are_lossless(tokenizers, kind):
    tok = tokenizers[kind]
    text = "  Tab\there, 1,234.50\n\nnaïve 日本 -007  "
    assert tok.decode(tok(text)["input_ids"], skip_special_tokens=True) == text


def test_t5_round_trip_collapses_space_runs(tokenizers):
    tok = tokenizers["t5"]
    assert tok.decode(tok("a  b 12")["input_ids"], skip_special_tokens=True) == "a b 12"


def test_unknown_kind_is_refused(tmp_path):
    with pytest.raises(ValueError, match="bpe"):
        toy.build_tokenizer("bpe", tmp_path)


def _logits(model, ids):
    with torch.no_grad():
        if model.config.model_type == "t5":
            return model(input_ids=ids, decoder_input_ids=ids).logits
        return model(input_ids=ids).logits


@pytest.mark.parametrize("family", tiny.MODEL_FAMILIES)
@pytest.mark.parametrize("tie", [False, True])
def test_model_reloads_identically_and_ties(tmp_path, family, tie):
    model = tiny.build_model(family, tmp_path, vocab_size=50, tie=tie, hidden_size=32, layers=1, heads=2)
    assert not model.training
    assert model.dtype == torch.float32
    assert model.get_input_embeddings().weight.shape == (50, 32)
    again = tiny.reload_model(family, tmp_path)
    ids = torch.tensor([[1, 5, 7, 9, 11]])
    assert torch.equal(_logits(model, ids), _logits(again, ids))
    out, inp = model.get_output_embeddings().weight, model.get_input_embeddings().weight
    assert (out.data_ptr() == inp.data_ptr()) is tie
    assert tiny.is_tied(model) is tie
    if not tie:
        assert not torch.equal(out, inp)
    if family == "t5":
        # encoder and decoder always share one embedding; the v1.0-style tie also scales decoder outputs
        assert model.encoder.embed_tokens.weight.data_ptr() == model.shared.weight.data_ptr()
        assert model.decoder.embed_tokens.weight.data_ptr() == model.shared.weight.data_ptr()
        assert model.config.scale_decoder_outputs is tie


def test_granite_multipliers_are_non_trivial(tmp_path):
    model = tiny.build_model("granite", tmp_path, vocab_size=40, hidden_size=32, layers=1, heads=2)
    cfg = model.config
    assert cfg.embedding_multiplier == 12.0 and cfg.logits_scaling == 8.0
    assert cfg.residual_multiplier == 0.22 and cfg.attention_multiplier == 0.0078125


def test_tokenizer_and_model_sizes_match(tmp_path):
    tok, model = tiny.tokenizer_and_model("t5", "t5", tmp_path, hidden_size=32, layers=1, heads=2)
    assert model.get_input_embeddings().weight.shape[0] == len(tok)
    assert model.config.decoder_start_token_id == tok.pad_token_id == 0
    assert model.config.eos_token_id == tok.eos_token_id == 1
