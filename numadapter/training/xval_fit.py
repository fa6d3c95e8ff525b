"""xVal's normalisation fitted on the training data, once, before anything is tokenized.

An xVal [NUM] carries ``(x - xval_center) / xval_scale`` and only values within ``xval_clip`` of it; at the config's
defaults (0 and 1) every number above 5 stays text and the regression head learns nothing. Where the user left both
at those defaults and ``xval_fit`` names a method, `fit_xval` reads the numbers the tokenizer would write as [NUM]
(every number that fits the digit places) in up to `SAMPLE_ROWS` training examples drawn across the data set and fits
the two values (`numadapter.methods.xval.embedding.fit_normalization`); where the sample leaves rows unread, the
range reaches `HEADROOM` x beyond its values (within the digit places) so that those rows keep their numbers. It
writes them on the trainer's own copy of the adapter config (`numadapter.training.head_choice.own_decision`) shared
with the tokenizer, and into the built input module and head; the adapter saves them. With ``xval_context_numbers`` >
0 the head then starts at the least-squares combination of the numbers before each answer in the same sample
(`numadapter.methods.xval.head.fit_start`), so a conversion or a linear forecast is right before the first step. A
warning says what was read and fitted, and how to keep one's own.
"""

from __future__ import annotations

import warnings
from typing import Any

from numadapter.data.head_coverage import measuring_copy, sample_rows
from numadapter.methods.registry import get_method
from numadapter.methods.xval.embedding import fit_normalization
from numadapter.methods.xval.head import fit_start
from numadapter.training.sampled import SAMPLE_ROWS, refuse_unsampled

# the prepared columns of number values (a causal row's; a sequence-to-sequence row's input and target)
FIELDS = ("number_values", "labels_number_values")
# how far the fitted range reaches beyond the sample's values (x 1.1) where the sample leaves rows unread: one of them
# may hold a value a little beyond its largest, which would otherwise stay text in silence (and train the head with
# no number to read there)
HEADROOM = 1.1
# a scale under which every number that fits the digit places is a [NUM] while the values are read
_WIDE = {"xval_center": 0.0, "xval_scale": 1e300, "out_of_range": "text"}


def fit_pending(config: Any) -> bool:
    """Whether a trainer is to fit ``xval_center`` / ``xval_scale``: xVal, ``xval_fit`` set, both at 0.0 / 1.0."""
    return getattr(config, "encoding", None) is not None and get_method(config).fits_normalisation(config)


