"""FoNE features (Definition 3.2, Algorithm 1), the exact decoder, and the FoNEEmbedding input module."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from fractions import Fraction

import pytest
import torch

from numadapter.config import NumberAdapterConfig
from numadapter.methods.fone.embedding import (
    FoNEEmbedding,
    fone_decode,
    fone_feature_size,
    fone_features,
    fone_features_from_digits,
)
from numadapter.numbers import ExactNumber, NumberOutOfRangeError

TWO_PI = 2 * math.pi


def reference_features(text: str, int_digits: int, frac_digits: int, bases=(10,)) -> list[float]:
    """Independent reference: exact rational x mod T with fractions.Fraction, then cos/sin in float64."""
    x = abs(Fraction(Decimal(text)))
    out = []
    for base in bases:
        for i in range(-frac_digits + 1, int_digits + 1):
            period = base * Fraction(10) ** (i - 1)
            angle = TWO_PI * float((x % period) / period)
            out += [math.cos(angle), math.sin(angle)]
    return out


def random_numbers(rng: random.Random, count: int, int_digits: int, frac_digits: int) -> list[str]:
    """Random numbers spread over magnitudes: 0 <= x < 10^m with at most n fraction digits, as plain text."""
    out = []
    for _ in range(count):
        whole = rng.randrange(10 ** rng.randint(0, int_digits)) if int_digits else 0
        places = rng.randint(0, frac_digits)
        text = str(whole)
        if places:
            text += "." + str(rng.randrange(10**places)).zfill(places)
        out.append(text)
    return out


def config(**kwargs) -> NumberAdapterConfig:
    return NumberAdapterConfig(**kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Features


def test_example_3_6_by_hand():
    # Example 3.6: FoNE(4.17, m=1, n=2) = [phi(4.17, 0.1), phi(4.17, 1), phi(4.17, 10)];
    # (x mod T) / T = 0.07 / 0.1 = 0.7, 0.17 / 1 = 0.17, 4.17 / 10 = 0.417.
    expected = [
        math.cos(TWO_PI * 0.7),
        math.sin(TWO_PI * 0.7),
        math.cos(TWO_PI * 0.17),
        math.sin(TWO_PI * 0.17),
        math.cos(TWO_PI * 0.417),
        math.sin(TWO_PI * 0.417),
    ]
    for value in ("4.17", 4.17, Decimal("4.17"), ExactNumber.parse("4.17"), "4.170"):
        got = fone_features([value], int_digits=1, frac_digits=2)
        assert got.shape == (1, 6) and got.dtype == torch.float32
        assert torch.allclose(got[0], torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=0)
    assert fone_features([4], 1, 2, dtype=torch.float64).dtype == torch.float64


def test_layout_size():
    assert fone_feature_size(8, 4) == 24
    assert fone_feature_size(8, 4, (2, 5, 10)) == 72
    assert fone_feature_size(8, 4, (10,), sign_feature=True) == 25


def test_bases_layout_matches_fraction_reference():
    # base-major blocks, periods b * 10^(i-1) ascending; 7 and 3 need all higher digits (Toeplitz residues)
    rng = random.Random(1)
    numbers = random_numbers(rng, 200, 6, 3) + ["999999.999", "0", "0.001", "123456.789"]
    bases = (2, 5, 10, 7, 3)
    got = fone_features(numbers, 6, 3, bases, dtype=torch.float64)
    want = torch.tensor([reference_features(x, 6, 3, bases) for x in numbers], dtype=torch.float64)
    assert got.shape == (len(numbers), 2 * 5 * 9)
    assert (got - want).abs().max().item() < 1e-12


def test_30_digit_integers_exact_where_float64_fails():
    numbers = [
        "123456789012345678901234567891",
        "999999999999999999999999999999",
        "100000000000000000000000000007",
        "314159265358979323846264338327",
    ]
    got = fone_features(numbers, 30, 0, dtype=torch.float64)
    want = torch.tensor([reference_features(x, 30, 0) for x in numbers], dtype=torch.float64)
    assert (got - want).abs().max().item() < 1e-12  # float64 accuracy, not just float32
    got32 = fone_features(numbers, 30, 0)
    assert got32.dtype == torch.float32 and (got32 - want).abs().max().item() < 1e-6
    # bases other than 10 from digits too
    got7 = fone_features(numbers, 30, 0, (7, 2))
    want7 = torch.tensor([reference_features(x, 30, 0, (7, 2)) for x in numbers], dtype=torch.float32)
    assert (got7 - want7).abs().max().item() < 1e-6
    # the naive formula cos(2*pi*float(x)/T) loses the low digits of x
    naive = torch.tensor(
        [
            [f(TWO_PI * float(x) / 10.0**i) for i in range(1, 31) for f in (math.cos, math.sin)]
            for x in (int(n) for n in numbers)
        ],
        dtype=torch.float64,
    )
    assert (naive - want).abs().max().item() > 0.1


def test_features_from_digits_keeps_leading_dims_and_appends_sign():
    digits = torch.tensor([[[4, 1, 7], [0, 0, 0]], [[0, 0, 5], [9, 9, 9]]])  # (B=2, T=2, P=3), m=1, n=2
    sign = torch.tensor([[-1, 0], [1, 1]])
    got = fone_features_from_digits(digits, 1, 2, (10,), num_sign=sign)
    assert got.shape == (2, 2, 7) and got.dtype == torch.float32
    assert torch.allclose(got[0, 0, :6], torch.tensor(reference_features("4.17", 1, 2), dtype=torch.float32))
    assert torch.allclose(got[1, 0, :6], torch.tensor(reference_features("0.05", 1, 2), dtype=torch.float32))
    assert torch.allclose(got[1, 1, :6], torch.tensor(reference_features("9.99", 1, 2), dtype=torch.float32))
    assert got[..., 6].tolist() == [[-1.0, 0.0], [1.0, 1.0]]


def test_sign_feature_and_negative_numbers():
    got = fone_features(["-4.17", "4.17"], 1, 2, sign_feature=True)
    assert got.shape == (2, 7)
    assert torch.equal(got[0, :6], got[1, :6])  # features of |x|
    assert got[:, 6].tolist() == [-1.0, 1.0]
    with pytest.raises(ValueError, match=r"-4\.17.*sign_policy='feature'"):
        fone_features(["-4.17"], 1, 2)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(NumberOutOfRangeError):
        fone_features(["123"], 2, 0)  # needs 3 integer places
    with pytest.raises(NumberOutOfRangeError):
        fone_features(["1.234"], 2, 2)  # needs 3 fraction places: never rounded
    with pytest.raises(TypeError, match="wrap it in"):
        fone_features("4.17", 1, 2)
    with pytest.raises(ValueError, match=r"fone_bases.*\[1\]"):
        fone_features(["1"], 1, 0, bases=[1])
    with pytest.raises(ValueError, match=r"1 \+ 2 = 3.*\(1, 4\)"):
        fone_features_from_digits(torch.zeros(1, 4, dtype=torch.long), 1, 2)
    with pytest.raises(TypeError, match="float32"):
        fone_features_from_digits(torch.zeros(1, 3), 1, 2)
    with pytest.raises(ValueError, match="0..9, got 10"):
        fone_features_from_digits(torch.tensor([[1, 10, 0]]), 1, 2)
    with pytest.raises(ValueError, match="num_sign"):
        fone_features_from_digits(torch.zeros(2, 3, dtype=torch.long), 1, 2, num_sign=torch.ones(3))


# ---------------------------------------------------------------------------------------------------------------
# Decoding


def test_paper_argmax_does_not_invert_clean_features_but_fone_decode_does():
    # phi(4.7, 10) has angle 2*pi*0.47; digit j has angle 2*pi*j/10; dot product = cos(2*pi*(0.47 - j/10)).
    scores = [math.cos(TWO_PI * (0.47 - j / 10)) for j in range(10)]
    assert max(range(10), key=scores.__getitem__) == 5  # Definition 3.8 would read the ones digit as 5
    assert fone_decode(fone_features(["4.7"], 1, 1), 1, 1) == ["4.7"]


@pytest.mark.parametrize(("int_digits", "frac_digits"), [(8, 4), (6, 3), (30, 0), (0, 3), (3, 0)])
def test_decode_inverts_clean_features_exactly(int_digits, frac_digits):
    rng = random.Random(int_digits * 100 + frac_digits)
    numbers = random_numbers(rng, 10_000, int_digits, frac_digits)
    top = "9" * int_digits + ("." + "9" * frac_digits if frac_digits else "")
    numbers += ["0", top or "0"]
    for edge in ("9.99", "10", "99.99", "100", "0.001", "0.1", "1"):
        value = ExactNumber.parse(edge)
        if value.fits(int_digits, frac_digits):
            numbers.append(edge)
    decoded = fone_decode(fone_features(numbers, int_digits, frac_digits), int_digits, frac_digits)
    wrong = [(x, y) for x, y in zip(numbers, decoded) if Decimal(x) != Decimal(y)]
    assert not wrong, wrong[:5]
    assert decoded[-1] != "" and all(y == str(ExactNumber.parse(y)) for y in decoded[:50])  # canonical text


@pytest.mark.parametrize("bases", [(10,), (2, 5, 10), (2, 5), (10, 7)])
@pytest.mark.parametrize("noise", [1e-4, 2e-2])
def test_decode_is_robust_to_noise(bases, noise):
    rng = random.Random(7)
    numbers = random_numbers(rng, 1000, 8, 4) + ["99999999.9999", "0", "9.99", "10", "0.001"]
    features = fone_features(numbers, 8, 4, bases)
    generator = torch.Generator().manual_seed(0)
    noisy = features + noise * torch.randn(features.shape, generator=generator)
    decoded = fone_decode(noisy, 8, 4, bases)
    assert all(Decimal(x) == Decimal(y) for x, y in zip(numbers, decoded))


def test_decode_reads_the_sign_feature():
    numbers = ["-4.17", "4.17", "-0.001", "0", "-99.99"]
    features = fone_features(numbers, 2, 3, sign_feature=True)
    assert fone_decode(features, 2, 3) == ["-4.17", "4.17", "-0.001", "0", "-99.99"]


def test_decode_rejects_bad_shapes_and_undecodable_bases():
    with pytest.raises(ValueError, match=r"\[N, 6\] or \[N, 7\]"):
        fone_decode(torch.zeros(2, 5), 1, 2)
    with pytest.raises(ValueError, match=r"base 10.*\[7\]"):
        fone_decode(torch.zeros(2, 6), 1, 2, bases=(7,))


# ---------------------------------------------------------------------------------------------------------------
# FoNEEmbedding


def embedding_inputs(numbers_at: dict[tuple[int, int], str], batch: int, time: int, m: int, n: int):
    mask = torch.zeros(batch, time, dtype=torch.long)
    digits = torch.zeros(batch, time, m + n, dtype=torch.long)
    sign = torch.zeros(batch, time, dtype=torch.long)
    for (b, t), text in numbers_at.items():
        value = ExactNumber.parse(text)
        mask[b, t] = 1
        digits[b, t] = torch.tensor(value.place_digits(m, n))
        sign[b, t] = value.sign
    return mask, digits, sign


def test_pad_mode_adds_zero_padded_features_and_leaves_other_rows_bit_exact():
    module = FoNEEmbedding(8, config(int_digits=1, frac_digits=2, fone_projection="pad"))
    assert not list(module.parameters())
    embeds = torch.randn(2, 3, 8)
    mask, digits, sign = embedding_inputs({(0, 1): "4.17", (1, 2): "0.05"}, 2, 3, 1, 2)
    out = module(embeds, mask, digits, sign)
    feats_417 = [math.cos(TWO_PI * 0.7), math.sin(TWO_PI * 0.7), math.cos(TWO_PI * 0.17)]
    feats_417 += [math.sin(TWO_PI * 0.17), math.cos(TWO_PI * 0.417), math.sin(TWO_PI * 0.417), 0.0, 0.0]
    # 0.05: (x mod 0.1)/0.1 = 0.5, (x mod 1)/1 = 0.05, (x mod 10)/10 = 0.005
    feats_005 = [-1.0, math.sin(math.pi), math.cos(TWO_PI * 0.05), math.sin(TWO_PI * 0.05)]
    feats_005 += [math.cos(TWO_PI * 0.005), math.sin(TWO_PI * 0.005), 0.0, 0.0]
    assert torch.allclose(out[0, 1], embeds[0, 1] + torch.tensor(feats_417), atol=1e-6)
    assert torch.allclose(out[1, 2], embeds[1, 2] + torch.tensor(feats_005), atol=1e-6)
    keep = mask == 0
    assert torch.equal(out[keep], embeds[keep])


def test_pad_mode_refuses_features_wider_than_the_model():
    with pytest.raises(ValueError, match=r"F = 25.*H = 16.*fone_projection='linear'"):
        FoNEEmbedding(16, config(int_digits=8, frac_digits=4, fone_projection="pad", sign_policy="feature"))


def test_linear_mode_initial_rms_is_init_scale_times_reference():
    cfg = config(int_digits=3, frac_digits=2, sign_policy="feature", fone_init_scale=0.5)
    torch.manual_seed(0)
    module = FoNEEmbedding(64, cfg)
    assert module.proj is not None and module.proj.bias is None and module.num_features == 11
    module.reset_scale(0.02)
    mask, digits, sign = embedding_inputs(
        {(0, 0): "123.45", (0, 2): "-0.07", (1, 1): "999.99", (1, 3): "0"}, 2, 4, 3, 2
    )
    embeds = torch.zeros(2, 4, 64)
    delta = module(embeds, mask, digits, sign)[mask.bool()]  # (4, 64): the projected features alone
    rms = delta.pow(2).mean(-1).sqrt()
    assert torch.allclose(rms, torch.full((4,), 0.5 * 0.02), rtol=1e-5, atol=0)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="reference_rms"):
            module.reset_scale(bad)


def test_linear_mode_value_and_low_precision_dtypes():
    cfg = config(int_digits=2, frac_digits=1)
    module = FoNEEmbedding(16, cfg)
    mask, digits, sign = embedding_inputs({(0, 0): "12.5", (1, 2): "3"}, 2, 3, 2, 1)
    weight = module.proj.weight.detach()
    feats = torch.tensor([reference_features("12.5", 2, 1), reference_features("3", 2, 1)], dtype=torch.float32)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        embeds = torch.randn(2, 3, 16).to(dtype)
        out = module(embeds, mask, digits, sign)
        assert out.dtype == dtype and torch.isfinite(out).all()
        expected = (embeds[mask.bool()].float() + feats @ weight.T).to(dtype)
        assert torch.allclose(out[mask.bool()].float(), expected.float(), atol=1e-5)
        assert torch.equal(out[mask == 0], embeds[mask == 0])
    module_bf16 = FoNEEmbedding(16, cfg).to(torch.bfloat16)  # weights cast too: still computes in float32
    out = module_bf16(torch.randn(2, 3, 16, dtype=torch.bfloat16), mask, digits, sign)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()


def test_gradients_flow_to_projection_and_embeddings():
    module = FoNEEmbedding(16, config(int_digits=2, frac_digits=1, sign_policy="feature"))
    mask, digits, sign = embedding_inputs({(0, 1): "-12.5"}, 1, 3, 2, 1)
    embeds = torch.randn(1, 3, 16, requires_grad=True)
    module(embeds, mask, digits, sign).pow(2).sum().backward()
    assert module.proj.weight.grad is not None and module.proj.weight.grad.abs().sum() > 0
    assert embeds.grad is not None and torch.all(embeds.grad[0, 0] == 2 * embeds[0, 0].detach())


def test_sign_feature_changes_only_with_sign():
    module = FoNEEmbedding(16, config(int_digits=2, frac_digits=1, sign_policy="feature"))
    mask, digits, sign = embedding_inputs({(0, 0): "-12.5", (0, 1): "12.5"}, 1, 2, 2, 1)
    out = module(torch.zeros(1, 2, 16), mask, digits, sign)
    assert not torch.allclose(out[0, 0], out[0, 1])
    assert torch.allclose(out[0, 0] - out[0, 1], -2 * module.proj.weight[:, -1].detach(), atol=1e-6)
    with pytest.raises(ValueError, match="num_sign"):
        module(torch.zeros(1, 2, 16), mask, digits, None)


def test_embedding_shape_errors():
    module = FoNEEmbedding(16, config(int_digits=2, frac_digits=1))
    mask, digits, sign = embedding_inputs({(0, 0): "1"}, 1, 2, 2, 1)
    with pytest.raises(ValueError, match=r"\[B, T, 16\]"):
        module(torch.zeros(1, 2, 8), mask, digits, sign)
    with pytest.raises(ValueError, match="num_mask"):
        module(torch.zeros(1, 2, 16), mask[:, :1], digits, sign)
    with pytest.raises(ValueError, match="last dimension"):
        module(torch.zeros(1, 2, 16), mask, torch.zeros(1, 2, 4, dtype=torch.long), sign)
