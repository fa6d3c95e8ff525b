"""Whether a FoNE adapter in answers mode uses its head, decided once from the training data.

In answers mode every number stays the base's digit tokens and only an answer the context head forms (a sum,
difference, product or quotient of the numbers before it; not a copy) becomes [NUM]. Where the data has few such
answers (unit conversions, numbers in words, max / min, a regression) the head has nothing to learn, yet the [NUM]
token still takes part in every softmax and the takeover in generation. `choose_head` measures the share of the
answers the head forms on up to `SAMPLE_ROWS` training examples drawn across the data set
(`numadapter.data.head_coverage.head_share`; in answers written as equations, such as whole worked solutions, each
equation's result, not its operands or the numbers restated in prose); below ``fone_head_min_share`` it sets
``fone_head_in_use=False`` on the trainer's copy of the adapter config (`own_decision`), shared with the tokenizer:
the tokenizer then writes no [NUM], the model's [NUM] logit is -inf (`numadapter.tuner.model`), and training and
generation are those of LoRA on digits. Every decision is a warning that says what was read, what was counted (and
how many answers the number places cannot hold), what was chosen and how to undo it.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

from numadapter.data.checks import first_example
from numadapter.data.head_coverage import (
    Answers,
    count_answers,
    head_coverage,
    head_share,
    warn_uncovered,
)
from numadapter.data.prepare import detect_format
from numadapter.methods.fone.answer_mode import POINTER_NUMBERS, POINTER_SETTINGS, answers_mode, context_count
from numadapter.methods.registry import get_method
from numadapter.tokenization.matching import tokenizer_mismatches
from numadapter.training.sampled import SAMPLE_ROWS, refuse_unsampled

# the fields a decision writes; the trainer keeps them on its own copy of the config, never on the caller's
DECIDED_FIELDS = ("fone_head_in_use", *POINTER_SETTINGS, "xval_center", "xval_scale")
# what each data format counts as the answers
COUNTED = {
    "prompt_completion": "the numbers of the completions",
    "prompt_completion_chat": "the numbers of the completions",
    "messages": "the numbers of the assistant turns",
    "text": (
        "every number of the text (a text column trains every token, the question's numbers too: give "
        "prompt/completion or messages data to count only the answers)"
    ),
}
# what is counted in answers written as equations (`numadapter.tokenization.equations`)
IN_EQUATIONS = (
    "; where those hold an '=', only each equation's result (the number right after '='; operands and restated "
    "numbers are context, in digits, except a repeat of a number the head writes, which is its copy)"
)


def own_decision(model: Any, ntok: Any) -> None:
    """Gives the trainer's model its own copy of the active adapter's config when the head is still to be decided,
    and binds `ntok` to that copy, so that the decision (`DECIDED_FIELDS`) lands on the model and its tokenizer
    (and is saved with them) and never on the config object the caller built, which a second run may reuse.

    A tokenizer that carries an earlier run's decision is rebound too: the model's undecided config rules."""
    from numadapter.training.xval_fit import fit_pending

    name = model.active_adapter
    config = model.peft_config[name]
    if (not answers_mode(config) or config.fone_head_in_use is not None) and not fit_pending(config):
        return
    own = copy.copy(config)
    model.peft_config[name] = own
    if set(tokenizer_mismatches(ntok, own)) <= set(DECIDED_FIELDS):  # else the trainer's check names the rest
        ntok.config = own


def _refuse_unsampled(dataset: Any) -> None:
    """`refuse_unsampled` for the head's choice."""
    fix = (
        "set fone_head_in_use=True (the head writes the answers it forms as [NUM]) or fone_head_in_use=False "
        "(every number in digit tokens, as LoRA on digits) on the NumberAdapterConfig, or pass the raw text data "
        "as a datasets.Dataset, and NumberSFTTrainer measures it"
    )
    hint = " numadapter.data.head_share(dataset, ntok, numadapter.prepare_dataset) measures a sample you choose."
    decides = "decides whether FoNE's context head is used (fone_head_in_use=None)"
    refuse_unsampled(dataset, decides, "the training answers", fix, hint)


