"""Tests for numadapter.ntl: every kind against hand-computed values on a tiny vocabulary (arithmetic written out).

The tiny vocabulary (`VOCAB`) puts "0".."9" at ids 2..11. `row(...)` builds one logits row where the chosen tokens
have logit 0 and every other token -1e4 (exp(-1e4) is exactly 0 in float32), so probabilities are simple fractions.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

from numadapter.ntl import (
    KINDS,
    NTLoss,
    cross_entropy_and_ntl,
    digit_ntl,
    number_vocab,
    parse_number_token,
)

VOCAB = ["a", "b", *"0123456789", "12", "\u25813", "\u01207", "\u00bd", "1st", "inf", "nan", "0x1", "1e5", "-3", "1.5",
         ".", "007"]  # fmt: skip
ID = {t: i for i, t in enumerate(VOCAB)}
V = len(VOCAB)  # 25
OFF = -1e4


def word_tokenizer(tokens: list[str]) -> PreTrainedTokenizerFast:
    model = models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token=tokens[0])
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(model))


@pytest.fixture(scope="module")
def tok() -> PreTrainedTokenizerFast:
    return word_tokenizer(VOCAB)


def d(digit: int) -> int:
    """Token id of a bare digit."""
    return ID[str(digit)]


def row(*hot: int, width: int = V, logit: dict[int, float] | None = None) -> torch.Tensor:
    """(width,) logits: 0 at the ``hot`` ids (or the given value), -1e4 elsewhere."""
    x = torch.full((width,), OFF)
    for i in hot:
        x[i] = 0.0
    for i, value in (logit or {}).items():
        x[i] = value
    return x


def one(logits_row: torch.Tensor, label: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of one position: logits (1, 1, V), labels (1, 1)."""
    return logits_row.view(1, 1, -1), torch.tensor([[label]])


# ---------------------------------------------------------------------------------------------------- token map


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("7", (7, 0)), ("123", (123, 0)), ("007", (7, 0)), ("\u25811", (1, 1)), ("\u01207", (7, 2)),
        ("\u00bd", None), ("1st", None), ("inf", None), ("nan", None), ("0x1", None), ("1e5", None), ("-3", None),
        ("1.5", None), ("\u0663", None), ("\u00b2", None), ("\u2581", None), ("\u2581\u25811", None), ("", None),
    ],
)  # fmt: skip
def test_parse_number_token(token: str, expected: tuple[int, int] | None) -> None:
    assert parse_number_token(token) == expected


def test_number_vocab_digit_level(tok: PreTrainedTokenizerFast) -> None:
    vocab = number_vocab(tok)
    assert vocab.token_ids == (*range(2, 12), 13, 14)
    assert vocab.values == (*range(10), 3, 7)
    assert vocab.groups == (0,) * 10 + (1, 2)


def test_number_vocab_multi_digit(tok: PreTrainedTokenizerFast) -> None:
    vocab = number_vocab(tok, digit_level=False)
    assert vocab.token_ids == (*range(2, 15), ID["007"])
    assert vocab.values == (*range(10), 12, 3, 7, 7)


def test_no_number_tokens_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no number tokens"):
        NTLoss(word_tokenizer(["a", "b", "c"]))
    with pytest.raises(ValueError, match="digit_level=False"):
        NTLoss(word_tokenizer(["a", "12", "345"]))
    assert NTLoss(word_tokenizer(["a", "12", "345"]), digit_level=False).number_token_ids == (1, 2)
    with pytest.raises(TypeError, match="get_vocab"):
        NTLoss(object())


@pytest.mark.parametrize("kind", ["digits", "llama3", "t5"])
def test_tiny_tokenizers_map_and_are_not_mutated(kind: str, tmp_path) -> None:
    from numadapter.testing import toy

    tokenizer = toy.build_tokenizer(kind, tmp_path)
    before = (len(tokenizer), tokenizer.get_vocab(), str(tokenizer.added_tokens_decoder),
              tokenizer.backend_tokenizer.to_str())  # fmt: skip
    multi = NTLoss(tokenizer, digit_level=False)
    single = NTLoss(tokenizer)
    after = (len(tokenizer), tokenizer.get_vocab(), str(tokenizer.added_tokens_decoder),
             tokenizer.backend_tokenizer.to_str())  # fmt: skip
    assert before == after
    pattern = re.compile("[\u2581\u0120]?([0-9]+)")
    expect = {i: int(m.group(1)) for t, i in before[1].items() if (m := pattern.fullmatch(t))}
    assert dict(zip(multi.vocab.token_ids, multi.vocab.values)) == expect
    assert dict(zip(single.vocab.token_ids, single.vocab.values)) == {
        i: v for i, v in expect.items() if len(re.sub("[\u2581\u0120]", "", tokenizer.convert_ids_to_tokens(i))) == 1
    }
    assert {tokenizer.convert_ids_to_tokens(i) for i in single.number_token_ids} >= set("0123456789")
    if kind == "llama3":
        assert max(multi.vocab.values) >= 100  # grouped digit runs
    if kind == "t5":
        assert any(t.startswith("\u2581") for t in multi.vocab.tokens)


