"""The loss of `NumberAdapterModel.forward` against independent reference computations.

References are written out here from the definitions (torch cross-entropy, the FoNE digit CE, the xVal MSE on
normalised values, the other modules' NTL / aggregate functions on hand-aligned tensors), never by calling the
adapter's own loss code.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers.adapter_cases import Case, Store, build, make_batch

from numadapter.methods.aggregate.embedding import aggregate_loss
from numadapter.ntl import NTLoss, digit_ntl
from numadapter.tuner.patches import base_weight


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("loss")))


def fone_reference(number_logits, sign_logits, digits, sign, where, count):
    """Sum over the target numbers of (mean digit CE + sign CE), divided by the scored-token count."""
    b, t = where
    logits = number_logits[b, t].float()  # (N, P, 10)
    per_number = F.cross_entropy(logits.reshape(-1, 10), digits.reshape(-1), reduction="none")
    per_number = per_number.reshape(digits.shape).mean(-1)
    if sign_logits is not None:
        per_number = per_number + F.cross_entropy(sign_logits[b, t].float(), (sign < 0).long(), reduction="none")
    return per_number.sum() / count


def test_causal_fone_loss_matches_reference(store):
    case = Case("llama", "fone", tie=False)
    model, ntok, config = build(
        store, case, number_loss_weight=0.7, fone_head_target="digit", fone_head_input="linear"
    )  # the paper's head
    batch = make_batch(case, ntok)
    out = model(**batch)
    labels, num = batch["labels"], config.num_token_id
    shifted = labels[:, 1:]
    count = (shifted != -100).sum()
    lm = F.cross_entropy(out.logits[:, :-1].reshape(-1, out.logits.shape[-1]), shifted.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(out.lm_loss, lm)
    where = (shifted == num).nonzero(as_tuple=True)  # hidden t predicts the [NUM] at t + 1
    digits = batch["num_digits"][where[0], where[1] + 1]
    sign = batch["num_sign"][where[0], where[1] + 1]
    assert len(where[0]) == 3  # 12.5, 7 and -3 (sign_policy="feature": one [NUM] each)
    ref = fone_reference(out.number_logits, out.number_sign_logits, digits, sign, where, count)
    torch.testing.assert_close(out.number_loss, ref)
    torch.testing.assert_close(out.loss, lm + 0.7 * ref)
    assert out.ntl_loss is None and out.aggregate_loss is None


def test_t5_fone_loss_matches_reference(store):
    case = Case("t5", "fone", tie=False)
    model, ntok, config = build(store, case, fone_head_target="digit", fone_head_input="linear")  # the paper's head
    batch = make_batch(case, ntok)
    out = model(**batch)
    labels = batch["labels"]
    lm = F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(out.lm_loss, lm)
    where = (labels == config.num_token_id).nonzero(as_tuple=True)  # decoder hidden t predicts labels[t]
    assert len(where[0]) == 2
    digits, sign = batch["labels_num_digits"][where], batch["labels_num_sign"][where]
    ref = fone_reference(out.number_logits, out.number_sign_logits, digits, sign, where, (labels != -100).sum())
    torch.testing.assert_close(out.number_loss, ref)


def test_xval_loss_is_mse_of_normalised_values(store):
    case = Case("llama", "xval", tie=True)
    model, ntok, config = build(store, case, xval_center=1.0, xval_scale=4.0)
    batch = make_batch(case, ntok)
    out = model(**batch)
    shifted = batch["labels"][:, 1:]
    b, t = (shifted == config.num_token_id).nonzero(as_tuple=True)
    target = (batch["num_values"][b, t + 1].double() - 1.0) / 4.0
    pred = (out.number_values[b, t] - 1.0) / 4.0
    ref = ((pred - target) ** 2).sum() / (shifted != -100).sum()
    torch.testing.assert_close(out.number_loss.double(), ref, rtol=1e-5, atol=1e-6)


def test_digits_loss_is_lambda_mix_plus_ntl(store):
    case = Case("llama", "digits", tie=False)
    model, ntok, config = build(store, case)  # aggregate, lambda 0.5, ntl 0.3
    batch = make_batch(case, ntok)
    out = model(**batch)
    logits, shifted = out.logits[:, :-1], batch["labels"][:, 1:]
    count = (shifted != -100).sum()
    digit_ids = [ntok.tokenizer.convert_tokens_to_ids(d) for d in "0123456789"]

    class DigitVocab:
        def get_vocab(self):
            return {d: i for d, i in zip("0123456789", digit_ids)}

    ntl = NTLoss(DigitVocab(), kind="was", reduction="sum")(logits, shifted) / count
    torch.testing.assert_close(out.ntl_loss, ntl)
    weight = base_weight(model.get_input_embeddings())
    aux = aggregate_loss(logits, shifted, digit_ids, weight, lam=0.5).aux
    torch.testing.assert_close(out.aggregate_loss, aux)
    torch.testing.assert_close(out.loss, 0.5 * out.lm_loss + 0.5 * aux + 0.3 * ntl)
    assert out.number_loss is None and out.number_logits is None


def test_fone_ntl_uses_the_digit_head(store):
    case = Case("llama", "fone", tie=True)
    model, ntok, config = build(
        store, case, ntl_weight=0.2, fone_head_target="digit", fone_head_input="linear"
    )  # NTL on the paper's head
    batch = make_batch(case, ntok)
    out = model(**batch)
    shifted = batch["labels"][:, 1:]
    b, t = (shifted == config.num_token_id).nonzero(as_tuple=True)
    per_place = digit_ntl(out.number_logits[b, t], batch["num_digits"][b, t + 1], "was", reduction="none")
    ref = per_place.mean(-1).sum() / (shifted != -100).sum()
    torch.testing.assert_close(out.ntl_loss, ref)
    torch.testing.assert_close(out.loss, out.lm_loss + out.number_loss + 0.2 * ref)


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_gradient_accumulation_equals_one_batch(store, family):
    case = Case(family, "fone", tie=False)
    model, ntok, _ = build(store, case)
    batch = make_batch(case, ntok)
    labels = batch["labels"]
    total = int(((labels[:, 1:] if family != "t5" else labels) != -100).sum())
    full = model(**batch, num_items_in_batch=total)
    full.loss.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    losses = []
    for row in range(labels.shape[0]):
        half = {k: v[row : row + 1] for k, v in batch.items()}
        out = model(**half, num_items_in_batch=total)
        out.loss.backward()
        losses.append(out.loss)
    torch.testing.assert_close(sum(losses), full.loss)
    for name, grad in want.items():
        torch.testing.assert_close(dict(model.named_parameters())[name].grad, grad, rtol=1e-4, atol=1e-6)


def test_num_items_in_batch_divides_every_term(store):
    case = Case("llama", "fone", tie=True)
    model, ntok, _ = build(store, case)
    batch = make_batch(case, ntok)
    local = (batch["labels"][:, 1:] != -100).sum()
    plain, scaled = model(**batch), model(**batch, num_items_in_batch=100)
    torch.testing.assert_close(scaled.lm_loss * 100, plain.lm_loss * local)
    torch.testing.assert_close(scaled.number_loss * 100, plain.number_loss * local)


def test_without_labels_no_loss_but_head_outputs(store):
    case = Case("granite", "fone", tie=True)
    model, ntok, config = build(store, case)
    batch = {k: v for k, v in make_batch(case, ntok).items() if k != "labels"}
    out = model(**batch)
    assert out.loss is None and out.lm_loss is None
    b, t = batch["input_ids"].shape
    assert out.number_logits.shape == (b, t, config.num_places, 10)
    as_tuple = model(**batch, return_dict=False)
    assert isinstance(as_tuple, tuple) and torch.equal(as_tuple[0], out.logits)


def test_gradient_checkpointing_gives_the_same_gradients(store):
    case = Case("granite", "fone", tie=False)
    model, ntok, _ = build(store, case)
    batch = make_batch(case, ntok)
    model.train()
    plain = model(**batch)
    plain.loss.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    checkpointed = model(**batch)
    checkpointed.loss.backward()
    torch.testing.assert_close(checkpointed.loss, plain.loss)
    got = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert set(got) == set(want)
    for name, grad in want.items():
        torch.testing.assert_close(got[name], grad)


def test_fone_feature_target_loss_and_ntl_match_reference(store):
    """fone_head_target="feature": place j's candidates are phi((c + f_j) / 10) with f_j the target's lower digits
    as a fraction; the digit CE and FoNE-NTL score those logits (written out here from the head's projection)."""
    case = Case("llama", "fone", tie=False)
    model, ntok, config = build(
        store, case, fone_head_target="feature", fone_head_input="linear", ntl_weight=0.2, sign_policy="text"
    )
    batch = make_batch(case, ntok)
    head = model.base_model.number_modules["default"].head
    seen = []
    handle = head.register_forward_hook(lambda module, args, output: seen.append(args[0].detach()))
    out = model(**batch)
    handle.remove()
    hidden = seen[0]  # (B, T, H): the head's first call reads every position
    shifted = batch["labels"][:, 1:]
    count = (shifted != -100).sum()
    b, t = (shifted == config.num_token_id).nonzero(as_tuple=True)
    digits = batch["num_digits"][b, t + 1]  # (N, P), most significant first
    pairs = F.linear(hidden[b, t], head.proj.weight, head.proj.bias).unflatten(-1, (-1, 2)).flip(-2)  # (N, P, 2)
    places = digits.shape[-1]
    lower = torch.zeros(digits.shape)
    for j in range(places - 1):
        lower[:, j] = sum(digits[:, k].float() * 10.0 ** (j - k) for k in range(j + 1, places))
    angle = (torch.arange(10.0) + lower[..., None]) * (2 * torch.pi / 10)  # (N, P, 10)
    logits = pairs[..., :1] * torch.cos(angle) + pairs[..., 1:] * torch.sin(angle)
    ce = F.cross_entropy(logits.reshape(-1, 10), digits.reshape(-1), reduction="none").reshape(digits.shape)
    torch.testing.assert_close(out.number_loss, ce.mean(-1).sum() / count, rtol=1e-5, atol=1e-6)
    ntl = digit_ntl(logits, digits, "was", reduction="none").mean(-1).sum() / count
    torch.testing.assert_close(out.ntl_loss, ntl, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.loss, out.lm_loss + out.number_loss + 0.2 * ntl)
