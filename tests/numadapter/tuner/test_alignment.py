"""Alignment of hidden states, labels and number tensors, pinned with hand-made tensors and, end to end, with the
real models: a number influences exactly the positions it should (docs/DESIGN.md, "One function owns each
alignment")."""

from __future__ import annotations

import pytest
import torch
from helpers.adapter_cases import Case, Store, build, make_batch, make_config

from numadapter.mapping import get_peft_model
from numadapter.tokenization import NumberTokenizer
from numadapter.tuner.alignment import causal_lm_labels, causal_targets, seq2seq_targets, shift_right_numbers
from numadapter.tuner.side_buffer import NumberInputs

NUM = 99


def numbers(mask, digits, sign=None, values=None) -> NumberInputs:
    return NumberInputs(
        mask=torch.tensor([mask]),
        digits=torch.tensor([digits]),
        sign=None if sign is None else torch.tensor([sign]),
        values=None if values is None else torch.tensor([values]),
    )


def test_causal_targets_read_the_number_at_t_plus_1():
    # ids:    a  [NUM]=12  b  [NUM]=34  c ; the second [NUM] is not trained (label -100)
    side = numbers([0, 1, 0, 1, 0], [[0, 0], [1, 2], [0, 0], [3, 4], [0, 0]], [0, -1, 0, 1, 0], [0, -12.0, 0, 34, 0])
    labels = torch.tensor([[10, NUM, 11, -100, 12]])
    got = causal_targets(labels, NUM, side)
    assert got.mask.tolist() == [[True, False, False, False, False]]
    assert got.digits.tolist() == [[[1, 2], [0, 0], [0, 0], [0, 0], [0, 0]]]
    assert got.sign.tolist() == [[-1, 1, 1, 1, 1]]
    assert got.values.tolist() == [[-12.0, 0.0, 0.0, 0.0, 0.0]]


def test_causal_targets_last_position_has_no_target():
    side = numbers([0, 0, 1], [[0], [0], [7]])
    got = causal_targets(torch.tensor([[5, 6, NUM]]), NUM, side)
    assert got.mask.tolist() == [[False, True, False]]
    assert got.digits.tolist() == [[[0], [7], [0]]]


def test_causal_lm_labels_shift_left():
    assert causal_lm_labels(torch.tensor([[1, 2, 3], [4, -100, 6]])).tolist() == [[2, 3, -100], [-100, 6, -100]]


def test_seq2seq_targets_read_the_label_at_t():
    side = numbers([1, 0, 1, 0], [[5], [0], [6], [0]], [1, 0, -1, 0], [5.0, 0, -6.0, 0])
    got = seq2seq_targets(torch.tensor([[NUM, 3, NUM, 1]]), NUM, side)
    assert got.mask.tolist() == [[True, False, True, False]]
    assert got.digits.tolist() == [[[5], [0], [6], [0]]]
    assert got.sign.tolist() == [[1, 1, -1, 1]]


def test_shift_right_numbers_follow_the_decoder_inputs():
    # labels:            [NUM]=5  3  [NUM]=6  1 ; decoder inputs: <start> [NUM] 3 [NUM]
    side = numbers([1, 0, 1, 0], [[5], [0], [6], [0]], [1, 0, -1, 0], [5.0, 0, -6.0, 0])
    got = shift_right_numbers(side, torch.tensor([[0, NUM, 3, NUM]]), NUM)
    assert got.mask.tolist() == [[0, 1, 0, 1]]
    assert got.digits.tolist() == [[[0], [5], [0], [6]]]
    assert got.sign.tolist() == [[0, 1, 0, -1]]
    assert got.values.tolist() == [[0.0, 5.0, 0.0, -6.0]]


def test_shift_right_numbers_drop_numbers_where_t5_feeds_pad():
    # the label [NUM] at position 0 was not trained (-100), so T5 feeds pad (0) at decoder position 1
    side = numbers([1, 0, 0], [[5], [0], [0]])
    got = shift_right_numbers(side, torch.tensor([[0, 0, 3]]), NUM)
    assert got.mask.tolist() == [[0, 0, 0]]


# -- end to end: a number's features reach exactly the positions the alignment says ------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("alignment")))


def first_number(mask: torch.Tensor) -> tuple[int, int]:
    return tuple(mask.nonzero()[0].tolist())