def test_the_config_checks_against_the_ntl_kinds() -> None:
    from numadapter.config import NTL_KINDS

    assert NTL_KINDS is KINDS  # one list, defined in numadapter.ntl.vocab


# ---------------------------------------------------------------------------------------------------- kinds by hand

# Label "4"; the model puts logit 0 on "3", "8" and the text token "a": the softmax over number tokens (p~) is
# 1/2 on 3 and 1/2 on 8 ("a" is ignored without reweigh).
#   was  (eq. 4): 1/2*|4-3| + 1/2*|4-8| = 0.5 + 2 = 2.5
#   was-cdf (eq. 5): CDF_p = 0 (k<3), 1/2 (3<=k<8), 1 (k>=8); CDF_y = 0 (k<4), 1 (k>=4);
#                    |diff| summed over k = 0..8, unit gaps: k=3: 0.5, k=4..7: 4 * 0.5 = 2 -> 2.5
#   yhat = 1/2*3 + 1/2*8 = 5.5 ; mse: (4 - 5.5)^2 = 2.25 ; mae: 1.5 ; huber(delta=1): 1 * (1.5 - 0.5) = 1.0
HAND = {"was": 2.5, "was-cdf": 2.5, "mse": 2.25, "mae": 1.5, "huber": 1.0}


@pytest.mark.parametrize(("kind", "expected"), sorted(HAND.items()))
def test_kind_by_hand(tok, kind: str, expected: float) -> None:
    logits, labels = one(row(d(3), d(8), ID["a"]), d(4))
    assert NTLoss(tok, kind)(logits, labels).item() == pytest.approx(expected, abs=1e-6)


def test_huber_delta(tok) -> None:
    # residual 1.5 <= delta 2: 0.5 * 1.5^2 = 1.125
    logits, labels = one(row(d(3), d(8)), d(4))
    assert NTLoss(tok, "huber", huber_delta=2.0)(logits, labels).item() == pytest.approx(1.125)


def test_lp_non_unique_minimum_vs_was(tok) -> None:
    # The paper's figure-2 case: label 4, half the mass on 0 and half on 8: yhat = 4 so mse = 0, but was = 4.
    logits, labels = one(row(d(0), d(8)), d(4))
    assert NTLoss(tok, "mse")(logits, labels).item() == pytest.approx(0.0)
    assert NTLoss(tok, "was")(logits, labels).item() == pytest.approx(4.0)


def test_was_cdf_non_one_hot_target(tok) -> None:
    # Target 1/2 on 4 and 1/2 on 6, prediction 1/2 on 3 and 1/2 on 8.
    # CDF_t: 0 (k<4), .5 (4,5), 1 (k>=6); CDF_p: 0 (k<3), .5 (3..7), 1 (k>=8)
    # |diff|: k=3: .5, k=4,5: 0, k=6,7: .5 each -> 1.5 (= transport .5 from 3 to 4 plus .5 from 8 to 6).
    ntl = NTLoss(tok, "was-cdf")
    logits, labels = one(row(d(3), d(8)), d(4))
    target = torch.zeros(1, 1, len(ntl.number_token_ids))
    target[0, 0, 4], target[0, 0, 6] = 0.5, 0.5  # columns 0..9 are the digits 0..9 (token id order)
    assert ntl(logits, labels, target_probs=target).item() == pytest.approx(1.5)
    one_hot = torch.zeros_like(target)
    one_hot[0, 0, 4] = 1.0
    assert ntl(logits, labels, target_probs=one_hot).item() == pytest.approx(2.5)