def fit_xval(model: Any, ntok: Any, dataset: Any, prepare: Any) -> tuple[float, float] | None:
    """Fits and applies xVal's normalisation when `fit_pending` (see the module docstring).

    Args:
        model: the numadapter `PeftModel` being trained (its active adapter's config is the trainer's own copy).
        ntok: its `NumberTokenizer`, bound to that copy.
        dataset: the raw training data (a `datasets.Dataset`).
        prepare: ``prepare(dataset, ntok) -> prepared rows`` (the trainer's `numadapter.data.prepare_dataset`).

    Returns:
        ``(center, scale)`` as fitted, or None where nothing was to fit (or the sample holds no number).

    Raises:
        ValueError: a stream or already tokenized data, where the values cannot be read across the set.
    """
    config = ntok.config
    if not fit_pending(config):
        return None
    _refuse_unsampled(dataset)
    rows = dataset.select(sample_rows(len(dataset), SAMPLE_ROWS))
    prepared = prepare(rows, measuring_copy(ntok, _WIDE))
    values = [v for row in prepared for field in FIELDS for v in row.get(field) or ()]
    read = f"{len(rows)} of the {len(dataset)} training examples"
    if not values:
        warnings.warn(
            f"xVal: no number of {read} fits int_digits={config.int_digits}, frac_digits={config.frac_digits}, so "
            "xval_center and xval_scale stay 0 and 1 (values within 5 only). Widen the places or set them yourself.",
            stacklevel=3,
        )
        return None
    missed = len(rows) < len(dataset)  # rows the sample did not read: the range reaches beyond its values
    headroom = HEADROOM if missed else 1.0
    center, scale = fit_normalization(values, config.xval_fit, config.xval_clip, headroom, 10.0**config.int_digits)
    model_config = model.peft_config[model.active_adapter]
    for target in {id(config): config, id(model_config): model_config}.values():
        target.xval_center, target.xval_scale = center, scale
    modules = model.base_model.number_modules[model.active_adapter]
    for module in (modules.embedding, modules.head):
        if module is not None:
            module.center, module.scale = center, scale
    modules.restamp(model_config)  # the saved modules say what they were trained with
    start = _start_head(prepared, modules.head, center, scale)
    low, high = center - config.xval_clip * scale, center + config.xval_clip * scale
    reach = (
        f"; the range reaches {HEADROOM:g} x beyond them, within int_digits, for the rows not read" if missed else ""
    )
    warnings.warn(
        f"xVal: fitted xval_center={center:.6g}, xval_scale={scale:.6g} ({config.xval_fit!r}) on the {len(values)} "
        f"numbers of {read} (from {min(values):g} to {max(values):g}{reach}): a [NUM] carries (x - xval_center) / "
        f"xval_scale, so values from {low:.6g} to {high:.6g} are numbers and the rest stay text; saved with the "
        f"adapter. Set xval_center / xval_scale yourself (or xval_fit=None) to keep your own.{start}",
        stacklevel=3,
    )
    return center, scale


def answer_contexts(prepared: Any, count: int) -> tuple[list[list[float]], list[float]]:
    """The answers of prepared rows with the `count` numbers before each (most recent first), as raw values:
    ``(contexts, targets)``. A causal row's answers are its numbers under ``completion_mask`` (every number where it
    has none); a sequence-to-sequence row's are its target's, after the source's numbers. An answer with no number
    before it is left out (generation leaves it to the LM's digits)."""
    contexts, targets = [], []
    for row in prepared:
        numbers = list(row.get("number_values") or ())
        target = row.get("labels_number_values")
        if target is not None:  # sequence to sequence: the target's numbers, after the source's
            answers = range(len(numbers), len(numbers) + len(target))
            numbers += list(target)
        else:
            mask, positions = row.get("completion_mask"), row.get("number_positions") or ()
            answers = [n for n, t in enumerate(positions) if mask is None or mask[t]]
        for n in answers:
            if n:
                contexts.append(numbers[max(0, n - count) : n][::-1])
                targets.append(numbers[n])
    return contexts, targets


def _start_head(prepared: Any, head: Any, center: float, scale: float) -> str:
    """Starts the head at the least-squares combination of the sample's answers (`fit_start`); returns the words the
    warning adds ("" where the head reads no context or the sample has too few answers with a number before)."""
    count = getattr(head, "context_numbers", 0)
    if not count:
        return ""
    contexts, targets = answer_contexts(prepared, count)
    if len(targets) < count + 1:
        return ""
    offset, weights = fit_start(
        [[(v - center) / scale for v in row] for row in contexts], [(v - center) / scale for v in targets], count
    )
    head.start_at(offset, weights)
    shown = ", ".join(f"{w:.6g}" for w in weights)
    constant = center * (1 - sum(weights)) + offset * scale  # in values: answer = constant + sum_k w_k x_k
    return (
        f" The regression head starts at the least-squares combination of the {count} numbers before each of "
        f"{len(targets)} answers: weights ({shown}), latest first, plus {constant:.6g}."
    )


def _refuse_unsampled(dataset: Any) -> None:
    fix = (
        "set xval_center and xval_scale on the NumberAdapterConfig (numadapter.methods.xval.embedding."
        "fit_normalization fits them on values you choose), or pass the raw text data as a datasets.Dataset"
    )
    refuse_unsampled(dataset, "fits xVal's xval_center and xval_scale (xval_fit)", "the training numbers", fix)
