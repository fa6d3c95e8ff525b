"""Reading answers off a trained model: the prediction paths of `eval_harness.arms`.

- FoNE head (``fone_head``): one forward pass over the prompts; at the last prompt position t (the ``=``), whose next
  token is the answer's [NUM], the digit head scores every place (hidden state t predicts token t+1, docs/DESIGN.md,
  "One function owns each alignment") and the argmax digits are the answer (FoNE Definition 3.8), rendered exactly
  (`numadapter.methods.fone.embedding.digits_to_strings`). This is what numadapter's decode loop computes for a
  generated [NUM]; it skips the step that picks the [NUM] token itself, so it is used only when every answer is a
  single [NUM] (checked), otherwise the generate path runs, with a warning and the reason in `Predictions.path`.
- xVal head (``xval_head``): the same position, the regression head's denormalised value.
- ``generate``: greedy decoding (plain: ``model.generate``; numadapter: `numadapter.generation.generate`), the
  completion text is the prediction (its first number is the answer, `eval_harness.metrics.parse_number`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

import torch
from tqdm.auto import tqdm

from eval_harness.arms import Method
from eval_harness.arms.encode import EncodedSet
from eval_harness.arms.models import Built
from eval_harness.tasks.base import canonical_number
from numadapter.evaluation import generate_answers
from numadapter.methods.fone.embedding import digits_to_strings


@dataclass
class Predictions:
    """Predictions for a split, one per example.

    Attributes:
        texts: what the model produced (completion text, or the number text read from a head).
        values: the numeric prediction as text for value metrics (xVal: the unrounded value; else = `texts`).
        path: how they were obtained (written into the result).
        rounded: whether `texts` were rounded to the targets' decimals (xVal).
    """

    texts: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    path: str = ""
    rounded: bool = False


def fone_answers(
    number_logits: torch.Tensor,
    positions: torch.Tensor,
    int_digits: int,
    frac_digits: int,
    sign_logits: torch.Tensor | None = None,
) -> list[str]:
    """Exact number texts from the FoNE digit head at one position per row.

    Args:
        number_logits: ``[B, T, P, 10]`` digit logits at every position (most significant place first).
        positions: int64 ``[B]``: the position whose head output is the answer (the last prompt token).
        int_digits: m.
        frac_digits: n (``P = m + n``).
        sign_logits: ``[B, T, 2]`` (class 1 = minus) with ``sign_policy="feature"``, else None.

    Returns:
        Canonical number texts, e.g. ``"1359.759"``.
    """
    rows = torch.arange(number_logits.shape[0], device=number_logits.device)
    digits = number_logits[rows, positions].argmax(-1)  # (B, P)
    sign = None
    if sign_logits is not None:
        sign = torch.where(sign_logits[rows, positions].argmax(-1) == 1, -1, 1)  # (B,)
    return digits_to_strings(digits.cpu(), None if sign is None else sign.cpu(), int_digits, frac_digits)


def round_like(value: float, target: str) -> str:
    """`value` rounded half-up to as many decimals as `target` is written with, as canonical text."""
    text = target.strip()
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    exact = Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    return canonical_number(exact)


TRAIN_FORMATS = ("auto", "sequence")


def train_format(method: Method, encoded: EncodedSet, requested: str = "auto") -> str:
    """How a training set is fed: ``"head"`` (`EncodedSet.head_batch`: prompts alone, the last prompt position
    trained on the answer) or ``"sequence"`` (`EncodedSet.batch`: prompt + answer + eos).

    ``"head"`` when `requested` is ``"auto"``, the method predicts with a number head (FoNE / xVal) and every answer
    is one [NUM]: the head then reads each answer at the last prompt position, so feeding the answer and its eos
    trains nothing prediction uses. ``"sequence"`` otherwise, and always when `requested` is ``"sequence"``.
    """
    if requested not in TRAIN_FORMATS:
        raise ValueError(f"`train_format` must be one of {list(TRAIN_FORMATS)}, got {requested!r}.")
    if requested == "sequence" or method.prediction not in ("fone_head", "xval_head"):
        return "sequence"
    return "head" if bool(encoded.one_number_answers().all()) else "sequence"


def _batches(n: int, batch_size: int, desc: str):
    return tqdm(range(0, n, batch_size), desc=desc, leave=False, unit="batch")


@torch.no_grad()
def _head(built: Built, encoded: EncodedSet, batch_size: int, device: torch.device | str, xval: bool) -> list:
    config = built.config
    out_values: list = []
    for start in _batches(len(encoded), batch_size, "predict (head)"):
        index = torch.arange(start, min(start + batch_size, len(encoded)))
        batch = encoded.prompt_batch(index, device)
        out = built.model(**batch)
        positions = (encoded.prompt_lengths[index] - 1).to(device)
        if xval:
            rows = torch.arange(len(index), device=device)
            out_values += out.number_values[rows, positions].double().cpu().tolist()
        else:
            out_values += fone_answers(
                out.number_logits, positions, config.int_digits, config.frac_digits, out.number_sign_logits
            )
    return out_values


@torch.no_grad()
def _generate_plain(
    built: Built, encoded: EncodedSet, batch_size: int, device: torch.device | str, max_new_tokens: int
) -> list[str]:
    texts: list[str] = []
    codec = built.codec
    for start in _batches(len(encoded), batch_size, "predict (generate)"):
        index = torch.arange(start, min(start + batch_size, len(encoded)))
        lengths = encoded.prompt_lengths[index]
        width = int(lengths.max())
        ids = torch.full((len(index), width), codec.pad_id, dtype=torch.long)
        mask = torch.zeros((len(index), width), dtype=torch.long)
        for row, (i, length) in enumerate(zip(index.tolist(), lengths.tolist())):  # left padding
            ids[row, width - length :] = encoded.input_ids[i, :length]
            mask[row, width - length :] = 1
        out = built.model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=codec.eos_id,
            pad_token_id=codec.pad_id,
        )
        texts += built.tokenizer.batch_decode(out[:, width:].cpu(), skip_special_tokens=True)
    return texts


def predict(
    method: Method,
    built: Built,
    encoded: EncodedSet,
    targets: list[str],
    *,
    batch_size: int,
    device: torch.device | str,
    max_new_tokens: int,
) -> Predictions:
    """Predicts the answers of `encoded` with the method's prediction path (see the module docstring).

    Args:
        method: the method.
        built: its trained model.
        encoded: the split, encoded by ``built.codec``.
        targets: the target texts (xVal rounds to their decimals).
        batch_size: prompts per forward / decode batch.
        device: the model's device.
        max_new_tokens: the decode budget of the generate path.

    Returns:
        The `Predictions`.
    """
    was_training = built.model.training
    built.model.eval()
    try:
        head = method.prediction in ("fone_head", "xval_head")
        reason = ""
        if head:
            single = encoded.one_number_answers()
            if not bool(single.all()):
                first = int((~single).nonzero()[0])
                reason = (
                    f" (the {method.prediction.replace('_', ' ')} path needs every answer to be one [NUM]; "
                    f"{int((~single).sum())} of {len(single)} are not, first row {first}: {targets[first]!r}, e.g. "
                    "text, several numbers, or a number outside the adapter's range (int_digits / frac_digits, "
                    "xVal's scale and clip), which stays text)"
                )
                warnings.warn(f"{method.name}: predicting by generation instead of the head{reason}.", stacklevel=2)
        if head and not reason:
            xval = method.prediction == "xval_head"
            raw = _head(built, encoded, batch_size, device, xval)
            if xval:
                texts = [round_like(v, t) for v, t in zip(raw, targets)]
                path = "xVal regression head at the last prompt position, rounded to the target's decimals"
                return Predictions(texts, [repr(float(v)) for v in raw], path, rounded=True)
            path = "FoNE digit head at the last prompt position ('='), argmax per digit place (exact)"
            if built.config is not None and built.config.fone_head_target == "feature":
                path = (
                    "FoNE digit head at the last prompt position ('='), carry-aware: lowest place first, each "
                    "place's argmax with the candidates shifted by the digits below (exact)"
                )
            return Predictions(raw, list(raw), path)
        if method.backend == "numadapter":
            texts = generate_answers(
                built.model, built.number_tokenizer, encoded.prompts, max_new_tokens, batch_size, progress=False
            )
            path = "numadapter.generation.generate, greedy, first number of the completion" + reason
        else:
            texts = _generate_plain(built, encoded, batch_size, device, max_new_tokens)
            path = "model.generate, greedy, first number of the completion"
        return Predictions(texts, list(texts), path)
    finally:
        built.model.train(was_training)