def test_gce_by_hand(tok) -> None:
    # All logits 0 except "5" = ln 3: Z = 24 * 1 + 3 = 27 over the 25 tokens; log p_j = -ln 27, log p_5 = ln 3 - ln 27.
    # sigma = 1, label 4: target over the bare digits j = 0..9 ("\u25813" / "\u01207" are other forms) is
    # exp(-(j - 4)^2 / 2) / S with S = 1 + 2e^-0.5 + 2e^-2 + 2e^-4.5 + 2e^-8 + e^-12.5 (j = 9 is 5 away).
    # loss = -sum_j t_j log p_j = ln 27 - t_5 ln 3.
    logits, labels = one(torch.zeros(V).index_fill(0, torch.tensor([d(5)]), math.log(3)), d(4))
    s = 1 + 2 * math.exp(-0.5) + 2 * math.exp(-2) + 2 * math.exp(-4.5) + 2 * math.exp(-8) + math.exp(-12.5)
    expected = math.log(27) - math.exp(-0.5) / s * math.log(3)
    assert NTLoss(tok, "gce", sigma=1.0)(logits, labels).item() == pytest.approx(expected, rel=1e-5)
    # sigma -> 0: the target is one-hot on the label, GCE = CE = -log p_4 = ln 27
    assert NTLoss(tok, "gce", sigma=1e-3)(logits, labels).item() == pytest.approx(math.log(27), rel=1e-5)
    # label "\u25813" is the only number token of its form: its target is one-hot whatever sigma
    logits, labels = one(logits.view(-1), ID["\u25813"])
    assert NTLoss(tok, "gce", sigma=3.0)(logits, labels).item() == pytest.approx(math.log(27), rel=1e-5)


@pytest.mark.parametrize(
    ("squash", "expected"),
    [(1.001, 0.5 + 0.5 * (1 + 3 * 0.001 / 8)), (3.0, 1.375), (9.0, 2.5), (None, 2.5)],
)
def test_squash_factor_by_hand(tok, squash, expected) -> None:
    # digits: d_min = 1, d_max = 9, c(d) = 1 + (d - 1) * (S - 1) / 8 for d > 0.
    # label 4, 1/2 on 3 (d=1), 1/2 on 8 (d=4):  S -> 1: close to .5*1 + .5*1 = 1 ; S=3: .5*1 + .5*(1 + 3*2/8) = 1.375 ;
    # S=9: c(d) = d -> 2.5.
    logits, labels = one(row(d(3), d(8)), d(4))
    assert NTLoss(tok, "was", squash_factor=squash)(logits, labels).item() == pytest.approx(expected)


def test_squash_ratio_multi_digit(tok) -> None:
    # digit_level=False: values 0..9, 12, 3, 7, 7 -> d_min = 1, d_max = 12; S = 2: c(d) = 1 + (d - 1) / 11.
    ntl = NTLoss(tok, "was", digit_level=False, squash_factor=2.0)
    assert ntl(*one(row(d(0)), ID["12"])).item() == pytest.approx(2.0)  # farthest: exactly S * nearest
    assert ntl(*one(row(d(9)), ID["12"])).item() == pytest.approx(1 + 2 / 11)  # d = 3
    assert ntl(*one(row(d(1)), d(0))).item() == pytest.approx(1.0)  # nearest wrong value


def test_squash_with_wider_spacing() -> None:
    # values 0, 20, 50, 100: d_min = 20, d_max = 100; S = 3 (ntloss's scale: the nearest wrong value costs 1):
    # c(d) = 1 + (d - 20) * (3 - 1) / 80 = 1 + (d - 20) / 40
    tokenizer = word_tokenizer(["a", "0", "20", "50", "100"])
    ntl = NTLoss(tokenizer, "was", digit_level=False, squash_factor=3.0)
    assert ntl(*one(row(3, width=5), 1)).item() == pytest.approx(1.75)  # label 0, all on 50: 1 + 30 / 40
    assert ntl(*one(row(4, width=5), 1)).item() == pytest.approx(3.0)  # farthest: S * 1
    assert ntl(*one(row(2, width=5), 1)).item() == pytest.approx(1.0)  # nearest


@pytest.mark.parametrize("squash", [1.0, 0.99])
def test_squash_factor_must_exceed_one(tok, squash) -> None:
    # ntloss asserts squash_factor > 1; a ratio of 1 sets no distance scale at all
    with pytest.raises(ValueError, match=rf"squash_factor.* > 1.*{squash}"):
        NTLoss(tok, "was", squash_factor=squash)
    with pytest.raises(ValueError, match="> 1"):
        digit_ntl(torch.zeros(1, 1, 10), torch.tensor([[3]]), squash_factor=squash)


