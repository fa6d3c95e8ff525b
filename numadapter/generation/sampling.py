"""Choosing the next token: greedy or sampled, with temperature, top-k and top-p, and token suppression.

The warpers follow transformers' definitions and order (``TemperatureLogitsWarper``, ``TopKLogitsWarper``,
``TopPLogitsWarper``; ``MinNewTokensLengthLogitsProcessor`` for `min_new_tokens`), so a sampled run draws from the
same distribution as ``model.generate(do_sample=True, ...)``. Everything stays on the device: no host sync here.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingSettings:
    """How the next token is chosen.

    Attributes:
        do_sample: False: argmax (greedy). True: draw from the (warped) softmax.
        temperature: logits are divided by it before sampling (1.0: unchanged).
        top_k: keep the k most likely tokens (None: all).
        top_p: keep the smallest set of most likely tokens whose probability reaches top_p (None or 1.0: all).
    """

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None


def sampling_settings(
    do_sample: bool, temperature: float | None, top_k: int | None, top_p: float | None
) -> SamplingSettings:
    """Validates the sampling arguments of `numadapter.generation.generate`; returns the settings.

    Raises:
        ValueError / TypeError: a value out of its range (the message names it and the valid range).
    """
    if not isinstance(do_sample, bool):
        raise TypeError(f"`do_sample` must be True or False, got {do_sample!r}.")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not math.isfinite(temperature)
        or temperature <= 0
    ):
        raise ValueError(
            f"`temperature` must be a positive finite number, got {temperature!r}: for greedy decoding use "
            "do_sample=False instead of temperature=0."
        )
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"`top_k` must be a positive integer or None, got {top_k!r}.")
    if top_p is not None and (
        isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0.0 < top_p <= 1.0
    ):
        raise ValueError(f"`top_p` must be in (0, 1] or None, got {top_p!r}.")
    if not do_sample and (temperature, top_k, top_p) != (None, None, None):
        given = {k: v for k, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p)) if v is not None}
        warnings.warn(
            f"{given} only apply when sampling; they are ignored because do_sample=False (greedy). Pass "
            "do_sample=True to sample.",
            UserWarning,
            stacklevel=3,
        )
    return SamplingSettings(
        do_sample=do_sample,
        temperature=1.0 if temperature is None else float(temperature),
        top_k=top_k,
        top_p=None if top_p is None else float(top_p),
    )


def warp(scores: torch.Tensor, settings: SamplingSettings) -> torch.Tensor:
    """Temperature, then top-k, then top-p (transformers' order); removed tokens get -inf.

    Args:
        scores: float32 ``[B, V]`` logits.
        settings: the sampling settings.

    Returns:
        ``[B, V]`` warped logits.
    """
    if settings.temperature != 1.0:
        scores = scores / settings.temperature
    if settings.top_k is not None and settings.top_k < scores.shape[-1]:
        kth = torch.topk(scores, settings.top_k, dim=-1).values[..., -1:]  # (B, 1)
        scores = scores.masked_fill(scores < kth, -math.inf)
    if settings.top_p is not None and settings.top_p < 1.0:
        ascending, order = torch.sort(scores, dim=-1)  # (B, V)
        cumulative = ascending.softmax(-1).cumsum(-1)  # (B, V)
        drop = cumulative <= 1.0 - settings.top_p
        drop[..., -1:] = False  # always keep the most likely token
        scores = scores.masked_fill(drop.scatter(-1, order, drop), -math.inf)
    return scores


class TokenChooser:
    """Turns the last-position logits into the next token of every row.

    Args:
        settings: greedy or sampling settings.
        suppressed: token ids that are never chosen (e.g. [AGG], which carries no value while generating).
        eos_ids: end-of-sequence ids, blocked while fewer than `min_new_tokens` tokens were generated.
        min_new_tokens: see `eos_ids`.
        generator: the random generator for sampling (None: torch's global one).
        device: the logits' device.
    """

    def __init__(
        self,
        settings: SamplingSettings,
        suppressed: list[int],
        eos_ids: list[int],
        min_new_tokens: int,
        generator: torch.Generator | None,
        device: torch.device,
    ) -> None:
        self.settings = settings
        self.suppressed = torch.tensor(sorted(set(suppressed)), dtype=torch.long, device=device)
        self.eos = torch.tensor(sorted(set(eos_ids)), dtype=torch.long, device=device)
        self.min_new_tokens = min_new_tokens
        self.generator = generator

    def __call__(self, logits: torch.Tensor, step: int) -> torch.Tensor:
        """The next tokens.

        Args:
            logits: ``[B, V]`` logits at the last position (any float dtype).
            step: how many tokens were generated before this one.

        Returns:
            int64 ``[B]`` (on the logits' device; not synchronised).
        """
        blocked = self.suppressed
        if step < self.min_new_tokens and self.eos.numel():
            blocked = torch.cat((blocked, self.eos))
        if not self.settings.do_sample:
            if blocked.numel():
                logits = logits.index_fill(-1, blocked, -math.inf)
            return logits.argmax(-1)
        scores = logits.float()
        if blocked.numel():
            scores = scores.index_fill(-1, blocked, -math.inf)
        probs = warp(scores, self.settings).softmax(-1)  # (B, V)
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(1)
