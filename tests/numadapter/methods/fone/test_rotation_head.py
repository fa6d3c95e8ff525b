"""fone_head_input="rotation": the answer's Fourier features as the complex product of two read-outs.

The mechanism at toy size: a hidden state that holds the FoNE features of two operands side by side (what attention
can bring to the answer position). A linear read-out cannot turn them into the features of the sum, which need the
product phi(a) * phi(b); the rotation head learns it exactly.
"""

from __future__ import annotations

import random

import pytest
import torch

from numadapter.config import NumberAdapterConfig
from numadapter.methods.fone.embedding import fone_features
from numadapter.methods.fone.head import FoNEDigitHead


def operand_states(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[n, 24]`` states (features of a, features of b, 8 noise dims) and the int64 ``[n, 4]`` digits of a + b."""
    rng = random.Random(seed)
    a, b = [rng.randrange(5000) for _ in range(n)], [rng.randrange(5000) for _ in range(n)]
    features = [fone_features([str(x) for x in xs], int_digits=4, frac_digits=0).float() for xs in (a, b)]
    noise = torch.randn(n, 8, generator=torch.Generator().manual_seed(seed))
    digits = torch.tensor([[int(c) for c in f"{x + y:04d}"] for x, y in zip(a, b)])
    return torch.cat([*features, noise], -1), digits


def fitted_exact_match(mode: str, steps: int = 300) -> float:
    torch.manual_seed(0)
    config = NumberAdapterConfig(encoding="fone", int_digits=4, frac_digits=0, fone_head_input=mode)
    head = FoNEDigitHead(24, config)
    states, digits = operand_states(2048, seed=0)
    optimizer = torch.optim.Adam(head.parameters(), lr=3e-2)
    for step in range(steps):
        rows = slice((step * 256) % 2048, (step * 256) % 2048 + 256)
        loss = head.loss(head(states[rows]), digits[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    held_states, held_digits = operand_states(1000, seed=1)
    with torch.no_grad():
        predicted, _ = head.predict(head(held_states))
    return (predicted == held_digits).all(-1).float().mean().item()


def test_rotation_head_adds_operand_features_that_a_linear_head_cannot():
    assert fitted_exact_match("rotation") > 0.98
    assert fitted_exact_match("linear") < 0.05


def test_rotation_head_starts_as_the_linear_head():
    torch.manual_seed(0)
    linear = FoNEDigitHead(
        24, NumberAdapterConfig(encoding="fone", int_digits=4, frac_digits=0, fone_head_input="linear")
    )
    torch.manual_seed(0)
    rotation = FoNEDigitHead(
        24, NumberAdapterConfig(encoding="fone", int_digits=4, frac_digits=0, fone_head_input="rotation")
    )
    states = torch.randn(5, 24)
    assert torch.allclose(linear(states).digit_logits, rotation(states).digit_logits)
    assert set(dict(rotation.named_parameters())) == {"proj.weight", "proj.bias", "rotation.weight", "rotation.bias"}


def test_unknown_head_input_names_the_choices():
    with pytest.raises(ValueError, match="rotation"):
        NumberAdapterConfig(encoding="fone", fone_head_input="bilinear")
