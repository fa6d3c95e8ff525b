"""Tests for numadapter.methods.xval.embedding (normalisation, XValEmbedding, form resolution) and the xVal
RegressionHead."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
import torch
from transformers import BertConfig, GPT2Config, GraniteConfig, LlamaConfig, MistralConfig, Qwen2Config, T5Config
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from numadapter.config import NumberAdapterConfig
from numadapter.methods.xval.embedding import (
    XValEmbedding,
    denormalize,
    fit_normalization,
    normalize,
    resolve_xval_form,
    xval_in_range,
)
from numadapter.methods.xval.head import RegressionHead
from numadapter.numbers import NumberOutOfRangeError


def xval_config(**kwargs) -> NumberAdapterConfig:
    return NumberAdapterConfig(encoding="xval", **kwargs)


# -- normalisation ----------------------------------------------------------------------------------------------------


def test_fit_absmax_by_hand():
    # max|x| = 3, clip = 5 -> scale = 3 / 5 = 0.6, center 0; 3 maps to exactly the limit 5 and is accepted.
    center, scale = fit_normalization([-2.0, 1.0, 3.0], method="absmax", clip=5.0)
    assert center == 0.0
    assert scale == pytest.approx(0.6, rel=1e-12)
    z = normalize(torch.tensor([-2.0, 1.0, 3.0], dtype=torch.float64), center, scale, 5.0)
    assert z.tolist() == pytest.approx([-10 / 3, 5 / 3, 5.0], rel=1e-12)
    assert z.abs().max().item() <= 5.0


def test_fit_standard_by_hand():
    # mean(1, 2, 3, 4) = 2.5; population variance = (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25 -> std = sqrt(1.25);
    # the widest deviation 1.5 / 5 = 0.3 < std, so the scale stays the std.
    center, scale = fit_normalization([1.0, 2.0, 3.0, 4.0], method="standard", clip=5.0)
    assert center == pytest.approx(2.5)
    assert scale == pytest.approx(math.sqrt(1.25), rel=1e-12)


def test_fit_standard_widens_for_outliers():
    # 99 zeros and one 100: mean 1, E[x^2] = 100, variance 100 - 1 = 99 -> std 9.95; deviation of 100 from the mean is
    # 99 and 99 / 9.95 = 9.95 std > clip 5, so the scale widens to 99 / 5 = 19.8 and every value is in range.
    values = [0.0] * 99 + [100.0]
    center, scale = fit_normalization(values, method="standard", clip=5.0)
    assert center == pytest.approx(1.0)
    assert scale == pytest.approx(19.8, rel=1e-12)
    normalize(torch.tensor(values, dtype=torch.float32), center, scale, 5.0)  # must not raise


def test_fit_is_accepted_by_normalize_on_float32_values():
    # The fitted scale must accept every fitted value as the tokenizer stores it (float32), including the extremes.
    values = torch.tensor([0.1, -7.3, 123.456, 1e-3, 99.99], dtype=torch.float64)
    for method in ("absmax", "standard"):
        center, scale = fit_normalization(values, method=method, clip=5.0)
        z = normalize(values.to(torch.float32), center, scale, 5.0)
        assert z.abs().max().item() <= 5.0
        assert z.abs().max().item() == pytest.approx(5.0, rel=1e-6) or method == "standard"


def test_fit_constant_data_gets_unit_scale():
    assert fit_normalization([0.0, 0.0], method="absmax") == (0.0, 1.0)
    assert fit_normalization([4.0, 4.0], method="standard") == (4.0, 1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"values": []}, "at least one value"),
        ({"values": [1.0, float("nan")]}, "finite"),
        ({"values": [1.0], "method": "minmax"}, "minmax"),
        ({"values": [1.0], "clip": 0.0}, "xval_clip"),
        ({"values": [1e39]}, "float32"),
    ],
)
def test_fit_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_normalization(**kwargs)


def test_normalize_round_trip():
    values = torch.tensor([-12.5, 0.0, 3.25, 1e-4, 49.0], dtype=torch.float64)
    z = normalize(values, center=1.5, scale=10.0, clip=5.0)
    # Hand: (-12.5 - 1.5) / 10 = -1.4, (0 - 1.5) / 10 = -0.15, (3.25 - 1.5) / 10 = 0.175, (49 - 1.5) / 10 = 4.75.
    assert z.tolist() == pytest.approx([-1.4, -0.15, 0.175, (1e-4 - 1.5) / 10, 4.75], rel=1e-12)
    assert z.dtype == torch.float64
    back = denormalize(z, center=1.5, scale=10.0)
    assert back.dtype == torch.float64
    assert back.tolist() == pytest.approx(values.tolist(), rel=1e-12, abs=1e-15)


def test_normalize_out_of_range_raises_and_names_everything():
    with pytest.raises(NumberOutOfRangeError) as info:
        normalize(torch.tensor([1.0, 60.0, 70.0]), center=0.0, scale=10.0, clip=5.0)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    for part in ("60.0", "6.0", "xval_clip", "xval_scale", "xval_center", "out_of_range", "1 more"):
        assert part in message


def test_normalize_checks_only_masked_rows_and_rejects_nan():
    values = torch.tensor([1000.0, 2.0])
    z = normalize(values, 0.0, 1.0, 5.0, mask=torch.tensor([0, 1]))
    assert z[1].item() == 2.0
    with pytest.raises(NumberOutOfRangeError, match="nan"):
        normalize(torch.tensor([float("nan")]), 0.0, 1.0, 5.0)
    with pytest.raises(ValueError, match="xval_scale"):
        normalize(values, 0.0, 0.0, 5.0)


class _Exact:
    """Duck-typed stand-in for numbers.ExactNumber (only `to_decimal` is read)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def to_decimal(self) -> Decimal:
        return Decimal(self.text)