def test_was_cdf_uneven_spacing_is_exact_w1(tok) -> None:
    # digit_level=False: distinct values 0..9 and 12 (gaps 1 x 9, then 3). Label "12", 1/2 on "0", 1/2 on "9".
    # W1 = 1/2 * 12 + 1/2 * 3 = 7.5. CDF form: CDF_p = .5 for k = 0..8, 1 at 9; CDF_y = 0 below 12:
    # sum |diff| * gap = 9 * (.5 * 1) + 1 * 3 = 7.5.
    logits, labels = one(row(d(0), d(9)), ID["12"])
    assert NTLoss(tok, "was-cdf", digit_level=False)(logits, labels).item() == pytest.approx(7.5)
    assert NTLoss(tok, "was", digit_level=False)(logits, labels).item() == pytest.approx(7.5)


def test_multi_digit_raw_values(tok) -> None:
    # label "12", 1/2 on "007" (value 7) and 1/2 on "9": was = .5*5 + .5*3 = 4 ; yhat = 8, mse = 16 (raw values)
    logits, labels = one(row(ID["007"], d(9)), ID["12"])
    assert NTLoss(tok, "was", digit_level=False)(logits, labels).item() == pytest.approx(4.0)
    assert NTLoss(tok, "mse", digit_level=False)(logits, labels).item() == pytest.approx(16.0)
    # digit_level=True: "12" is not a number token, so that position is not scored at all
    assert NTLoss(tok, "was")(logits, labels).item() == 0.0


def test_values_beyond_float32_stay_exact() -> None:
    # 100000000 and 100000001 are the same float32; distances are taken in float64, so the loss is exactly 1
    tokenizer = word_tokenizer(["a", "0", "100000000", "100000001"])
    ntl = NTLoss(tokenizer, "was", digit_level=False)
    assert ntl(*one(row(2, width=4), 3)).item() == 1.0
    assert NTLoss(tokenizer, "mae", digit_level=False)(*one(row(2, width=4), 3)).item() == 1.0


def test_scored_positions(tok) -> None:
    labels = torch.tensor([[ID["a"], d(4), -100, ID["12"], ID["\u25813"], V + 2]])
    expected = torch.tensor([[False, True, False, False, True, False]])
    assert torch.equal(NTLoss(tok).slots(labels) >= 0, expected)
    expected[0, 3] = True
    assert torch.equal(NTLoss(tok, digit_level=False).slots(labels) >= 0, expected)


def test_prefixed_tokens_are_numbers(tok) -> None:
    # label "\u01207" (value 7), all mass on "\u25813" (value 3): |7 - 3| = 4
    assert NTLoss(tok, "was")(*one(row(ID["\u25813"]), ID["\u01207"])).item() == pytest.approx(4.0)


def test_reweigh_by_hand(tok) -> None:
    # Full softmax: "a", "3", "8" each 1/3, so the mass on number tokens m = 2/3. For label 4 the worst number
    # token is 9 (|4-9| = 5 > |4-0| = 4). was: 2/3 * 2.5 + 1/3 * 5 = 10/3.
    # mse: worst = max((4-0)^2, (4-9)^2) = 25 -> 2/3 * 2.25 + 1/3 * 25 = 1.5 + 25/3.
    logits, labels = one(row(d(3), d(8), ID["a"]), d(4))
    assert NTLoss(tok, "was", reweigh=True)(logits, labels).item() == pytest.approx(10 / 3, rel=1e-5)
    assert NTLoss(tok, "mse", reweigh=True)(logits, labels).item() == pytest.approx(1.5 + 25 / 3, rel=1e-5)
    # one-hot was-cdf reweigh: worst W1 = max(4 - 0, 9 - 4) = 5 -> same 10/3
    assert NTLoss(tok, "was-cdf", reweigh=True)(logits, labels).item() == pytest.approx(10 / 3, rel=1e-5)
    # passing the logsumexp (e.g. from CE) gives the same value without a second pass
    lse = torch.logsumexp(logits, -1)
    assert NTLoss(tok, "was", reweigh=True)(logits, labels, logsumexp=lse).item() == pytest.approx(10 / 3, rel=1e-5)
    # all mass on numbers: reweigh changes nothing
    logits, labels = one(row(d(3), d(8)), d(4))
    assert NTLoss(tok, "was", reweigh=True)(logits, labels).item() == pytest.approx(2.5, rel=1e-5)


