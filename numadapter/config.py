"""`NumberAdapterConfig`: every number setting of numadapter, on top of `peft.LoraConfig`.

The config is a `peft.LoraConfig` subclass, so all LoRA options (``r``, ``lora_alpha``, ``target_modules``,
``lora_dropout``, ``trainable_token_indices``, ...) work exactly as in PEFT. The number options below are
validated in `__post_init__`; an invalid value raises a `ValueError` that names the field, the value received
and what to change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from peft import LoraConfig

from numadapter.integrations.peft_type import config_peft_type
from numadapter.methods.fone.answer_mode import POINTER_NUMBERS
from numadapter.methods.fone.modes.registry import known_head_modes, unknown_head_mode_message
from numadapter.methods.registry import get_method, known_methods, unknown_encoding_message
from numadapter.ntl.vocab import KINDS as NTL_KINDS
from numadapter.numbers import find_numbers

FONE_PROJECTIONS = ("linear", "pad")
FONE_HEAD_TARGETS = ("digit", "feature")
FONE_NUMBERS = ("auto", "all", "answers")
SIGN_POLICIES = ("text", "feature")
OUT_OF_RANGE_POLICIES = ("text", "error")
XVAL_FORMS = ("auto", "affine", "multiplicative")
XVAL_FITS = ("standard", "absmax")  # numadapter.methods.xval.embedding.NORMALIZATION_METHODS
GCE_FORMS = ("replace", "add")
NTL_LEVELS = ("token", "number")

# The largest digit range numadapter accepts. FoNE needs 2 features per digit place and the side tensors one
# int64 per place, so 64 + 64 places are far beyond any model width worry while still catching typos (800).
MAX_INT_DIGITS = 64
MAX_FRAC_DIGITS = 64
# The largest token id / vocabulary numadapter accepts: about 16x the largest vocabularies in use (256k), so a typo
# such as num_token_id=10**7 is refused instead of growing the embedding to millions of rows.
MAX_VOCAB_SIZE = 2**22
# The widest regression MLP hidden layer accepted for `xval_head_hidden` (a 64k-wide model is far beyond any use).
MAX_HEAD_HIDDEN = 2**16


# Fields whose default changed after adapters were saved without them: the value such a saved config meant.
LEGACY_DEFAULTS = {
    "fone_head_target": "digit",
    "gce_form": "add",
    "fone_head_input": "linear",
    "fone_numbers": "all",
    "fone_context_products": False,
    "fone_digit_answers": 0.0,
    "fone_head_copies": True,
    "fone_head_in_use": True,
    "xval_context_numbers": 0,
    "xval_fit": None,
}


# Who reads a number field besides the adapter's own modules. Every list of fields derives from this table
# (`fields_with`): the NumberTokenizer's saved settings, the fields a tokenizer must share with the adapter, and the
# settings stamp of a saved adapter.
TOKENIZER = "tokenizer"  # saved with a NumberTokenizer (number_tokenizer_config.json), which applies it when encoding
MATCHED = "matched"  # the side tensors depend on it: a tokenizer must agree with the adapter
ANSWERS = "answers"  # FoNE: which numbers become [NUM]; compared when either side writes only the head's answers
BOUND_ID = "bound_id"  # a token id recorded when the config is bound to a tokenizer; compared once set
STAMPED = "stamp"  # the number modules, the [NUM] rows and the resize depend on it (`numadapter.tuner.integrity`)
FIELD_ROLES: dict[str, tuple[str, ...]] = {
    "encoding": (TOKENIZER, MATCHED, STAMPED),
    "int_digits": (TOKENIZER, MATCHED, STAMPED),
    "frac_digits": (TOKENIZER, MATCHED, STAMPED),
    "num_token": (TOKENIZER,),
    "agg_token": (TOKENIZER,),
    "aggregate": (TOKENIZER, MATCHED, STAMPED),
    "sign_policy": (TOKENIZER, MATCHED, STAMPED),
    "out_of_range": (TOKENIZER,),
    "fone_bases": (STAMPED,),
    "fone_projection": (STAMPED,),
    "fone_head_input": (STAMPED,),
    "fone_context_numbers": (TOKENIZER, ANSWERS),
    "fone_context_pointer": (TOKENIZER, ANSWERS),
    "fone_numbers": (TOKENIZER, ANSWERS),
    "fone_context_products": (TOKENIZER, ANSWERS),
    "fone_digit_answers": (TOKENIZER,),
    "fone_head_copies": (TOKENIZER,),
    "fone_head_in_use": (TOKENIZER, ANSWERS),
    "fone_head_target": (STAMPED,),
    "xval_form": (STAMPED,),
    "xval_center": (TOKENIZER, STAMPED),
    "xval_scale": (TOKENIZER, STAMPED),
    "xval_clip": (TOKENIZER,),
    "xval_head_hidden": (STAMPED,),
    "xval_digit_answers": (TOKENIZER,),
    "num_token_id": (BOUND_ID, STAMPED),
    "agg_token_id": (BOUND_ID, STAMPED),
    "digit_token_ids": (BOUND_ID, STAMPED),
    "original_vocab_size": (STAMPED,),
    "resized_vocab_size": (STAMPED,),
    "base_hidden_size": (STAMPED,),
}


def fields_with(role: str) -> tuple[str, ...]:
    """The config fields `FIELD_ROLES` gives `role` (`TOKENIZER`, `MATCHED`, `ANSWERS`, `BOUND_ID`, `STAMPED`), in
    declaration order."""
    return tuple(name for name, roles in FIELD_ROLES.items() if role in roles)


def with_legacy_defaults(saved: dict) -> dict:
    """`saved` (a config read from disk) with `LEGACY_DEFAULTS` filled in for the fields it does not have."""
    return {**{key: value for key, value in LEGACY_DEFAULTS.items() if key not in saved}, **saved}


# Marker strings offered when a `num_token` / `agg_token` value is refused (the first one that fits is named).
MARKER_CHOICES = {"num_token": ("[NUM]", "<|num|>", "<num>"), "agg_token": ("[AGG]", "<|agg|>", "<agg>")}


def marker_choice(name: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """A working value for the marker field `name` (``"num_token"`` / ``"agg_token"``) that is not in `taken`."""
    return next((choice for choice in MARKER_CHOICES[name] if choice not in taken), f"[{name.upper()}_X]")


def check_marker(name: str, value: object) -> None:
    """The string checks of a marker field (`num_token` / `agg_token`): a non-blank string that holds no number
    `find_numbers` would read (a marker "5" would be the digit token '5').

    Raises:
        ValueError: naming the field, the value and a working choice.
    """
    fix = f"set {name}={marker_choice(name)!r} (the default) or another new string without digits"
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"`{name}` must be a non-blank string (it becomes a new token), got {value!r}: {fix}.")
    found = find_numbers(value)
    if found:
        raise ValueError(
            f"`{name}`={value!r} holds the number {found[0].text!r}, which the number finder reads in every text: the "
            f"marker would be confused with the numbers it stands for; {fix}."
        )


def _choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {list(choices)}, got {value!r}.")


def _real(name: str, value: object) -> float:
    """`value` as a finite real number; `ValueError` for NaN, infinity, bools and non-numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"`{name}` must be a number, got {value!r} ({type(value).__name__}).")
    if not math.isfinite(value):
        raise ValueError(f"`{name}` must be a finite number, got {value!r}: set it to a real value.")
    return float(value)