def test_xval_in_range():
    config = xval_config(xval_center=1.0, xval_scale=2.0, xval_clip=5.0)
    # Allowed interval: (x - 1) / 2 in [-5, 5] <=> x in [-9, 11].
    assert xval_in_range(11.0, config)
    assert xval_in_range(-9, config)
    assert not xval_in_range(11.01, config)
    assert not xval_in_range(-9.01, config)
    assert xval_in_range(Decimal("10.5"), config)
    assert not xval_in_range(_Exact("1" + "0" * 400), config)  # beyond float64: out of range, no exception
    assert xval_in_range(_Exact("-3.25"), config)
    assert not xval_in_range(float("nan"), config)
    assert not xval_in_range(10**400, config)  # int beyond float64: out of range, no OverflowError


def test_xval_in_range_agrees_with_normalize_at_the_boundary():
    config = xval_config(xval_center=0.1, xval_scale=0.3, xval_clip=5.0)
    limit = 0.1 + 0.3 * 5.0
    for k in range(-40, 41):
        value = limit + k * 1e-7
        accepted = xval_in_range(value, config)
        try:
            normalize(torch.tensor([value], dtype=torch.float32), 0.1, 0.3, 5.0)
            refused = False
        except NumberOutOfRangeError:
            refused = True
        assert accepted != refused, value


# -- form resolution --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_config", "expected"),
    [
        (LlamaConfig(), "affine"),
        (GraniteConfig(), "affine"),
        (MistralConfig(), "affine"),
        (Qwen2Config(), "affine"),
        (T5Config(), "affine"),
        (GPT2Config(), "multiplicative"),
        (BertConfig(), "multiplicative"),
        ({"model_type": "newdecoder", "rms_norm_eps": 1e-5}, "affine"),
        ({"model_type": "newt5", "relative_attention_num_buckets": 32}, "affine"),
        ({"model_type": "newbert", "rms_norm_eps": 1e-5, "position_embedding_type": "absolute"}, "multiplicative"),
        ({"model_type": "unknown"}, "multiplicative"),
    ],
)
def test_resolve_auto(model_config, expected):
    assert resolve_xval_form("auto", model_config) == expected


def test_resolve_explicit_and_invalid():
    assert resolve_xval_form("multiplicative", LlamaConfig()) == "multiplicative"
    assert resolve_xval_form("affine", GPT2Config()) == "affine"
    with pytest.raises(ValueError, match="'additive'"):
        resolve_xval_form("additive", LlamaConfig())


# -- XValEmbedding ----------------------------------------------------------------------------------------------------


def _batch(h: int = 4):
    torch.manual_seed(0)
    embeds = torch.randn(2, 3, h)
    num_mask = torch.tensor([[0, 1, 0], [1, 0, 1]])
    num_values = torch.tensor([[0.0, 7.0, 0.0], [-2.0, 0.0, 3.0]])
    return embeds, num_mask, num_values


def test_multiplicative_by_hand():
    config = xval_config(xval_center=1.0, xval_scale=2.0)
    module = XValEmbedding(4, config, form="multiplicative")
    assert list(module.parameters()) == []
    embeds, num_mask, num_values = _batch()
    out = module(embeds, num_mask, num_values=num_values)
    # z = (x - 1) / 2: 7 -> 3, -2 -> -1.5, 3 -> 1.
    assert torch.allclose(out[0, 1], embeds[0, 1] * 3.0)
    assert torch.allclose(out[1, 0], embeds[1, 0] * -1.5)
    assert torch.allclose(out[1, 2], embeds[1, 2] * 1.0)
    for b, t in ((0, 0), (0, 2), (1, 1)):
        assert torch.equal(out[b, t], embeds[b, t])