# ---------------------------------------------------------------------------------------------------- reductions


def test_reductions_and_weights(tok) -> None:
    # positions: "a" (text), "4" (loss 2.5 as above), -100, "3" with all mass on 3 (loss 0)
    logits = torch.stack([row(ID["a"]), row(d(3), d(8)), row(d(1)), row(d(3))]).unsqueeze(0)  # (1, 4, V)
    labels = torch.tensor([[ID["a"], d(4), -100, d(3)]])
    weights = torch.tensor([[5.0, 3.0, 7.0, 1.0]])
    assert NTLoss(tok)(logits, labels).item() == pytest.approx(1.25)  # (2.5 + 0) / 2
    assert NTLoss(tok)(logits, labels, weights).item() == pytest.approx(1.875)  # (3*2.5 + 1*0) / (3 + 1)
    assert NTLoss(tok, reduction="sum")(logits, labels, weights).item() == pytest.approx(7.5)
    none = NTLoss(tok, reduction="none")(logits, labels, weights)
    torch.testing.assert_close(none, torch.tensor([[0.0, 7.5, 0.0, 0.0]]))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_no_number_labels_zero_keeps_graph(tok, kind, reduction) -> None:
    logits = torch.randn(2, 3, V, requires_grad=True)
    labels = torch.tensor([[ID["a"], -100, ID["b"]], [-100, -100, ID["1st"]]])
    loss = NTLoss(tok, kind, reduction=reduction)(logits, labels)
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))


def test_no_nan_from_minus_inf_logits_off_number_positions(tok) -> None:
    x = torch.randn(1, 2, V)
    x[0, 0, 2:15] = -math.inf  # a text position whose number columns (all of them) are masked to -inf
    x.requires_grad_(True)
    labels = torch.tensor([[ID["a"], d(4)]])
    for kind in KINDS:
        loss = NTLoss(tok, kind)(x, labels)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(x.grad).all(), kind
        x.grad = None


def test_padded_vocabulary(tok) -> None:
    base = row(d(3), d(8)).view(1, 1, V)
    padded = torch.cat([base, torch.full((1, 1, 7), 5.0)], -1)  # 7 extra columns with large logits: non-number
    assert NTLoss(tok)(padded, torch.tensor([[d(4)]])).item() == pytest.approx(2.5)
    assert NTLoss(tok)(padded, torch.tensor([[V + 3]])).item() == 0.0  # a padded id as label: not a number
    with pytest.raises(ValueError, match="number token"):
        NTLoss(tok)(torch.zeros(1, 1, 10), torch.tensor([[2]]))  # narrower than the number ids