def _positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    if _real(name, value) < 0 or (value == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"`{name}` must be {bound}, got {value!r}.")


def _integer(name: str, value: object, low: int, high: int, meaning: str = "") -> None:
    """`value` must be an int (not a bool) in ``[low, high]``; `meaning` says in the error what the field is."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        said = f" ({meaning})" if meaning else ""
        raise ValueError(f"`{name}` must be an integer in [{low}, {high}]{said}, got {value!r}.")


def _fraction(name: str, value: object, meaning: str, *, below_one: bool = False, example: str = "") -> None:
    """`value` must be a real number (not a bool) in ``[0, 1]`` (``[0, 1)`` with `below_one`); the error says what
    the field is (`meaning`) and, with `example`, a working value."""
    bad = isinstance(value, bool) or not isinstance(value, (int, float))
    if not bad:
        bad = not (0.0 <= value < 1.0 if below_one else 0.0 <= value <= 1.0)
    if bad:
        top, fix = "1)" if below_one else "1]", f": e.g. {example}" if example else ""
        raise ValueError(f"`{name}` must be a number in [0, {top} ({meaning}), got {value!r}{fix}.")


@dataclass
class NumberAdapterConfig(LoraConfig):
    """LoRA plus number settings for numadapter.

    Encoding:
        encoding (`str`, defaults to `"fone"`): how numbers reach the model. `"fone"`: one [NUM] token whose
            embedding carries Fourier features, decoded by a per-digit head (FoNE paper). `"xval"`: one [NUM]
            token whose embedding carries the (normalised) value, decoded by a regression head (xVal paper).
            `"digits"`: numbers stay ordinary digit tokens, one token per digit, optionally preceded by an [AGG]
            token (digit-aggregation paper); trained with the LM head plus NTL / the aggregate loss. Any other name
            registered with `numadapter.methods.register_method` is accepted too (the annotation is `str`, not a
            `Literal`, for that reason); an unknown one raises a `ValueError` listing the known ones.
        int_digits (`int`, defaults to 8): digit places before the decimal point (FoNE's m). Numbers needing
            more places are out of range (see `out_of_range`).
        frac_digits (`int`, defaults to 4): digit places after the decimal point (FoNE's n).
        num_token (`str`, defaults to `"[NUM]"`): the token that stands for one number: a new string without digits
            (not blank, not a token of the base vocabulary, not a special token the tokenizer already uses).
        agg_token (`str`, defaults to `"[AGG]"`): the aggregate token placed before a digit-tokenised number (the
            same rules as `num_token`, and different from it).
        aggregate (`bool`, defaults to `False`): with `encoding="digits"`, put an [AGG] token before each number
            whose embedding is the weighted digit aggregate (digit-aggregation paper, eq. 1). Eq. 1 is built for
            integers and ignores the decimal point: 12.5, 125 and 1.25 get the same [AGG] aggregate, and the
            auxiliary loss (`aggregate_loss_lambda` < 1) scores "12.5" as two numbers, "12" and "5" (see
            `numadapter.methods.aggregate.embedding`).
        sign_policy (`str`, defaults to `"text"`): `"text"`: a minus sign stays an ordinary text token before
            [NUM] and [NUM] carries |x| (exact, no extra parameters). `"feature"`: the sign belongs to the number
            ([NUM] carries x, the features get a sign component and the head predicts the sign). For xVal use
            `"feature"`: the xVal paper carries the sign in the value (the embedding is scaled by the signed x and
            the regression head predicts the signed x); with `"text"` xVal only ever sees |x| and the sign is left
            to the text token. The xVal recipe (`recipes/granite/xval_lora.yaml`) sets it.
        out_of_range (`str`, defaults to `"text"`): what happens to a number that needs more than `int_digits`
            integer places or more than `frac_digits` fraction places. `"text"`: it stays ordinary text (no [NUM]).
            `"error"`: encoding raises a `ValueError` naming the number, the limit and the setting to change.
            Numbers are never wrapped modulo 10^m nor rounded.

    FoNE (the other encodings do not use these settings: they accept any valid value and ignore it):
        fone_bases (`list[int]`, defaults to `[10]`): base periods. For base b the periods are b * 10^(i-1) for
            i = -frac_digits+1 ... int_digits, so `[10]` is the paper's 10^i; `[2, 5, 10]` is its ablation.
            With `encoding="fone"` only `[10]` is accepted: the FoNE reference scores every output digit with
            every base, but `FoNEDigitHead` has one 2-vector per place scored against base 10 only, so extra
            bases would reach the input embedding and never the head (input and output would disagree). Any
            other value raises a `ValueError` that says to set `fone_bases=[10]`. The features themselves
            (`numadapter.methods.fone.embedding.fone_features(..., bases=...)`) still take any bases.
        fone_projection (`str`, defaults to `"linear"`): `"linear"`: a learned projection from the features to
            the model width, added to the [NUM] embedding (default for pretrained models). `"pad"`: the features
            are zero-padded to the model width and added (paper, Algorithm 1).
        fone_init_scale (`float`, defaults to 1.0): the initial RMS of the projected features relative to the RMS
            of the [NUM] embedding row. Higher: numbers stand out more at first, larger initial perturbation.
        fone_head_input (`str`, defaults to `"context"`): `"linear"`: a learned projection of the hidden state
            gives one 2-vector per digit (adapters saved before this field existed load as "linear"). `"slice"`:
            the first 2 * (int_digits + frac_digits) hidden dims are
            used directly, as in the paper. `"rotation"`: two learned read-outs u and v per place, multiplied as
            complex numbers (angles add, so the Fourier feature of a + b is the product of those of a and b); v
            starts at the constant 1, so the head starts as `"linear"` (numadapter's own; see
            `numadapter.methods.fone.head`). `"context"`: the linear read-out times a signed combination of the
            exact features of the last `fone_context_numbers` numbers in the text (learned coefficients -1, 0 or
            +1 each), so sums and differences of numbers already written come out exact; needs
            fone_head_target="feature"; on T5 the numbers are the encoder's, then the decoder's up to the position
            (numadapter's own; see `numadapter.methods.fone.head`). The default because the answer's digits then
            come from the exact values of the numbers in the text, which a pretrained base does not carry intact to
            the answer position; the read-out heads must rebuild them from the hidden state and, on a pretrained
            base under an adapter, do not learn arithmetic (docs/results.md).
        fone_context_numbers (`int`, defaults to None): with fone_head_input="context", how many of the latest
            numbers at or before a position the head may combine (1 to 6: the head scores all 3^K combinations; up
            to 16 with fone_context_pointer). None: 4, or 16 with the pointer; a trainer may turn the pointer on
            only where this and fone_context_products are left at None.
        fone_numbers (`str`, defaults to `"auto"`): which numbers become [NUM] tokens. `"answers"`: every number
            stays the base's own digit tokens (the base reads the text as in pretraining), and only an answer number
            that the context head can form (a signed combination of the last `fone_context_numbers` numbers before
            it, or with fone_context_products a product or exact quotient of two) is written as [NUM]; the
            digit-written numbers are still the head's context (their exact values come from the tokenizer).
            Answers are the numbers at or after the tokenizer's `answer_start` (the completion, when the trainers
            prepare prompt-completion data); a prompt keeps its numbers in digits. Needs fone_head_input="context"
            and a causal LM. `"all"`: every in-range number of the text. `"auto"` (the default): `"answers"` on a
            causal LM with the context head, `"all"` on an encoder-decoder (T5) or with another head; the
            architecture is known once `get_peft_model` sets ``task_type`` (`numadapter.methods.fone.answer_mode`).
            `"answers"` is the causal-LM default because the head then writes only what it forms exactly (sums,
            products, powers of ten) and the LM writes every other number in digits as LoRA on digits would; with
            `"all"` every number goes through the head, which gets wrong whatever it cannot form.
        fone_context_products (`bool`, defaults to None): with fone_head_input="context", the head may also write
            the product of two of its context numbers, or the quotient of one by another where it is exact and
            fits the digit places (``a * b``, ``x * 1000``, ``x / 100``), computed exactly in integers
            (`numadapter.methods.fone.pair_ops`); in answers mode such answers become [NUM] too. None (the default)
            turns it on in answers mode and off with every number a [NUM] (`answer_mode.context_products`).
        fone_digit_answers (`float`, defaults to 0.5): in answers mode, the share of training examples whose
            answers stay in digits even where the head could form them (chosen by a hash of the text, so the same
            example always gets the same form). The LM then keeps writing numbers in digit tokens (what the base
            knew survives: with every answer a [NUM], the LM forgets how to write other numbers), and generation
            writes [NUM] wherever a number starts, the LM gives [NUM] some probability there (at least
            `numadapter.generation.loop.TAKEOVER_NUM_PROBABILITY`: a number of the kind the head was trained to
            write) and the head forms it; digits otherwise.
        fone_head_copies (`bool`, defaults to False): in answers mode, whether an answer that repeats one of the
            context numbers (a combination of one term, +1) is a [NUM] the head copies. False (the default) leaves
            copies to the LM in digit tokens (it copies digits well), so the head writes only the numbers it
            computes: a sum, a difference, a product or a quotient; in generation a [NUM] whose chosen combination
            is a copy is written in digits instead.
        fone_context_pointer (`bool`, defaults to None): with fone_head_input="context", True chooses each of the
            last `fone_context_numbers` numbers (up to 16) by its own hidden state (the key at its position) and the
            answer's, so the head reaches numbers far back among others (a ledger's opening balance after an id, a
            date and list numbers); its coefficients stay latent, trained on the total probability of the
            combinations that form each answer exactly (`numadapter.methods.fone.pointer`). False: the coefficients
            of the last K numbers come from the answer's hidden state alone, scored over all 3^K combinations.
            None: False, except that `NumberSFTTrainer` in answers mode turns it on (K = 16) where the last K
            numbers form under `fone_head_min_share` of the training answers and the pointer forms at least that
            share.
        fone_head_min_share (`float`, defaults to 0.5): in answers mode, the least share of the training answers
            that the head must form (sums, differences, products, quotients of the numbers before them; copies
            excluded) for `NumberSFTTrainer` to use it, measured on up to 2,000 training examples drawn across the
            data set (`numadapter.training.sampled.SAMPLE_ROWS`). Below it the
            trainer sets ``fone_head_in_use=False``: the adapter then trains and writes every number in the base's
            digit tokens, exactly as LoRA on digits does, so data the head cannot help with cannot be hurt by it
            (words, unit conversions, max / min, regression). Where the head forms only a minority of the
            answers, the LM trained beside it writes its own digit answers worse than LoRA on digits would, so the
            mean error can rise although the head's answers are right; hence the default of half. 0 always uses
            the head.
        fone_head_min_confidence (`float`, defaults to 0.0): in answers mode, the least confidence
            (`numadapter.methods.GeneratedNumber.confidence`: the chosen combination's probability times the fit of
            its digits) at which generation lets the head write a number; below it the number is written in digit
            tokens, as one the head does not form. 0.0 never falls back. The confidence does not reliably separate
            the head's wrong answers from its right ones (a wrong combination can score as high as right ones), so
            a threshold costs right answers too.
        fone_head_digit_check (`int`, defaults to 0): in answers mode, k > 0 lets generation write a number with the
            head only where its first digit is among the LM's k likeliest digit tokens at that step (a negative
            number is not checked); otherwise the LM writes it in digits. A wrong combination of the numbers before
            the answer is typically off by the size of the answer, so its first digit is one the LM would not
            write; the check also stops right answers where the LM's own digits are poor. 0 turns it off.
        fone_expression_check (`bool`, defaults to True): in answers mode, where the text so far (the prompt's and
            the model's own) ends in an expression and "=" (``48 + 24 =``, ``25% * $80 = $``), the number generation
            writes next is the expression's value: the head writes it where it forms it from the numbers before it
            (the combination the expression names, or a chain of its operations on them, whatever combination the
            head itself would have chosen; rounded half-up at frac_digits, a negative value with its sign; a value
            past int_digits as text, in the base's tokens); where it does not (a number of the expression not in
            its context), the LM writes the number in digits, never a head number that differs from the expression.
            After a number and an operator (``25 *``), or anywhere but after "=" once the model wrote an equation,
            the head writes a number only as a copy of one before it; the LM writes any other in digits. False
            leaves every choice to the head and the LM.
        fone_head_in_use (`bool`, defaults to None): in answers mode, whether the head writes numbers. None (not
            decided: a model never trained by `NumberSFTTrainer`) and True use it; False writes no [NUM]: the
            tokenizer keeps every answer in digits and the model's [NUM] logit is -inf (training, `generate`,
            `model.generate`, pipelines), so [NUM] is never written. `NumberSFTTrainer` decides it from
            `fone_head_min_share` when it is None and saves it with the adapter and the tokenizer.
        fone_head_target (`str`, defaults to `"feature"`): where each digit 2-vector is trained to point.
            `"feature"`: at the answer's own FoNE feature for that place, phi(y, 10^(i+1)), which is the digit plus
            the lower digits read as a fraction; it is read back lowest place first, subtracting the lower digits
            (carry-aware, like `fone_decode`). `"digit"`: at its digit's direction phi(d, 10) (the FoNE paper,
            Definition 3.7). The feature of a sum is a rotation of the operands' features, which a network
            computes smoothly, whereas the paper's target jumps at every carry (19.999 must give tens digit 1,
            not 2). Both use the same cross-entropy over the ten digits and the same parameters. The default is
            "feature" because that smooth target is learnt with less data and fewer steps than the paper's
            (docs/results.md, "Why the head target matters"). Set "digit" for the paper's head.

    xVal:
        xval_form (`str`, defaults to `"auto"`): `"multiplicative"`: e[NUM] * x (paper). `"affine"`:
            e[NUM] + x * u with a learned direction u, for pre-RMSNorm models without an additive position
            vector (Llama, T5), where the paper's form is erased by normalisation. `"auto"` picks affine for
            those and multiplicative otherwise.
        xval_fit (`str | None`, defaults to `"absmax"`): where `xval_center` and `xval_scale` are left at 0.0 and
            1.0, the trainers fit them on the training data before they tokenize
            (`numadapter.methods.xval.embedding.fit_normalization` with this method: `"absmax"` keeps 0 at 0 and
            puts the largest value read at `xval_clip`, so a conversion the head reads from the numbers before it
            stays a weight with no offset; `"standard"` centres on the mean and scales by the spread), say what they
            fitted in a warning and save it with the adapter. None: the values as set (1.0 keeps every number above 5
            text).
        xval_center (`float`, defaults to 0.0): subtracted from every value before scaling.
        xval_scale (`float`, defaults to 1.0): values are divided by this after centering; fit both from data with
            `numadapter.methods.xval.embedding.fit_normalization`.
        xval_clip (`float`, defaults to 5.0): normalised values are clipped to [-xval_clip, xval_clip] (the paper
            keeps them in [-5, 5]). Values beyond it follow `out_of_range`.
        xval_head_hidden (`int | None`, defaults to 32): hidden width of the regression MLP. `None` uses the model
            width, an H x H layer, which would make the adapter tens of percent larger than its LoRA on a 1B model;
            32 keeps it within 1%. Higher: more capacity for the value read-out, larger adapter.
        xval_context_numbers (`int`, defaults to 4): K, how many of the latest numbers before a [NUM] the
            regression head may combine: the value it writes is the MLP's read-out plus ``sum_k w_k(h) x_k``, with
            weights ``w`` read from the hidden state (`numadapter.methods.xval.head`). A conversion, a rate or a
            forecast then is a read of weights, not a magnitude the hidden state stores; where no number comes
            before, generation leaves the number to the LM's digits. 0: the paper's head, which on a pretrained base
            learns no magnitude (docs/results.md).
        xval_digit_answers (`float`, defaults to 0.0): the share of training examples whose answers (the numbers
            of a completion, an assistant's turn; every number of plain text) stay the base tokenizer's digit tokens
            (picked by a hash of the text, so an example always gets the same form). The LM then keeps writing
            numbers in digits where the head writes none (a fact with no number before it); with every answer a
            [NUM] it learns to stop after one token.

    Losses:
        number_loss_weight (`float`, defaults to 1.0): weight of the number head loss (FoNE digit CE or xVal MSE)
            added to the LM cross-entropy.
        head_loss_trains_lm (`bool`, defaults to True): whether the head loss's gradient flows into the hidden
            state it reads, so into LoRA and the trained rows. False detaches the hidden state at the head's
            targets: the head learns from the LM's states, and only the LM's cross-entropy trains the LM.
            Detaching can keep more of what the base knew, but the head's accuracy then holds less well late in
            training, so the default is True.
        ntl_weight (`float`, defaults to 0.0): weight of the Number Token Loss added to the loss (0 disables). Not
            applied to FoNE's context head (the trainers warn; docs/guide.md, "Number Token Loss on a plain trainer").
        ntl_kind (`str`, defaults to `"was"`): NTL variant: `"was"`, `"was-cdf"`, `"mse"`, `"mae"`, `"huber"`,
            `"gce"`.
        ntl_level (`str`, defaults to `"token"`): `"token"`: NTL per digit token (`ntl_kind`). `"number"`: NTL per
            whole number, the `ntloss` package's `NumberLevelLoss` (`numadapter.ntl.number_level_ntl`): each run of
            digit labels is one number, its prediction is built from the expected digit at every position, and the
            loss is the symmetric absolute percentage error |yhat - y| / (|yhat| + |y|), in [0, 1]; `ntl_kind` is
            not read. Summed over numbers and divided like the other terms. Needs `encoding="digits"` or `"xval"`
            (the LM head's digit tokens).
        gce_form (`str`, defaults to `"replace"`): how `ntl_kind="gce"` enters the loss of the LM head's digit tokens
            (`encoding="digits"` / `"xval"`). `"replace"` (NTL paper, sec. 4.1.3: GCE replaces the vanilla CE
            objective): at positions whose label is a digit token the cross-entropy is left out and
            `ntl_weight * GCE` takes its place, so `lm_loss` is the CE of the other tokens and `ntl_weight=1` is
            exactly the paper's objective. `"add"`: CE at every position plus `ntl_weight * GCE` (numadapter's
            earlier form). With `encoding="fone"` GCE is always added to the digit head's loss.
        aggregate_loss_lambda (`float`, defaults to 1.0): the digit-aggregation paper's lambda (eq. 3):
            loss = lambda * CE + (1 - lambda) * L_AUX. 1.0 disables the auxiliary loss.

    Ending an answer:
        train_eos_row (`bool`, defaults to `True`): train the end-of-sequence token's rows (input embedding and,
            when untied, LM head; ``2 * hidden`` parameters) with the [NUM] rows, starting from the base's own rows
            (a no-op until trained). LoRA alone leaves the LM head frozen: when the base never learned its EOS row
            (a checkpoint pretrained on text without EOS, or a chat end token that pretraining never used), the EOS
            that follows every answer is out of reach, and training it drives the hidden state after each [NUM]
            to the least-bad flat distribution, the same in every context (see `numadapter.tuner.token_rows`).
            False keeps the rows frozen, as plain LoRA does.
        number_lr_ratio (`float`, defaults to 1.0): the learning rate of the number modules (input module, head)
            (and of the [NUM] / [AGG] / EOS rows with ``token_rows_lr_ratio=None``), as a multiple of the trainer's
            (LoRA's) rate, in the spirit of LoRA+ (Hayou et al. 2024: parts trained from scratch want a larger rate
            than LoRA's). `NumberSFTTrainer` and
            `NumberSeq2SeqTrainer` put those parameters in their own optimizer group, which follows the same
            schedule; a trainer given its own optimizer is left as it is.
        token_rows_lr_ratio (`float`, defaults to None): the learning rate of the trained token rows ([NUM],
            [AGG], EOS) alone, as a multiple of LoRA's. None: ``number_lr_ratio``, except for a FoNE adapter whose
            head the trainer left out (``fone_head_in_use=False``), whose rows train at LoRA's rate as LoRA on
            digits trains its EOS row. (At the number modules' larger rate the EOS row moves the LM away from what
            LoRA on digits learns even where no answer is a [NUM]; at LoRA's rate with the head in use, the [NUM]
            row learns too slowly.)

    Model binding (filled by `numadapter.get_peft_model(..., tokenizer=...)`; set them yourself only when calling
    `peft.get_peft_model` directly; saved with the adapter so loading re-applies the same resize):
        num_token_id (`int | None`): token id of ``num_token`` (needed with ``encoding="fone"`` / ``"xval"``).
        agg_token_id (`int | None`): token id of ``agg_token`` (needed with ``encoding="digits"``, ``aggregate=True``).
        digit_token_ids (`list[int] | None`): ids of the single-character tokens "0" ... "9" (needed for
            ``aggregate``, ``ntl_weight > 0`` and ``aggregate_loss_lambda < 1``; otherwise used to initialise the
            [NUM] row as the mean of the digit embeddings).
        original_vocab_size (`int | None`): embedding rows of the base model before numadapter (set by the tuner).
        resized_vocab_size (`int | None`): embedding rows after adding the number tokens (``>= original``; the
            embedding is never shrunk; default: ``max(original, largest number-token id + 1)``).
        base_hidden_size (`int | None`): embedding width of the base model (set by the tuner; checked on load).
        eos_token_id (`int | None`): the tokenizer's EOS id, whose rows `train_eos_row` trains (None: none).
    """

    # -- encoding ------------------------------------------------------------------------------------------------
    encoding: str = field(  # not a Literal: methods registered from outside are encodings too
        default="fone",
        metadata={"help": "How numbers reach the model: 'fone', 'xval', 'digits' or a registered method."},
    )
    int_digits: int = field(default=8, metadata={"help": "Digit places before the decimal point (FoNE's m)."})
    frac_digits: int = field(default=4, metadata={"help": "Digit places after the decimal point (FoNE's n)."})
    num_token: str = field(default="[NUM]", metadata={"help": "The token that stands for one number."})
    agg_token: str = field(default="[AGG]", metadata={"help": "The aggregate token before a digit-tokenised number."})
    aggregate: bool = field(
        default=False, metadata={"help": "With encoding='digits': put an [AGG] token before each number."}
    )
    sign_policy: Literal["text", "feature"] = field(
        default="text",
        metadata={
            "help": "'text': '-' stays a text token; 'feature': the sign is part of the number.",
            "choices": list(SIGN_POLICIES),
        },
    )
    out_of_range: Literal["text", "error"] = field(
        default="text",
        metadata={
            "help": "Numbers beyond int_digits/frac_digits: keep as text, or raise.",
            "choices": list(OUT_OF_RANGE_POLICIES),
        },
    )
    # -- FoNE ----------------------------------------------------------------------------------------------------
    fone_bases: list[int] = field(
        default_factory=lambda: [10],
        metadata={"help": "FoNE base periods; only [10] (the paper's 10^i) with the FoNE digit head."},
    )
    fone_projection: Literal["linear", "pad"] = field(
        default="linear",
        metadata={
            "help": "Features to model width: learned projection or zero-padding.",
            "choices": list(FONE_PROJECTIONS),
        },
    )
    fone_init_scale: float = field(
        default=1.0, metadata={"help": "Initial RMS of projected features relative to the [NUM] row."}
    )
    fone_head_input: str = field(  # not a Literal: head modes registered from outside are modes too
        default="context",
        metadata={
            "help": "Digit 2-vectors from a learned projection, the first hidden dims (paper), a product of two "
            "read-outs, a read-out times a signed combination of the numbers before (context), or a registered mode.",
        },
    )
    fone_context_numbers: int | None = field(
        default=None,
        metadata={"help": "fone_head_input='context': the latest numbers the head may combine (None: 4, 16 pointer)."},
    )
    fone_context_pointer: bool | None = field(
        default=None,
        metadata={
            "help": "fone_head_input='context': choose each of the last fone_context_numbers (up to 16) numbers by "
            "its own hidden state (None: NumberSFTTrainer decides in answers mode)."
        },
    )
    fone_numbers: Literal["auto", "all", "answers"] = field(
        default="auto",
        metadata={
            "help": "Which numbers become [NUM]: only the answers the context head can form, every other number "
            "staying digit tokens ('answers'), every in-range number ('all'), or 'auto': 'answers' on a causal LM "
            "with the context head, 'all' on an encoder-decoder or another head.",
            "choices": list(FONE_NUMBERS),
        },
    )
    fone_context_products: bool | None = field(
        default=None,
        metadata={
            "help": "fone_head_input='context': also the product / exact quotient of two context numbers (None: on "
            "in answers mode)."
        },
    )
    fone_digit_answers: float = field(
        default=0.5,
        metadata={"help": "fone_numbers='answers': share of training examples whose answers stay in digits."},
    )
    fone_head_copies: bool = field(
        default=False,
        metadata={"help": "fone_numbers='answers': an answer that repeats a context number is a [NUM] (or digits)."},
    )
    fone_head_min_share: float = field(
        default=0.5,
        metadata={
            "help": "fone_numbers='answers': the least share of training answers the head must form to be used."
        },
    )
    fone_head_min_confidence: float = field(
        default=0.0,
        metadata={
            "help": "fone_numbers='answers': in generation, a [NUM] the head writes with a lower confidence is "
            "written in digits instead."
        },
    )
    fone_head_digit_check: int = field(
        default=0,
        metadata={
            "help": "fone_numbers='answers': in generation, the head writes a number only if its first digit is among "
            "the LM's this many likeliest digits there (0: no check)."
        },
    )
    fone_expression_check: bool = field(
        default=True,
        metadata={
            "help": "fone_numbers='answers': in generation, the number after a written 'expression =' is the "
            "expression's value, through the head where it forms it, else in the LM's digits; an operand, or any "
            "number not after '=' once the model wrote an equation, is the head's only as a copy."
        },
    )
    fone_head_in_use: bool | None = field(
        default=None,
        metadata={"help": "fone_numbers='answers': whether the head writes numbers (set by NumberSFTTrainer)."},
    )
    fone_head_target: Literal["digit", "feature"] = field(
        default="feature",
        metadata={
            "help": "Digit 2-vectors point at the digit (paper) or at the answer's FoNE feature (carry-aware).",
            "choices": list(FONE_HEAD_TARGETS),
        },
    )
    # -- xVal ----------------------------------------------------------------------------------------------------
    xval_form: Literal["auto", "affine", "multiplicative"] = field(
        default="auto",
        metadata={
            "help": "e*x (paper) or e + x*u (RMSNorm models); auto picks by architecture.",
            "choices": list(XVAL_FORMS),
        },
    )
    xval_fit: Literal["standard", "absmax"] | None = field(
        default="absmax",
        metadata={
            "help": "Fit xval_center/xval_scale on the training data when both are left at 0 and 1 (None: never).",
            "choices": [*XVAL_FITS, None],
        },
    )
    xval_center: float = field(default=0.0, metadata={"help": "Subtracted from values before scaling."})
    xval_scale: float = field(default=1.0, metadata={"help": "Values are divided by this after centering."})
    xval_clip: float = field(default=5.0, metadata={"help": "Normalised values must lie in [-clip, clip]."})
    xval_head_hidden: int | None = field(
        default=32, metadata={"help": "Hidden width of the regression MLP (None: model width, a much larger head)."}
    )
    xval_context_numbers: int = field(
        default=4,
        metadata={"help": "Latest numbers the xVal head combines with weights read from the hidden state (0: off)."},
    )
    xval_digit_answers: float = field(
        default=0.0,
        metadata={"help": "Share of training examples whose answers stay in digits (xVal)."},
    )
    # -- losses --------------------------------------------------------------------------------------------------
    number_loss_weight: float = field(default=1.0, metadata={"help": "Weight of the number head loss."})
    head_loss_trains_lm: bool = field(
        default=True,
        metadata={"help": "Let the head loss's gradient reach the hidden state (LoRA, the rows)."},
    )
    ntl_weight: float = field(default=0.0, metadata={"help": "Weight of the Number Token Loss (0 disables)."})
    ntl_kind: str = field(default="was", metadata={"help": "NTL variant.", "choices": list(NTL_KINDS)})
    ntl_level: Literal["token", "number"] = field(
        default="token",
        metadata={
            "help": "NTL per digit token or per whole number (ntloss NumberLevelLoss).",
            "choices": list(NTL_LEVELS),
        },
    )
    gce_form: Literal["replace", "add"] = field(
        default="replace",
        metadata={
            "help": "ntl_kind='gce': replace CE at digit labels (paper) or add to it.",
            "choices": list(GCE_FORMS),
        },
    )
    aggregate_loss_lambda: float = field(
        default=1.0, metadata={"help": "lambda of eq. 3: lambda*CE + (1-lambda)*L_AUX; 1.0 disables L_AUX."}
    )
    train_eos_row: bool = field(
        default=True, metadata={"help": "Train the EOS token's embedding and LM-head rows with the [NUM] rows."}
    )
    # -- optimisation (read by the numadapter trainers) -----------------------------------------------------------
    number_lr_ratio: float = field(
        default=1.0,
        metadata={"help": "Learning rate of the number modules, as a multiple of LoRA's."},
    )
    token_rows_lr_ratio: float | None = field(
        default=None,
        metadata={"help": "Rate of the [NUM]/[AGG]/EOS rows, as a multiple of LoRA's (None: number_lr_ratio)."},
    )
    # -- model binding (filled by numadapter.get_peft_model / the tuner; saved with the adapter) -----------------
    num_token_id: int | None = field(default=None, metadata={"help": "Token id of num_token (fone/xval)."})
    agg_token_id: int | None = field(default=None, metadata={"help": "Token id of agg_token (digits+aggregate)."})
    digit_token_ids: list[int] | None = field(default=None, metadata={"help": "Token ids of '0' ... '9'."})
    original_vocab_size: int | None = field(default=None, metadata={"help": "Base embedding rows (set by tuner)."})
    resized_vocab_size: int | None = field(default=None, metadata={"help": "Embedding rows after adding tokens."})
    base_hidden_size: int | None = field(default=None, metadata={"help": "Base embedding width (set by tuner)."})
    eos_token_id: int | None = field(default=None, metadata={"help": "The tokenizer's EOS id (train_eos_row)."})

    @classmethod
    def check_kwargs(cls, **kwargs):
        """PEFT's hook on a config read from ``adapter_config.json``.

        A field saved before it existed keeps the meaning it had then (`LEGACY_DEFAULTS`: an adapter saved before
        ``fone_head_target`` existed was trained with the paper's head).
        """
        return with_legacy_defaults(super().check_kwargs(**kwargs))

    def validate_model_binding(self) -> None:
        """Checks the token ids and sizes; raises `ValueError` naming the field, the value and the fix."""
        for name in (
            "num_token_id",
            "agg_token_id",
            "original_vocab_size",
            "resized_vocab_size",
            "base_hidden_size",
            "eos_token_id",
        ):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ValueError(f"`{name}` must be a non-negative integer or None, got {value!r}.")
        for name in ("num_token_id", "agg_token_id", "original_vocab_size", "resized_vocab_size"):
            value = getattr(self, name)
            if value is not None and value > MAX_VOCAB_SIZE:
                raise ValueError(
                    f"`{name}` is {value}, beyond the largest vocabulary numadapter accepts ({MAX_VOCAB_SIZE}): "
                    "take the ids from the tokenizer (numadapter.get_peft_model(model, config, tokenizer=tokenizer) "
                    "sets them)."
                )
        ids = self.digit_token_ids
        if ids is not None and (
            len(ids) != 10
            or len(set(ids)) != 10
            or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i <= MAX_VOCAB_SIZE for i in ids)
        ):
            raise ValueError(f"`digit_token_ids` must be 10 distinct token ids (for '0' ... '9'), got {ids!r}.")
        if None not in (self.original_vocab_size, self.resized_vocab_size) and (
            self.resized_vocab_size < self.original_vocab_size
        ):
            raise ValueError(
                f"`resized_vocab_size` ({self.resized_vocab_size}) must be >= `original_vocab_size` "
                f"({self.original_vocab_size}): numadapter never shrinks an embedding."
            )

    def _check_context_numbers(self) -> None:
        """``fone_context_numbers`` in range (up to 6 scored together, up to 16 with the pointer) and
        ``fone_context_pointer`` only where the context head is."""
        pointer = self.fone_context_pointer
        if pointer not in (None, True, False):
            raise ValueError(
                f"`fone_context_pointer` must be True, False or None (decided in training), got {pointer!r}."
            )
        most = POINTER_NUMBERS if pointer else 6
        if self.fone_context_numbers is not None and (
            not isinstance(self.fone_context_numbers, int)
            or isinstance(self.fone_context_numbers, bool)
            or not (1 <= self.fone_context_numbers <= most)
        ):
            how = (
                "each chosen by its own hidden state, fone_context_pointer=True"
                if pointer
                else "it scores all 3^K sign combinations; up to 16 with fone_context_pointer=True"
            )
            raise ValueError(
                f"`fone_context_numbers` must be an integer from 1 to {most} (the latest numbers the context head may "
                f"combine; {how}), got {self.fone_context_numbers!r}: e.g. 4, or None for the default."
            )
        if pointer and (self.encoding != "fone" or self.fone_head_input != "context"):
            raise ValueError(
                f"fone_context_pointer=True chooses the numbers FoNE's context head combines, but encoding="
                f"{self.encoding!r}, fone_head_input={self.fone_head_input!r}: set encoding='fone', "
                "fone_head_input='context', or leave fone_context_pointer at None."
            )
        if pointer and self.fone_context_products:
            raise ValueError(
                "fone_context_pointer=True combines the numbers by signed sums only, but fone_context_products=True "
                "asks for products of two of them: set one of them to False (or fone_context_products=None)."
            )

    def __post_init__(self) -> None:
        super().__post_init__()
        self.peft_type = config_peft_type()
        self.validate_number_settings()
        self.validate_model_binding()

    def validate_number_settings(self) -> None:
        """Checks every number field; raises `ValueError` naming the field, the value and the fix."""
        if not isinstance(self.encoding, str) or self.encoding not in known_methods():
            raise ValueError(unknown_encoding_message(self.encoding))
        _choice("sign_policy", self.sign_policy, SIGN_POLICIES)
        _choice("out_of_range", self.out_of_range, OUT_OF_RANGE_POLICIES)
        _choice("fone_projection", self.fone_projection, FONE_PROJECTIONS)
        if not isinstance(self.fone_head_input, str) or self.fone_head_input not in known_head_modes():
            raise ValueError(unknown_head_mode_message(self.fone_head_input))
        _choice("fone_head_target", self.fone_head_target, FONE_HEAD_TARGETS)
        _choice("fone_numbers", self.fone_numbers, FONE_NUMBERS)
        if self.fone_context_products is not None and not isinstance(self.fone_context_products, bool):
            raise ValueError(
                f"`fone_context_products` must be True, False or None (on in answers mode), got "
                f"{self.fone_context_products!r}."
            )
        if not isinstance(self.fone_head_copies, bool):
            raise ValueError(f"`fone_head_copies` must be True or False, got {self.fone_head_copies!r}.")
        if not isinstance(self.fone_expression_check, bool):
            raise ValueError(f"`fone_expression_check` must be True or False, got {self.fone_expression_check!r}.")
        if not isinstance(self.head_loss_trains_lm, bool):
            raise ValueError(f"`head_loss_trains_lm` must be True or False, got {self.head_loss_trains_lm!r}.")
        if self.fone_head_in_use is not None and not isinstance(self.fone_head_in_use, bool):
            raise ValueError(
                f"`fone_head_in_use` must be True, False or None (decided by NumberSFTTrainer), got "
                f"{self.fone_head_in_use!r}."
            )
        _fraction("fone_head_min_share", self.fone_head_min_share,
                  "the least share of training answers the head must form to be used; 0 always uses it")  # fmt: skip
        _fraction("fone_head_min_confidence", self.fone_head_min_confidence,
                  "the head's least confidence to write a number; 0 writes every number it forms")  # fmt: skip
        _integer("fone_head_digit_check", self.fone_head_digit_check, 0, 10,
                 "how many of the LM's likeliest digits the first digit of a number the head writes must be among; "
                 "0 checks nothing")  # fmt: skip
        _fraction("fone_digit_answers", self.fone_digit_answers,
                  "the share of training examples whose answers stay in digits", below_one=True,
                  example="0.5")  # fmt: skip
        _fraction("xval_digit_answers", self.xval_digit_answers,
                  "the share of training examples whose answers stay in digits", below_one=True,
                  example="0.5")  # fmt: skip
        _choice("xval_form", self.xval_form, XVAL_FORMS)
        _choice("ntl_kind", self.ntl_kind, NTL_KINDS)
        _choice("gce_form", self.gce_form, GCE_FORMS)
        _choice("ntl_level", self.ntl_level, NTL_LEVELS)
        _integer("int_digits", self.int_digits, 0, MAX_INT_DIGITS)
        _integer("frac_digits", self.frac_digits, 0, MAX_FRAC_DIGITS)
        if self.int_digits + self.frac_digits == 0:
            raise ValueError("`int_digits` + `frac_digits` must be at least 1, got 0 + 0: set `int_digits`.")
        if not self.fone_bases or any(not isinstance(b, int) or b < 2 for b in self.fone_bases):
            raise ValueError(f"`fone_bases` must be a non-empty list of integers >= 2, got {self.fone_bases!r}.")
        if not isinstance(self.train_eos_row, bool):
            raise ValueError(f"`train_eos_row` must be True or False, got {self.train_eos_row!r}.")
        check_marker("num_token", self.num_token)
        check_marker("agg_token", self.agg_token)
        if self.num_token == self.agg_token:
            raise ValueError(
                f"`num_token` and `agg_token` must differ, both are {self.num_token!r}: set "
                f"agg_token={marker_choice('agg_token', {self.num_token})!r}."
            )
        _positive("fone_init_scale", self.fone_init_scale)
        self._check_context_numbers()
        _positive("number_lr_ratio", self.number_lr_ratio)
        if self.token_rows_lr_ratio is not None:
            _positive("token_rows_lr_ratio", self.token_rows_lr_ratio)
        _positive("xval_scale", self.xval_scale)
        _positive("xval_clip", self.xval_clip)
        _positive("number_loss_weight", self.number_loss_weight, allow_zero=True)
        _positive("ntl_weight", self.ntl_weight, allow_zero=True)
        _real("xval_center", self.xval_center)
        if self.xval_fit is not None:
            _choice("xval_fit", self.xval_fit, XVAL_FITS)
        if self.xval_head_hidden is not None:
            _integer("xval_head_hidden", self.xval_head_hidden, 1, MAX_HEAD_HIDDEN)
        _integer("xval_context_numbers", self.xval_context_numbers, 0, POINTER_NUMBERS,
                 "the latest numbers the xVal head combines; 0 reads the hidden state only")  # fmt: skip
        if not 0.0 <= _real("aggregate_loss_lambda", self.aggregate_loss_lambda) <= 1.0:
            raise ValueError(
                f"`aggregate_loss_lambda` must be in [0, 1] (1.0 disables the aggregate loss), "
                f"got {self.aggregate_loss_lambda!r}."
            )
        if self.aggregate and self.encoding != "digits":
            raise ValueError(
                f"`aggregate=True` needs `encoding='digits'` (the [AGG] token precedes digit tokens), "
                f"got encoding={self.encoding!r}: set encoding='digits' or aggregate=False."
            )
        if self.aggregate_loss_lambda < 1.0 and self.encoding != "digits":
            raise ValueError(
                f"`aggregate_loss_lambda` < 1 enables the digit-aggregation loss, which needs `encoding='digits'`, "
                f"got encoding={self.encoding!r}: set aggregate_loss_lambda=1.0 or encoding='digits'."
            )
        # settings that only the chosen method reads together (FoNE's head, target, bases); the values of every
        # field are checked above, also on encodings that do not use them
        get_method(self.encoding).validate(self)

    @property
    def num_places(self) -> int:
        """Digit places per number: int_digits + frac_digits (the width of the `num_digits` side tensor)."""
        return self.int_digits + self.frac_digits