def test_affine_by_hand_and_gradient():
    config = xval_config(xval_form="affine", xval_center=1.0, xval_scale=2.0)
    module = XValEmbedding(4, config)
    with torch.no_grad():
        module.direction.copy_(torch.tensor([1.0, -1.0, 0.5, 0.0]))
    embeds, num_mask, num_values = _batch()
    out = module(embeds, num_mask, num_values=num_values)
    assert torch.allclose(out[0, 1], embeds[0, 1] + 3.0 * torch.tensor([1.0, -1.0, 0.5, 0.0]))
    assert torch.allclose(out[1, 0], embeds[1, 0] - 1.5 * torch.tensor([1.0, -1.0, 0.5, 0.0]))
    assert torch.equal(out[1, 1], embeds[1, 1])
    out.sum().backward()
    # d(sum)/du = sum of z over [NUM] rows, per component: 3 - 1.5 + 1 = 2.5.
    assert torch.allclose(module.direction.grad, torch.full((4,), 2.5))


def test_embedding_errors():
    with pytest.raises(ValueError, match="resolve_xval_form"):
        XValEmbedding(4, xval_config())  # xval_form="auto"
    module = XValEmbedding(4, xval_config(xval_form="affine"))
    embeds, num_mask, num_values = _batch()
    with pytest.raises(ValueError, match="num_values"):
        module(embeds, num_mask)
    with pytest.raises(NumberOutOfRangeError, match="7.0"):
        module(embeds, num_mask, num_values=num_values)  # clip 5, scale 1: 7 is out of range
    with pytest.raises(ValueError, match="width"):
        XValEmbedding(8, xval_config(xval_form="affine"))(embeds, num_mask, num_values=num_values / 10)
    with pytest.raises(ValueError, match="affine"):
        XValEmbedding(4, xval_config(), form="multiplicative").init_direction(1.0)


def test_init_direction_matches_reference_rms():
    module = XValEmbedding(64, xval_config(xval_form="affine"))
    assert module.direction.pow(2).mean().sqrt().item() == pytest.approx(0.02, rel=1e-5)
    reference = torch.full((10, 64), 0.5)  # RMS 0.5
    module.init_direction(reference, generator=torch.Generator().manual_seed(1))
    assert module.direction.pow(2).mean().sqrt().item() == pytest.approx(0.5, rel=1e-5)


def test_design_point_5_rmsnorm_erases_multiplicative_scale():
    """After an RMSNorm x*e is the same vector for x = 2 and x = 3; e + x*u is not.

    docs/DESIGN.md, "Pre-RMSNorm models erase multiplicative scale".
    """
    h = 16
    torch.manual_seed(0)
    norm = LlamaRMSNorm(h, eps=1e-6)
    e = torch.randn(h)
    embeds = e.expand(1, 2, h).clone()  # (1, 2, H): the [NUM] row twice
    num_mask = torch.ones(1, 2, dtype=torch.long)
    num_values = torch.tensor([[2.0, 3.0]])
    config = xval_config()  # center 0, scale 1: z = x

    mult = XValEmbedding(h, config, form="multiplicative")(embeds, num_mask, num_values=num_values)
    normed = norm(mult)[0]  # (2, H)
    assert not torch.allclose(mult[0, 0], mult[0, 1])  # different before the norm ...
    assert torch.allclose(normed[0], normed[1], atol=1e-5)  # ... identical after it: the value is erased

    affine = XValEmbedding(h, config, form="affine")
    # (seed 1: the same seed as torch.manual_seed(0) above would draw u == e, collinear by construction)
    affine.init_direction(e, generator=torch.Generator().manual_seed(1))
    normed = norm(affine(embeds, num_mask, num_values=num_values))[0]  # (2, H)
    assert (normed[0] - normed[1]).abs().max().item() > 0.05

    # With u orthogonal to e and |u| = |e|, RMSNorm(e + x u) = sqrt(H) (e + x u) / |e + x u| (eps negligible): its
    # component along u is sqrt(H) x / sqrt(1 + x^2), the paper's layer-norm curve (xVal section 2, Fig. 2):
    # 4 * 2 / sqrt(5) = 3.578 for x = 2 and 4 * 3 / sqrt(10) = 3.795 for x = 3.
    r = torch.randn(h)
    u = r - (r @ e) / (e @ e) * e
    u = u / u.norm() * e.norm()
    with torch.no_grad():
        affine.direction.copy_(u)
    normed = norm(affine(embeds, num_mask, num_values=num_values))[0].detach()  # (2, H)
    along_u = normed @ (u / u.norm())  # (2,)
    assert along_u.tolist() == pytest.approx([8 / math.sqrt(5), 12 / math.sqrt(10)], rel=1e-4)

    # The paper's setting: an added position vector p (not collinear with e) keeps the multiplicative form alive.
    p = torch.randn(h)
    normed = norm(mult + p)[0]
    assert (normed[0] - normed[1]).abs().max().item() > 0.1