# ---------------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "wass"}, "kind"), ({"reduction": "avg"}, "reduction"),
        ({"kind": "mse", "squash_factor": 3.0}, "squash_factor"), ({"squash_factor": 0.5}, "> 1"),
        ({"sigma": 0.0}, "sigma"), ({"huber_delta": -1.0}, "huber_delta"), ({"kind": "gce", "reweigh": True}, "gce"),
    ],
)  # fmt: skip
def test_bad_options(tok, kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        NTLoss(tok, **kwargs)


def test_bad_inputs(tok) -> None:
    ntl = NTLoss(tok)
    logits = torch.zeros(2, 3, V)
    with pytest.raises(ValueError, match=r"\(2, 3, 25\).*\(2, 4\)"):
        ntl(logits, torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        ntl(logits, torch.zeros(2, 3))
    with pytest.raises(TypeError, match="floating"):
        ntl(torch.zeros(2, 3, V, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="loss_weights"):
        ntl(logits, torch.zeros(2, 3, dtype=torch.long), torch.ones(3))
    with pytest.raises(ValueError, match="was-cdf"):
        ntl(logits, torch.zeros(2, 3, dtype=torch.long), target_probs=torch.ones(2, 3, 12))
    with pytest.raises(ValueError, match=r"\(2, 3, 12\)"):
        NTLoss(tok, "was-cdf")(logits, torch.zeros(2, 3, dtype=torch.long), target_probs=torch.ones(2, 3, 5))


# ---------------------------------------------------------------------------------------------------- fused CE + NTL


CASES = [("was", False, NTLoss), ("was-cdf", True, NTLoss), ("mse", False, NTLoss), ("mae", True, NTLoss),
         ("huber", False, NTLoss), ("gce", False, NTLoss)]  # fmt: skip


@pytest.mark.parametrize(("kind", "reweigh", "cls"), CASES)
@pytest.mark.parametrize("ce_reduction", ["mean", "sum"])
def test_fused_matches_cross_entropy_plus_ntl(tok, kind, reweigh, cls, ce_reduction) -> None:
    torch.manual_seed(0)
    width = V + 3  # padded vocabulary
    weight = torch.randn(8, width)
    hidden = torch.randn(2, 6, 8)
    labels = torch.randint(0, V, (2, 6))
    labels[0, :2] = -100
    labels[1, 1:4] = torch.tensor([d(1), d(2), d(3)])
    ntl = cls(tok, kind, reweigh=reweigh)
    w = torch.rand(2, 6)

    def grads(fused: bool):
        h = hidden.clone().requires_grad_(True)
        logits = h @ weight  # non-leaf, like a model's output
        if fused:
            ce, n = cross_entropy_and_ntl(logits, labels, ntl, ce_reduction=ce_reduction, loss_weights=w)
        else:
            ce = F.cross_entropy(logits.view(-1, width), labels.view(-1), reduction=ce_reduction)
            n = ntl(logits, labels, w)
        (ce + 0.3 * n).backward()
        return ce.detach(), n.detach(), h.grad

    ce_a, n_a, g_a = grads(False)
    ce_b, n_b, g_b = grads(True)
    torch.testing.assert_close(ce_b, ce_a)
    torch.testing.assert_close(n_b, n_a)
    torch.testing.assert_close(g_b, g_a, rtol=1e-4, atol=1e-5)


def test_fused_without_ntl_bf16_and_no_numbers(tok) -> None:
    torch.manual_seed(1)
    x = torch.randn(2, 5, V, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, V, (2, 5))
    ce, zero = cross_entropy_and_ntl(x, labels, None)
    ce.backward()
    assert zero.item() == 0.0 and x.grad.dtype == torch.bfloat16
    ref = F.cross_entropy(x.detach().float().view(-1, V), labels.view(-1))
    torch.testing.assert_close(ce, ref)
    y = x.detach().float().requires_grad_(True)
    F.cross_entropy(y.view(-1, V), labels.view(-1)).backward()
    torch.testing.assert_close(x.grad.float(), y.grad, rtol=2e-2, atol=1e-4)
    # a batch without number labels: NTL is 0 and backward is finite
    x.grad = None
    ce, n = cross_entropy_and_ntl(x, torch.full((2, 5), ID["a"]), NTLoss(tok))
    (ce + n).backward()
    assert n.item() == 0.0 and torch.isfinite(x.grad.float()).all()
    with pytest.raises(ValueError, match="reduction"):
        cross_entropy_and_ntl(x, labels, NTLoss(tok, reduction="none"))
    with pytest.raises(ValueError, match="ignore_index"):
        cross_entropy_and_ntl(x, labels, NTLoss(tok), ignore_index=0)


# ---------------------------------------------------------------------------------------------------- digit head


def certain(digits: list[int]) -> torch.Tensor:
    """(1, P, 10) digit logits putting all mass on the given digits."""
    x = torch.full((1, len(digits), 10), OFF)
    for j, digit in enumerate(digits):
        x[0, j, digit] = 0.0
    return x


def test_digit_ntl_by_hand() -> None:
    logits = certain([0, 0, 0])  # predicts 000
    target = torch.tensor([[1, 2, 3]])
    assert digit_ntl(logits, target).item() == pytest.approx(2.0)  # (1 + 2 + 3) / 3
    assert digit_ntl(logits, target, "mse").item() == pytest.approx((1 + 4 + 9) / 3)
    assert digit_ntl(logits, target, place_weighted=True).item() == pytest.approx(123 / 111)
    ignored = torch.tensor([[-100, 2, 3]])
    assert digit_ntl(logits, ignored).item() == pytest.approx(2.5)
    assert digit_ntl(logits, ignored, place_weighted=True).item() == pytest.approx((10 * 2 + 3) / 11)
    assert digit_ntl(logits, target, reduction="sum").item() == pytest.approx(6.0)
    torch.testing.assert_close(digit_ntl(logits, ignored, reduction="none"), torch.tensor([[0.0, 2.0, 3.0]]))
    assert digit_ntl(torch.zeros(1, 3, 10), target, "gce").item() == pytest.approx(math.log(10), rel=1e-6)
    # squash 1.001 on digits: nearly a 0/1 cost -> every wrong digit (d = 1, 2, 3) costs about 1
    expected = sum(1 + (dist - 1) * 0.001 / 8 for dist in (1, 2, 3)) / 3
    assert digit_ntl(logits, target, squash_factor=1.001).item() == pytest.approx(expected)
    masked = logits.clone()
    masked[0, 0] = -math.inf  # an ignored place whose logits are all -inf: still finite
    masked.requires_grad_(True)
    loss = digit_ntl(masked, ignored)
    loss.backward()
    assert loss.item() == pytest.approx(2.5) and torch.isfinite(masked.grad).all()
    none_valid = torch.full((1, 3), -100)
    x = torch.zeros(1, 3, 10, requires_grad=True)
    loss = digit_ntl(x, none_valid)
    loss.backward()
    assert loss.item() == 0.0 and torch.isfinite(x.grad).all()


def test_digit_ntl_bad_input() -> None:
    with pytest.raises(ValueError, match="0..9"):
        digit_ntl(torch.zeros(1, 2, 10), torch.tensor([[1, 12]]))
    with pytest.raises(ValueError, match=r"\(1, 2, 9\)"):
        digit_ntl(torch.zeros(1, 2, 9), torch.tensor([[1, 2]]))
    with pytest.raises(TypeError, match="integer"):
        digit_ntl(torch.zeros(1, 2, 10), torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="place_base"):
        digit_ntl(torch.zeros(1, 2, 10), torch.tensor([[1, 2]]), place_weighted=True, place_base=0)


# ---------------------------------------------------------------------------------------------------- ntloss


@pytest.mark.parametrize("squash", [1.5, 3.0, 9.0])
def test_squash_matches_ntloss_on_uneven_values(squash) -> None:
    """Values 0, 10, 20, 100 (smallest gap 10, not 1): the squashed scale equals the authors' package's."""
    ntloss = pytest.importorskip("ntloss")
    tokenizer = word_tokenizer(["a", "b", "0", "10", "20", "100"])
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 6) * 3
    labels = torch.tensor([[2, 3, 4, 5, 0], [5, 4, -100, 2, 3]])
    theirs = ntloss.NTLoss(tokenizer, digit_level=False, reweigh=False, squash_factor=squash)
    ours = NTLoss(tokenizer, "was", digit_level=False, squash_factor=squash)
    torch.testing.assert_close(ours(logits, labels), theirs(logits, labels))


@pytest.mark.parametrize(("kind", "squash"), [("was", None), ("was", 3.0), ("mse", None), ("mae", None)])
def test_matches_ntloss_package(kind, squash) -> None:
    """Where the definitions coincide (digits-only vocabulary, reweigh off), the authors' package agrees."""
    ntloss = pytest.importorskip("ntloss")
    tokenizer = word_tokenizer(["a", "b", *"0123456789", "\u00bd", "1st", "."])
    torch.manual_seed(0)
    logits = torch.randn(2, 6, 15) * 3
    labels = torch.randint(0, 15, (2, 6))
    labels[0, 0] = -100
    weights = torch.rand(2, 6)
    if kind == "was":
        theirs = ntloss.NTLoss(tokenizer, digit_level=True, reweigh=False, squash_factor=squash)
    else:
        fn = {"mse": F.mse_loss, "mae": F.l1_loss}[kind]
        theirs = ntloss.NTLossDotProduct(tokenizer, digit_level=True, reweigh=False, loss_function=fn)
    ours = NTLoss(tokenizer, kind, squash_factor=squash)
    torch.testing.assert_close(ours(logits, labels, weights), theirs(logits, labels, loss_weights=weights))


# ---------------------------------------------------------------------------------------------------- GCE form


@pytest.mark.parametrize("form", ["replace", "add"])
def test_gce_replaces_cross_entropy_at_digit_labels(form) -> None:
    """NTL paper sec. 4.1.3: GCE *replaces* CE at number positions; gce_form="add" keeps CE + lambda * GCE."""
    from numadapter.config import NumberAdapterConfig
    from numadapter.tuner.loss import lm_terms

    digit_ids = list(range(3, 13))  # token 3 + k is digit k; 0..2 are text
    config = NumberAdapterConfig(
        encoding="digits", ntl_weight=0.7, ntl_kind="gce", gce_form=form, digit_token_ids=digit_ids
    )
    torch.manual_seed(0)
    logits = torch.randn(1, 4, 14, requires_grad=True)
    labels = torch.tensor([[1, 3 + 4, 3 + 9, -100]])  # text, digit 4, digit 9, ignored
    denom = torch.tensor(3.0)
    ce, gce = lm_terms(config, logits, labels, denom)
    # by hand: log p over the full vocabulary; eq. 7 target t_j ~ exp(-(j - y)^2 / (2 * 0.5^2)) over digits j
    logp = logits.detach().log_softmax(-1)[0]
    expected_gce = 0.0
    for t, y in ((1, 4), (2, 9)):
        weights = [math.exp(-((j - y) ** 2) / (2 * 0.5**2)) for j in range(10)]
        expected_gce -= sum(w / sum(weights) * logp[t, 3 + j].item() for j, w in enumerate(weights))
    ce_text = -logp[0, 1].item()
    ce_digits = -logp[1, 7].item() - logp[2, 12].item()
    expected_ce = ce_text if form == "replace" else ce_text + ce_digits
    assert ce.item() == pytest.approx(expected_ce / 3, rel=1e-5)
    assert gce.item() == pytest.approx(expected_gce / 3, rel=1e-5)
    (ce + config.ntl_weight * gce).backward()
    assert torch.isfinite(logits.grad).all()


def test_gce_form_is_validated() -> None:
    from numadapter.config import NumberAdapterConfig

    with pytest.raises(ValueError, match=r"gce_form.*'replace', 'add'.*'sum'"):
        NumberAdapterConfig(encoding="digits", gce_form="sum")


# ---------------------------------------------------------------------------------------------------- number level


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_number_level_matches_ntloss(reduction) -> None:
    """Whole-number NTL equals the authors' NumberLevelLoss (float_level=False, reweigh=False)."""
    ntloss = pytest.importorskip("ntloss")
    from numadapter.ntl import number_level_ntl

    tokenizer = word_tokenizer(["a", "b", *"0123456789", ".", "c"])
    torch.manual_seed(0)
    logits = torch.randn(3, 9, 14) * 2
    # numbers: 123 | 45 | 0 (alone) | 7 (row end); row 2: one 9-digit number; row 3: 1 and 7777 around "." / "c"
    labels = torch.tensor(
        [[0, 3, 4, 5, 12, 6, 7, -100, 9], [2, 3, 4, 5, 6, 7, 8, 9, 10], [11, 11, 0, 3, 13, 9, 9, 9, 9]]
    )
    theirs = ntloss.NumberLevelLoss(tokenizer, reweigh=False)
    ours = number_level_ntl(logits, labels, list(range(2, 12)), reduction=reduction)
    torch.testing.assert_close(ours, theirs(logits, labels, reduction=reduction))


def test_number_level_by_hand() -> None:
    from numadapter.ntl import number_level_ntl

    # label "12": position 0 all on digit 1, position 1 half on 2 and half on 4 -> yhat = 10 * 1 + 3 = 13
    logits = torch.full((1, 2, 10), -1e4)
    logits[0, 0, 1] = 0.0
    logits[0, 1, 2] = logits[0, 1, 4] = 0.0
    loss = number_level_ntl(logits, torch.tensor([[1, 2]]), list(range(10)))
    assert loss.item() == pytest.approx(1 / 25, rel=1e-5)  # |13 - 12| / (13 + 12)


def test_number_level_from_the_config() -> None:
    from numadapter.config import NumberAdapterConfig
    from numadapter.ntl import number_level_ntl
    from numadapter.tuner.loss import lm_terms

    config = NumberAdapterConfig(
        encoding="digits", ntl_weight=0.5, ntl_level="number", digit_token_ids=list(range(10))
    )
    torch.manual_seed(1)
    logits = torch.randn(1, 4, 12)
    labels = torch.tensor([[1, 2, 11, 3]])
    _, ntl = lm_terms(config, logits, labels, torch.tensor(4.0))
    assert ntl.item() == pytest.approx(number_level_ntl(logits, labels, list(range(10)), reduction="sum").item() / 4)
    with pytest.raises(ValueError, match=r"ntl_level.*'number'.*fone.*ntl_level='token'"):
        NumberAdapterConfig(encoding="fone", ntl_level="number")
