"""The number-method interface: what the tokenizer, the tuner, the loss and generation ask of an encoding.

An encoding (``NumberAdapterConfig(encoding=...)``) names a `NumberMethod` in `numadapter.methods.registry`. Every
place that used to compare the encoding string asks the method instead, so a new encoding is one folder under
``numadapter/methods/`` (or any outside package) plus a `register_method` call. See docs/DESIGN.md, "Number methods".

Shapes: B batch, T tokens, P = ``int_digits + frac_digits`` places, H the model width, N the number positions being
embedded or predicted, V the vocabulary.

What each caller reads:

- Tokenization / data (`numadapter.tokenization`, `numadapter.data`, `numadapter.data.collator`): `replaces_numbers`
  (one marker token per number, or digit tokens), `marker_field` (which config token is the marker),
  `accepts` (a range check beyond the digit places), `mostly_text_warning` (when that check left most numbers of a
  batch as text).
- The tokenizer <-> config check (`numadapter.tokenization.matching`): `matched_fields` (config fields a tokenizer
  must share with the adapter); the tuner's input checks (`numadapter.tuner.inputs`): `fields` (the number tensors
  the modules read besides ``mask``).
- The tuner (`numadapter.tuner`): `check_bound`, `build_modules`, `init_from_row`, `needs_digit_embeddings`,
  `lm_ntl`, `head_outputs`, `report`, `loss_terms`, `number_count_ids`.
- Generation (`numadapter.generation`): `suppressed_ids`, `predict`, `read_numbers`, `feedback_error`.

The input module built by `build_modules` is called by the embedding hook on the N number rows only, as
``embedding(embeds [1, N, H], num_mask [1, N], num_digits [1, N, P] | None, num_sign [1, N] | None,
num_values [1, N] | None)`` (plus ``digit_embeddings=[10, H]`` when `needs_digit_embeddings`), and returns
``[1, N, H]`` in ``embeds.dtype``. The head is any module; only this method's own `head_outputs`, `loss_terms` and
`predict` call it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from torch import nn

    from numadapter.numbers import ExactNumber
    from numadapter.schema import NumberInputs, NumberTargets


class NumberSettings(Protocol):
    """The number settings a method reads: `NumberAdapterConfig` provides them (and so does any object with these
    attributes), so that methods, their modules and outside methods need neither the config module nor PEFT.

    The fields mean what `NumberAdapterConfig` documents; a method reads only the ones of its encoding.
    """

    encoding: str
    int_digits: int
    frac_digits: int
    sign_policy: str
    num_token: str
    num_token_id: int | None
    agg_token: str
    agg_token_id: int | None
    digit_token_ids: list[int] | None
    aggregate: bool
    aggregate_loss_lambda: float
    number_loss_weight: float
    ntl_weight: float
    ntl_kind: str
    fone_bases: list[int]
    fone_projection: str
    fone_init_scale: float
    fone_head_input: str
    fone_context_numbers: int | None
    fone_head_target: str
    xval_center: float
    xval_scale: float
    xval_clip: float
    xval_form: str
    xval_head_hidden: int | None


# -- the types the interface passes ------------------------------------------------------------------------------
@dataclass
class Prediction:
    """The number head's prediction at the last position of every row (device tensors, not synchronised).

    Attributes:
        digits: FoNE int64 ``[B, P]`` place digits of ``|x|``, most significant first; None for xVal.
        sign: int64 ``[B]`` of +1 / -1 (+1 with ``sign_policy="text"``).
        values: float64 ``[B]``: xVal's denormalised value; FoNE's value computed from the digits (metrics only).
        confidence: float32 ``[B]`` (see `HeadReading`), or None.
        combination: int64 ``[B, K]`` the context head's coefficients, or None.
        combined: int64 ``[B, 2 + P]``, the exact value of the context head's combination (see `HeadReading`), or
            None.
    """

    digits: torch.Tensor | None
    sign: torch.Tensor
    values: torch.Tensor
    confidence: torch.Tensor | None = None
    combination: torch.Tensor | None = None
    combined: torch.Tensor | None = None


@dataclass(frozen=True)
class GeneratedNumber:
    """One number the model generated.

    Attributes:
        value: `ExactNumber` (FoNE) or float (xVal).
        text: how it appears in the generated text.
        feedable: whether it can be fed back as the next [NUM] input (False: an xVal value out of range, or a FoNE
            context head's combination beyond the digit places).
        reason: with ``feedable=False``, why and the fix when the method says more than
            `NumberMethod.feedback_error` can from the value alone; with ``feedable=True``, a warning about the
            number (generation shows the first of each call); None otherwise.
        confidence: how well the head's output fits the number it wrote, in [0, 1], or None where the head gives
            none (xVal, FoNE's ``fone_head_target="digit"``): see `HeadReading`.
        combination: the context head's coefficients (-1, 0, +1) of the numbers before it, most recent first, or
            None for the other heads; all 0 where it wrote a product or quotient of two of them
            (``fone_context_products``), which no coefficients express.
        below_zero: the context head combined the numbers into a negative magnitude, which a [NUM]'s digits hold
            only modulo ``10^int_digits`` (``sign_policy="text"``): `value` is that negative number (not
            feedable); in answers mode the row writes the number in digit tokens instead.
    """

    value: ExactNumber | float
    text: str
    feedable: bool = True
    reason: str | None = None
    confidence: float | None = None
    combination: tuple[int, ...] | None = None
    below_zero: bool = False


@dataclass
class NumberPlan:
    """Everything the forward needs besides the model call.

    Attributes:
        sides: side name (``"input"`` / ``"encoder"`` / ``"decoder"``) -> validated `NumberInputs`.
        targets: number-head targets aligned with the hidden states (None without labels or head).
        target_index: ``(batch_idx, time_idx)`` of the target positions (host-known count), or None.
        lm_labels: labels aligned with the logits (causal: shifted left), or None.
        decoder_input_ids: T5 decoder inputs derived from the labels (None when given or causal).
    """

    sides: dict[str, NumberInputs]
    targets: NumberTargets | None = None
    target_index: tuple[torch.Tensor, torch.Tensor] | None = None
    lm_labels: torch.Tensor | None = None
    decoder_input_ids: torch.Tensor | None = None


@dataclass
class LossInputs:
    """What `NumberMethod.loss_terms` gets from the tuner for one forward call.

    Attributes:
        config: the adapter config.
        head: the adapter's number head, or None.
        logits: ``[B, T, V]`` LM logits aligned with ``plan.lm_labels``.
        plan: the call's `NumberPlan` (``lm_labels`` ``[B, T]``, ``targets`` `NumberTargets`, ``target_index``
            ``((N,), (N,))``).
        outputs: the head's outputs at the N target rows (`head_outputs` of ``hidden[target_index]``), or None.
        denom: N_tokens, the float32 normaliser of every per-token term (see `numadapter.tuner.loss`).
        numbers: M, the count of numbers of the accumulated batch (`ItemCounts.numbers`), or None.
        digit_embeddings: ``[10, H]`` raw digit-token embeddings when `NumberMethod.needs_digit_embeddings` asked
            for them, else None.
    """

    config: NumberSettings
    head: nn.Module | None
    logits: torch.Tensor
    plan: NumberPlan
    outputs: Any
    denom: torch.Tensor
    numbers: torch.Tensor | int | None = None
    digit_embeddings: torch.Tensor | None = None


@dataclass
class HeadReading:
    """The number head's reading at the rows that emitted the marker (device tensors, not synchronised).

    Attributes:
        digits: int64 ``[N, P]`` place digits of ``|x|``, most significant first, or None (a value-only head).
        sign: int64 ``[N]`` of +1 / -1.
        values: float64 ``[N]`` signed values (for a digit head, computed from the digits; metrics only).
        confidence: float32 ``[N]`` in [0, 1], how well the head's output fits the number it reads (FoNE's feature
            target: `FoNEDigitHead.confidence`), or None.
        combination: int64 ``[N, K]`` the context head's coefficients (-1, 0, +1), most recent number first, or None.
        combined: int64 ``[N, 2 + P]`` the exact value of the combination of the numbers before it that the head chose
            (`numadapter.methods.context.combine_exactly`), or None (a head that does not combine them).
    """

    digits: torch.Tensor | None
    sign: torch.Tensor
    values: torch.Tensor
    confidence: torch.Tensor | None = None
    combination: torch.Tensor | None = None
    combined: torch.Tensor | None = None


def graph_zero(outputs: Any) -> torch.Tensor:
    """A 0-dim zero that keeps every tensor of the head's `outputs` (a tensor, or a tuple of tensors / None) in the
    graph."""
    items = outputs if isinstance(outputs, tuple) else (outputs,)
    return sum(item.sum() * 0.0 for item in items if item is not None and hasattr(item, "sum"))


class NumberMethod(ABC):
    """One number encoding: how numbers are tokenized, embedded, predicted, scored and read back.

    Subclass it, implement `fields` and `build_modules` (and the head methods if the method has a head), and register
    an instance with `numadapter.methods.register_method`. The defaults describe a method whose numbers become one
    [NUM] token and whose modules need nothing beyond the config's own checks.
    """

    #: the encoding name (``NumberAdapterConfig.encoding``); set by `register_method` when empty.
    name: str = ""

    # -- tokenization and the side tensors ----------------------------------------------------------------------
    def replaces_numbers(self, config: NumberSettings) -> bool:
        """True: each number's text becomes one marker token ([NUM]) and the head writes it back in generation.
        False: numbers stay ordinary digit tokens (the LM head writes them)."""
        return True

    def marker_field(self, config: NumberSettings) -> str | None:
        """The config field naming the token that carries the side tensors (``"num_token"`` / ``"agg_token"``), or
        None when no token does (then ``num_mask`` must be all zeros)."""
        return "num_token" if self.replaces_numbers(config) else None

    def marker_token(self, config: NumberSettings) -> str:
        """The marker's text, for messages (``config.num_token`` or ``config.agg_token``)."""
        return getattr(config, self.marker_field(config) or "agg_token")

    def marker_token_id(self, config: NumberSettings) -> int | None:
        """The id of the marker token as bound in the config, or None."""
        field = self.marker_field(config)
        return None if field is None else getattr(config, field + "_id")

    @abstractmethod
    def fields(self, config: NumberSettings) -> tuple[str, ...]:
        """The side tensors (short names of `numadapter.schema.FIELDS`: ``"digits"``, ``"sign"``, ``"values"``) the
        modules read besides ``mask``."""

    def matched_fields(self, config: NumberSettings) -> tuple[str, ...]:
        """Config fields beyond `numadapter.tokenization.matching.MATCHED_FIELDS` on which a tokenizer must agree with
        the adapter (the tokenizer applies them when it encodes)."""
        return ()

    def accepts(self, value: float, config: NumberSettings) -> bool:
        """Whether a number that fits the digit places can be encoded (value: the float it will carry)."""
        return True

    def range_error(self, value: float, config: NumberSettings) -> str:
        """The reason `accepts` refused `value` and the fix (the tokenizer prefixes the number's location)."""
        return f"is refused by encoding={config.encoding!r}"

    def mostly_text_warning(self, config: NumberSettings, refused: Sequence[str], total: int) -> str | None:
        """The warning when `accepts` left most numbers of a batch as text (`refused`: their surface forms, of `total`
        numbers that fit the digit places), shown once per tokenizer; None (default): no warning."""
        del config, refused, total
        return None

    def validate(self, config: NumberSettings) -> None:
        """Extra checks of the config's number settings (`NumberAdapterConfig.validate_number_settings` calls it);
        default: none."""
        del config

    # -- modules --------------------------------------------------------------------------------------------------
    def check_bound(self, config: NumberSettings, fix: str) -> None:
        """Raises `ValueError` when the config lacks a token id the modules need (`fix` says how to get it)."""
        field = self.marker_field(config)
        if field is not None and getattr(config, field + "_id") is None:
            raise ValueError(
                f"encoding={config.encoding!r} needs `{field}_id` (the {getattr(config, field)} id): {fix}."
            )

    @abstractmethod
    def build_modules(
        self, config: NumberSettings, hidden_size: int, model_config: Any
    ) -> tuple[nn.Module | None, nn.Module | None]:
        """``(input module, head)`` for a model of width `hidden_size` (either may be None); float32."""

    def init_from_row(self, embedding: nn.Module | None, head: nn.Module | None, rms: float) -> None:
        """Scales fresh modules to the RMS of the initial marker row (> 0); default: nothing."""
        del embedding, head, rms

    def needs_digit_embeddings(self, config: NumberSettings) -> bool:
        """Whether the input module takes ``digit_embeddings`` ``[10, H]`` (the raw digit-token rows)."""
        return False

    def training_warnings(self, config: NumberSettings) -> list[str]:
        """Warnings a trainer gives about settings that train nothing with this method; default: none."""
        del config
        return []

    def fits_normalisation(self, config: NumberSettings) -> bool:
        """Whether a trainer fits the value normalisation of the config (``xval_center`` / ``xval_scale``) on the
        training numbers before training (`numadapter.training.xval_fit`); default: False."""
        del config
        return False

    # -- loss -----------------------------------------------------------------------------------------------------
    def lm_ntl(self, config: NumberSettings) -> bool:
        """Whether ``ntl_weight > 0`` applies the Number Token Loss to the LM head's digit tokens."""
        return config.ntl_weight > 0

    def loss_needs_digit_embeddings(self, config: NumberSettings) -> bool:
        """Whether `loss_terms` reads `LossInputs.digit_embeddings`."""
        return False

    def number_count_ids(self, config: NumberSettings) -> list[int] | None:
        """Digit token ids whose runs in the labels the trainer counts as M (`ItemCounts.numbers`), or None."""
        return None

    def context_size(self, config: NumberSettings) -> int:
        """K, how many of the latest numbers at or before each position the head reads besides the hidden state
        (`numadapter.methods.context`); 0 (default): the head reads the hidden state only."""
        del config
        return 0

    def writes_without_context(self, config: NumberSettings) -> bool:
        """Whether the head writes a [NUM] that has no number before it (True, default). False: generation leaves
        such a number to the LM's digit tokens, for a head that reads its value off the numbers before it."""
        del config
        return True

    def digit_answer_share(self, config: NumberSettings) -> float:
        """The share of training examples whose answers stay the base tokenizer's digit tokens though the encoding
        would write them as markers (0, default: none). With every answer a marker the LM forgets how to write a
        number in digits, and a number the head cannot write (a fact with no number before it) is lost."""
        del config
        return 0.0

    def coverage_context(self, config: NumberSettings) -> int:
        """K for the trainer's coverage check (`numadapter.training.head_choice.check_head_coverage`): how many of
        the latest numbers the head must form each training answer from, for a warning when it forms few; 0
        (default): no check."""
        del config
        return 0

    def head_outputs(self, head: nn.Module, hidden: torch.Tensor, context: Any = None) -> Any:
        """The head's outputs on hidden states ``[..., H]`` (whatever `report`, `loss_terms` and `predict` read);
        `context`: the numbers before each position (``[..., K, ...]``) when `context_size` > 0, else None."""
        return head(hidden)

    def report(self, head: nn.Module, outputs: Any) -> dict[str, torch.Tensor | None]:
        """Fields of the model output from the per-position head outputs (``number_logits``,
        ``number_sign_logits``, ``number_values``; see `NumberCausalLMOutput`)."""
        return {}

    def head_loss(self, inputs: LossInputs) -> torch.Tensor:
        """The head loss at the N target rows: the sum over numbers divided by ``inputs.denom`` (0-dim)."""
        raise NotImplementedError(f"encoding={inputs.config.encoding!r} has a head but no head_loss.")

    def head_ntl(self, inputs: LossInputs) -> torch.Tensor | None:
        """The NTL on the head's own distributions (sum / denom), or None when the head has none."""
        return None

    def loss_terms(
        self, inputs: LossInputs, lm_loss: torch.Tensor, ntl: torch.Tensor | None
    ) -> dict[str, torch.Tensor | None]:
        """The loss and its components (keys ``loss``, ``number_loss``, ``ntl_loss``, ``aggregate_loss``).

        Default: ``lm_loss + number_loss_weight * head_loss (+ ntl_weight * NTL)``. `lm_loss` is the CE already
        divided by ``inputs.denom``; `ntl` the LM-head NTL when `lm_ntl`, else None.
        """
        import torch

        number = torch.zeros((), device=lm_loss.device)
        if inputs.head is not None and inputs.outputs is not None:
            if inputs.plan.targets is None or inputs.plan.target_index is None:
                number = graph_zero(inputs.outputs)  # no number labels: a zero that keeps the head in the graph
            else:
                number = self.head_loss(inputs)
                if inputs.config.ntl_weight > 0 and ntl is None:
                    ntl = self.head_ntl(inputs)
        loss = lm_loss + inputs.config.number_loss_weight * number
        if ntl is not None:
            loss = loss + inputs.config.ntl_weight * ntl
        return {"loss": loss, "number_loss": number, "ntl_loss": ntl, "aggregate_loss": None}

    # -- generation -----------------------------------------------------------------------------------------------
    def suppressed_ids(self, config: NumberSettings) -> list[int]:
        """Token ids the model must never generate with this method's modules active."""
        return []

    def predict(self, config: NumberSettings, head: nn.Module, outputs: list[Any]) -> HeadReading:
        """The head's numbers from its outputs at the last position of N rows (each output of ``[1, 1, H]``)."""
        raise NotImplementedError(f"encoding={config.encoding!r} cannot read numbers back: it has no predict().")

    def read_numbers(
        self, config: NumberSettings, head: nn.Module, digits: list[list[int]] | None, signs: list[int],
        values: list[float],
    ) -> list[GeneratedNumber]:  # fmt: skip
        """Host copies of a `HeadReading` (N rows) -> one `GeneratedNumber` (value, text, feedable) per row.

        A method whose `predict` fills ``HeadReading.combined`` also gets its rows as the keyword argument
        ``combined`` (a list of N lists of ``2 + P`` ints)."""
        raise NotImplementedError(f"encoding={config.encoding!r} cannot read numbers back: it has no read_numbers().")

    def feedback_error(self, config: NumberSettings, value: Any) -> str:
        """Why a generated number with ``feedable=False`` cannot be fed back as the next marker, and the fix."""
        return f"the generated number {value!r} cannot be fed back under encoding={config.encoding!r}."
