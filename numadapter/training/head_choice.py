"""Whether a FoNE adapter in answers mode uses its head, decided once from the training data (round 7).

In answers mode every number stays the base's digit tokens and only an answer the context head forms (a sum,
difference, product or quotient of the numbers before it; not a copy) becomes [NUM]. Where the data has few such
answers (unit conversions, numbers in words, max / min, a regression) the head has nothing to learn, yet the [NUM]
token still takes part in every softmax and the takeover in generation. `choose_head` measures the share of answers the
head forms on the first 2,000 training examples (`numadapter.data.head_coverage.head_share`); below
``fone_head_min_share`` it sets ``fone_head_in_use=False`` on the adapter's config and the tokenizer's: the tokenizer
then writes no [NUM], the model's [NUM] logit is -inf (`numadapter.tuner.model`), and training and generation are those
of LoRA on digits.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

from numadapter.data.head_coverage import POINTER_SETTINGS, answers_mode, head_share
from numadapter.methods.fone.pointer import POINTER_NUMBERS

logger = logging.getLogger(__name__)


def choose_head(
    model_config: Any, ntok: Any, dataset: Any, prepare: Any, rebuild: Callable[[], None] | None = None
) -> bool | None:
    """Sets ``fone_head_in_use`` on `model_config` and ``ntok.config`` when it is undecided (None) in answers mode,
    from the share `head_share` measures against ``fone_head_min_share``; warns when the head is left out.

    Where the last ``fone_context_numbers`` numbers form under that share and ``fone_context_pointer`` is undecided
    (None), the pointer head's share (the last `POINTER_NUMBERS` numbers, each chosen by its own key) is measured
    too: at or above the share it is turned on (``fone_context_pointer=True``, ``fone_context_numbers=16``,
    ``fone_context_products=False`` on both configs) and `rebuild` builds the model's head anew for it (without
    `rebuild` the pointer is not tried).

    Returns:
        The decision (True / False), or None where there is nothing to decide (not answers mode, already decided).
    """
    config = ntok.config
    if not answers_mode(config) or config.fone_head_in_use is not None:
        return None
    if not hasattr(dataset, "select") or "input_ids" in (getattr(dataset, "column_names", None) or ()):
        return None  # streamed, or already tokenized (with the head in use): left undecided, the head is used
    least = float(config.fone_head_min_share)
    count = config.fone_context_numbers
    formed, answers = head_share(dataset, ntok, prepare)
    share = formed / answers if answers else 0.0
    in_use = bool(answers) and share >= least
    if not in_use and answers and rebuild is not None and config.fone_context_pointer is None:
        reached, _ = head_share(dataset, ntok, prepare, settings=POINTER_SETTINGS)
        if reached / answers >= least:
            for target in {id(config): config, id(model_config): model_config}.values():
                for name, value in POINTER_SETTINGS.items():  # products off: the saved config loads as trained
                    setattr(target, name, value)
            rebuild()
            logger.info(
                "FoNE context head: the last %d numbers form %d of %d training answers (%.0f%%), choosing each of "
                "the last %d by its own key forms %d (%.0f%%): fone_context_pointer=True.",
                count, formed, answers, 100 * share,
                POINTER_NUMBERS, reached, 100 * reached / answers,
            )  # fmt: skip
            formed, share, in_use = reached, reached / answers, True
    for target in {id(config): config, id(model_config): model_config}.values():
        target.fone_head_in_use = in_use
    if not in_use:
        warnings.warn(
            f"The FoNE context head forms {formed} of the {answers} training answers ({share:.0%}; sums, differences, "
            f"products, quotients of the numbers before them), under fone_head_min_share={least:g}: this adapter "
            "writes every number in the base's digit tokens, trained and generated as LoRA on digits "
            "(fone_head_in_use=False, saved with it). Set fone_head_in_use=True (or a lower fone_head_min_share) on "
            "the config to use the head anyway.",
            stacklevel=3,
        )
    return in_use