@pytest.mark.parametrize("family", ["llama", "granite"])
def test_causal_number_changes_logits_from_its_position_on(store, family):
    case = Case(family, "fone", tie=False)
    model, ntok, _ = build(store, case)
    model.eval()
    batch = make_batch(case, ntok)
    b, p = first_number(batch["num_mask"])
    other = dict(batch, num_digits=batch["num_digits"].clone())
    other["num_digits"][b, p] = (other["num_digits"][b, p] + 1) % 10
    with torch.no_grad():
        one, two = model(**batch), model(**other)
    assert torch.equal(one.logits[b, :p], two.logits[b, :p])
    assert not torch.equal(one.logits[b, p], two.logits[b, p])
    # the head at p-1 is trained on this number: its outputs are unchanged, its loss (the target) is not
    assert torch.equal(one.number_logits[b, :p], two.number_logits[b, :p])
    assert not torch.equal(one.number_loss, two.number_loss)


def test_t5_encoder_and_decoder_numbers_reach_their_own_side(store):
    case = Case("t5", "fone", tie=True)
    model, ntok, _ = build(store, case)
    model.eval()
    batch = make_batch(case, ntok)
    with torch.no_grad():
        reference = model(**batch)
    # encoder side: a changed input number changes the decoder logits everywhere (cross-attention)
    enc = dict(batch, num_digits=batch["num_digits"].clone())
    b, p = first_number(batch["num_mask"])
    enc["num_digits"][b, p] = (enc["num_digits"][b, p] + 1) % 10
    # decoder side: a changed label number enters the decoder one position later (shifted right)
    dec = dict(batch, labels_num_digits=batch["labels_num_digits"].clone())
    lb, lp = first_number(batch["labels_num_mask"])
    dec["labels_num_digits"][lb, lp] = (dec["labels_num_digits"][lb, lp] + 1) % 10
    with torch.no_grad():
        by_encoder, by_decoder = model(**enc), model(**dec)
    assert not torch.equal(by_encoder.logits[b, 0], reference.logits[b, 0])
    assert torch.equal(by_decoder.logits[lb, : lp + 1], reference.logits[lb, : lp + 1])
    assert not torch.equal(by_decoder.logits[lb, lp + 1], reference.logits[lb, lp + 1])
    # and the head at lp is trained on that label number: same head outputs up to lp, another loss
    assert torch.equal(by_decoder.number_logits[lb, : lp + 1], reference.number_logits[lb, : lp + 1])
    assert not torch.equal(by_decoder.number_loss, reference.number_loss)


def test_t5_sides_stay_apart_when_encoder_and_decoder_share_one_embedding_module(store):
    """One embedding module object for encoder and decoder (as after transformers' `set_input_embeddings`): the side
    comes from the stack being run, not from the module."""
    case = Case("t5", "xval", tie=True)
    tokenizer = store.tokenizer("t5")
    model = get_peft_model(store.base("t5", True), make_config(case), tokenizer=tokenizer)
    inner = model.get_base_model()
    inner.encoder.embed_tokens = inner.decoder.embed_tokens = inner.shared  # one module object serves both sides
    ntok = NumberTokenizer(tokenizer, model.peft_config["default"])
    batch = make_batch(case, ntok)
    model.eval()
    dec = dict(batch, labels_num_values=batch["labels_num_values"] + 1.0)
    lb, lp = first_number(batch["labels_num_mask"])
    with torch.no_grad():
        reference, by_decoder = model(**batch), model(**dec)
    assert torch.equal(by_decoder.logits[lb, : lp + 1], reference.logits[lb, : lp + 1])
    assert not torch.equal(by_decoder.logits[lb, lp + 1], reference.logits[lb, lp + 1])


@pytest.mark.parametrize("family", ["llama", "granite"])
def test_incremental_decoding_with_cache_matches_full_forward(store, family):
    """What the generation loop does: feed one token (and its number tensors) at a time with the KV cache."""
    case = Case(family, "fone", tie=True)
    model, ntok, _ = build(store, case)
    model.eval()
    batch = {k: v[:1] for k, v in make_batch(case, ntok).items() if k != "labels"}
    _, p = first_number(batch["num_mask"])
    with torch.no_grad():
        full = model(**batch)
        prefix = model(**{k: v[:, :p] for k, v in batch.items()}, use_cache=True)
        one = {k: v[:, p : p + 1] for k, v in batch.items() if k != "attention_mask"}
        mask = batch["attention_mask"][:, : p + 1]  # with a cache the mask covers past + new tokens
        step = model(**one, attention_mask=mask, past_key_values=prefix.past_key_values)
    torch.testing.assert_close(step.logits[:, 0], full.logits[:, p])
    torch.testing.assert_close(step.number_logits[:, 0], full.number_logits[:, p])