def choose_head(
    model_config: Any, ntok: Any, dataset: Any, prepare: Any, rebuild: Callable[[], None] | None = None,
    text_field: str = "text",
) -> bool | None:  # fmt: skip
    """Sets ``fone_head_in_use`` on `model_config` and ``ntok.config`` when it is undecided (None) in answers mode,
    from the share `head_share` measures against ``fone_head_min_share``, and warns what it chose.

    Where the last K numbers form under that share, the pointer head's share (the last `POINTER_NUMBERS` numbers,
    each chosen by its own key) is measured too: at or above the share, and where the user set none of
    ``fone_context_pointer``, ``fone_context_numbers`` and ``fone_context_products`` (all None), it is turned on
    (`POINTER_SETTINGS` on both configs) and `rebuild` builds the model's head anew for it (without `rebuild` the
    pointer is not tried). An explicit setting is never replaced: the warning says what it held back.

    Args:
        model_config: the trainer's own copy of the adapter config (`own_decision`).
        ntok: the `NumberTokenizer`.
        dataset: the raw training data (a `datasets.Dataset`).
        prepare: ``prepare(dataset, ntok) -> prepared rows`` that mark the answers (completion or assistant turns).
        rebuild: builds the model's number head anew from its config.
        text_field: the text column of language-modeling data (what the warning says is counted).

    Returns:
        The decision (True / False), or None where there is nothing to decide (not answers mode, already decided).

    Raises:
        ValueError: a stream or already tokenized data, with the head undecided (`_refuse_unsampled`).
    """
    config = ntok.config
    if not answers_mode(config) or config.fone_head_in_use is not None:
        return None
    _refuse_unsampled(dataset)
    least = float(config.fone_head_min_share)
    count = context_count(config)
    read = min(len(dataset), SAMPLE_ROWS)  # what `sample_rows` draws
    source = f"{read} of the {len(dataset)} training examples" + (
        " (drawn at random across the data set, seed 0)" if read < len(dataset) else ""
    )
    counted = COUNTED.get(detect_format(first_example(dataset), text_field), COUNTED["text"]) + IN_EQUATIONS
    tally = count_answers(dataset, ntok, prepare, SAMPLE_ROWS)
    formed, answers = head_share(dataset, ntok, prepare, SAMPLE_ROWS, answers=tally.answers)
    share = formed / answers if answers else 0.0
    in_use = bool(answers) and share >= least
    measured = f"in {source}, counting {counted}, the last {count} numbers form {formed} of {answers} answers "
    measured += f"({share:.0%}; sums, differences, products, quotients of the numbers before them)"
    measured += _beyond_places(tally, config)
    chosen, held = "", ""
    if not in_use and answers and rebuild is not None and config.fone_context_pointer is None:
        reached, _ = head_share(dataset, ntok, prepare, SAMPLE_ROWS, settings=POINTER_SETTINGS, answers=answers)
        if reached / answers >= least:
            explicit = {n: getattr(config, n) for n in ("fone_context_numbers", "fone_context_products")}
            explicit = {n: v for n, v in explicit.items() if v is not None}
            pointed = f"choosing each of the last {POINTER_NUMBERS} by its own key forms {reached}"
            pointed += f" ({reached / answers:.0%})"
            if explicit:
                held = (
                    f"; {pointed}, but {', '.join(f'{n}={v!r}' for n, v in explicit.items())} was set, so the pointer "
                    "(fone_context_pointer) is not chosen: leave those at None to let the trainer choose it"
                )
            else:
                for target in {id(config): config, id(model_config): model_config}.values():
                    for name, value in POINTER_SETTINGS.items():  # products off: the saved config loads as trained
                        setattr(target, name, value)
                rebuild()
                chosen = f"; {pointed}: fone_context_pointer=True"
                formed, share, in_use = reached, reached / answers, True
    for target in {id(config): config, id(model_config): model_config}.values():
        target.fone_head_in_use = in_use
    if in_use:
        warnings.warn(
            f"FoNE context head: {measured}{chosen}, at or above fone_head_min_share={least:g}: the head writes those "
            "answers as [NUM] (fone_head_in_use=True, saved with the adapter). Set fone_head_in_use to False on the "
            "config to train every number in digit tokens (LoRA on digits) instead.",
            stacklevel=3,
        )
    else:
        warnings.warn(
            f"FoNE context head: {measured}{held}, under fone_head_min_share={least:g}: this adapter writes every "
            "number in the base's digit tokens, trained and generated as LoRA on digits (fone_head_in_use=False, "
            "saved with it). Set fone_head_in_use=True (or a lower fone_head_min_share) on the config to use the "
            "head anyway.",
            stacklevel=3,
        )
    return in_use


def _beyond_places(counted: Answers, config: Any) -> str:
    """What the choice's warning says about answers the config's number places cannot hold (nothing if none)."""
    if not counted.beyond:
        return ""
    wider = []
    if counted.int_digits > config.int_digits:
        wider.append(f"int_digits={counted.int_digits}")
    if counted.frac_digits > config.frac_digits:
        wider.append(f"frac_digits={counted.frac_digits}")
    return (
        f"; {counted.beyond} of the answers need more places than int_digits={config.int_digits}, "
        f"frac_digits={config.frac_digits} (the places are chosen on the NumberAdapterConfig; the head neither reads "
        f"nor writes those numbers, they stay text): {', '.join(wider)} holds every answer read"
    )


def check_head_coverage(dataset: Any, config: Any) -> None:
    """Warns when FoNE's context head cannot form many of the training answers of prepared `dataset`
    (`numadapter.data.head_coverage`; causal or sequence-to-sequence rows).

    Not with ``fone_numbers="answers"``: there every [NUM] answer is formable by construction, and the others are
    written in digits on purpose (trained as the base's tokens), not missed by the head."""
    count = get_method(config).coverage_context(config)
    if count:
        warn_uncovered(head_coverage(dataset, count), count, config.frac_digits)