# -- RegressionHead ---------------------------------------------------------------------------------------------------


def test_head_shapes_and_width():
    config = xval_config(xval_head_hidden=7)
    head = RegressionHead(5, config)
    assert head.fc1.weight.shape == (7, 5) and head.fc2.weight.shape == (1, 7)
    assert head(torch.randn(3, 5)).shape == (3,)
    assert RegressionHead(5, xval_config()).fc1.weight.shape == (32, 5)  # default xval_head_hidden=32
    assert RegressionHead(5, xval_config(xval_head_hidden=None)).fc1.weight.shape == (5, 5)  # None: model width
    with pytest.raises(ValueError, match="width 6,"):
        head(torch.randn(3, 6))


def test_head_mse_by_hand():
    head = RegressionHead(2, xval_config(xval_center=1.0, xval_scale=2.0))
    pred = torch.tensor([0.5, -1.0, 2.0])
    targets = torch.tensor([2.0, 1.0, -1.0])  # normalised: (2-1)/2 = 0.5, (1-1)/2 = 0, (-1-1)/2 = -1
    # squared errors: (0.5-0.5)^2 = 0, (-1-0)^2 = 1, (2-(-1))^2 = 9
    assert head.loss(pred, targets).item() == pytest.approx(10 / 3)
    assert head.loss(pred, targets, reduction="sum").item() == pytest.approx(10.0)
    assert head.loss(pred, targets, reduction="none").tolist() == pytest.approx([0.0, 1.0, 9.0])
    mask = torch.tensor([1, 1, 0])
    assert head.loss(pred, targets, mask=mask).item() == pytest.approx(0.5)
    # A masked-out target may be out of range (placeholder), a counted one may not.
    far = torch.tensor([2.0, 1.0, 1e6])
    assert head.loss(pred, far, mask=mask).item() == pytest.approx(0.5)
    with pytest.raises(NumberOutOfRangeError, match="1000000.0"):
        head.loss(pred, far)
    empty = head.loss(pred.requires_grad_(), targets, mask=torch.zeros(3))
    assert empty.item() == 0.0 and empty.requires_grad


def test_head_predict_denormalises():
    head = RegressionHead(2, xval_config(xval_center=1.0, xval_scale=2.0))
    values = head.predict(torch.tensor([0.5, -1.0, 7.0]))
    assert values.dtype == torch.float64
    assert values.tolist() == [2.0, -1.0, 15.0]  # z * 2 + 1, not clamped


def test_head_learns_a_linear_map():
    torch.manual_seed(0)
    x = torch.randn(128, 4)
    raw = 30.0 * x[:, 0] - 10.0 * x[:, 1] + 5.0  # targets in raw units
    center, scale = fit_normalization(raw, method="standard", clip=5.0)
    head = RegressionHead(4, xval_config(xval_center=center, xval_scale=scale, xval_head_hidden=16))
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
    first = head.loss(head(x), raw).item()
    for _ in range(200):
        optimizer.zero_grad()
        loss = head.loss(head(x), raw)
        loss.backward()
        optimizer.step()
    assert first > 0.3
    assert loss.item() < 0.01
    predicted = head.predict(head(x[:4]))
    assert torch.allclose(predicted, raw[:4].double(), atol=0.1 * scale)


def test_to_strings():
    head = RegressionHead(2, xval_config(frac_digits=2))
    values = torch.tensor([3.14159, 2.5, 1e20, -0.001, -2.675, 0.125, 1.0, -7.0], dtype=torch.float64)
    # half-to-even on the shortest decimal form: 2.675 -> 2.68 (7 is odd), 0.125 -> 0.12 (2 is even); -0.00 -> 0.
    assert head.to_strings(values) == ["3.14", "2.5", "100000000000000000000", "0", "-2.68", "0.12", "1", "-7"]
    assert head.to_strings([2.5, 3.5, 12.3456], frac_digits=0) == ["2", "4", "12"]
    assert head.to_strings([12.3456], frac_digits=3) == ["12.346"]
    assert head.to_strings([1e300], frac_digits=1) == ["1" + "0" * 300]
    with pytest.raises(ValueError, match="nan"):
        head.to_strings([float("nan")])
    with pytest.raises(ValueError, match="frac_digits"):
        head.to_strings([1.0], frac_digits=-1)