def test_t5_decoder_step_with_decoder_numbers(store):
    case = Case("t5", "fone", tie=False)
    model, ntok, config = build(store, case)
    model.eval()
    batch = make_batch(case, ntok)
    labels = batch["labels"][:1]
    decoder_ids = model.get_base_model()._shift_right(labels)
    lb, lp = first_number(batch["labels_num_mask"][:1])
    shifted = {f"decoder_num_{k}": torch.nn.functional.pad(batch[f"labels_num_{k}"][:1, :-1], (0, 0, 1, 0)
               if k == "digits" else (1, 0)) for k in ("mask", "digits", "sign", "values")}  # fmt: skip
    encoder_inputs = {k: batch[k][:1] for k in ("input_ids", "attention_mask", "num_mask", "num_digits", "num_sign")}
    with torch.no_grad():
        full = model(**encoder_inputs, labels=labels, labels_num_mask=batch["labels_num_mask"][:1],
                     labels_num_digits=batch["labels_num_digits"][:1], labels_num_sign=batch["labels_num_sign"][:1],
                     labels_num_values=batch["labels_num_values"][:1])  # fmt: skip
        explicit = model(**encoder_inputs, decoder_input_ids=decoder_ids, **shifted)
    assert decoder_ids[0, lp + 1] == config.num_token_id
    torch.testing.assert_close(explicit.logits, full.logits)


# -- shift_labels: a causal sequence that ends where the number is predicted ------------------------------------------
ANSWERED = ["a 12.5 + 7 = 19.5", "b 3 + 40.25 = 43.25"]  # equal lengths; the answer is the last token


def _answer_forms(batch: dict, num_id: int) -> tuple[dict, dict]:
    """The same training signal twice: (a) the whole sequence with `labels` only on the answer [NUM], (b) the
    sequence without its last token, `shift_labels` on the new last position and the answer in `labels_num_*`."""
    assert bool((batch["input_ids"][:, -1] == num_id).all())
    labels = torch.full_like(batch["input_ids"], -100)
    labels[:, -1] = num_id
    full = dict(batch, labels=labels)
    head = {key: value[:, :-1] for key, value in batch.items()}
    shift_labels = torch.full_like(head["input_ids"], -100)
    shift_labels[:, -1] = num_id
    head["shift_labels"] = shift_labels
    for key in ("mask", "digits", "sign", "values"):
        side = torch.zeros_like(batch[f"num_{key}"][:, :-1])
        side[:, -1] = batch[f"num_{key}"][:, -1]
        head[f"labels_num_{key}"] = side
    return full, head


@pytest.mark.parametrize(
    "encoding,overrides", [("fone", {}), ("fone", {"fone_head_target": "feature"}), ("xval", {})], ids=str
)
def test_shift_labels_train_the_last_position_like_labels_on_the_fed_answer(store, encoding, overrides):
    case = Case("llama", encoding, tie=False)
    model, ntok, config = build(store, case, **overrides)
    enc = ntok(ANSWERED, return_tensors="pt")
    full, head = _answer_forms({k: v for k, v in enc.items() if k != "number_texts"}, config.num_token_id)
    model.train()
    by_labels = model(**full)
    grads = torch.autograd.grad(by_labels.loss, [p for p in model.parameters() if p.requires_grad], allow_unused=True)
    by_shift = model(**head)
    grads_shift = torch.autograd.grad(by_shift.loss, [p for p in model.parameters() if p.requires_grad],
                                      allow_unused=True)  # fmt: skip
    assert by_shift.number_loss > 0
    torch.testing.assert_close(by_shift.number_loss, by_labels.number_loss)
    torch.testing.assert_close(by_shift.loss, by_labels.loss)
    torch.testing.assert_close(by_shift.logits, by_labels.logits[:, :-1])
    used = [(a, b) for a, b in zip(grads, grads_shift) if a is not None or b is not None]
    assert used
    for a, b in used:
        torch.testing.assert_close(a, b)
    # the target is read from labels_num_*: another answer gives another loss
    other = dict(head, labels_num_digits=(head["labels_num_digits"] + 1) % 10,
                 labels_num_values=head["labels_num_values"] + 1.0)  # fmt: skip
    assert not torch.equal(model(**other).number_loss, by_shift.number_loss)
