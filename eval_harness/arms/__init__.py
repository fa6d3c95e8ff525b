"""The methods the harness compares, each a recipe for turning numbers into tokens and back.

A `Method` says which tokenizer a from-scratch model gets, whether training and prediction go through plain
transformers (``backend="plain"``: token cross-entropy only) or through numadapter's adapter
(``backend="numadapter"``: `numadapter.get_peft_model` with a `NumberAdapterConfig`, whose forward adds
the number-head loss / NTL / the aggregate loss), and how the answer is read off the model (``prediction``):

- ``"generate"``: greedy decoding of the answer tokens until end-of-sequence; the answer is the first number of the
  completion (`eval_harness.metrics.parse_number`). Plain models use ``model.generate``; numadapter models use
  ``numadapter.generate`` (the product's decode loop).
- ``"fone_head"``: one forward pass over the prompt; the FoNE digit head at the last prompt position (the ``=``,
  whose next token is the answer's [NUM]) gives the answer's digits (argmax per place, FoNE Definition 3.8). This is
  what generation does for a [NUM] answer, minus the steps that cannot change it: the answer is one [NUM] token.
- ``"xval_head"``: the same with xVal's regression head; the value is rounded to the target's number of decimals
  for exact match, as the FoNE paper does for xVal (Sec. 4.1, "predictions are rounded").

Regimes (`eval_harness.runner`): ``"scratch"`` (random-init Llama of the FoNE paper's Table 6, every parameter
trained) and ``"adapter"`` (a pretrained base from a path, frozen; LoRA (+ the number modules) trained). The plain
baselines differ per regime: ``digits`` / ``subword`` from scratch (a digit-wise or a Llama-3-style tokenizer), and
``lora`` (the base's own tokenizer, LoRA alone) in the adapter regime.

Loss weights follow the papers: NTL weight 0.3 (NTL paper, eq. 6 lambda used in its experiments), the
digit-aggregation lambda 0.6 (its Table 4, the most common value).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from numadapter.ntl import KINDS as NTL_KINDS

BACKENDS = ("plain", "numadapter")
PREDICTIONS = ("generate", "fone_head", "xval_head")
REGIMES = ("scratch", "adapter")
NTL_WEIGHT = 0.3
PAPER_HEAD = {"fone_head_target": "digit", "fone_head_input": "linear"}  # the FoNE paper's digit head
AGGREGATE_LAMBDA = 0.6


@dataclass(frozen=True)
class Method:
    """One way of representing numbers, trained and evaluated the same way as every other.

    Attributes:
        name: registry name (``--methods``).
        description: one line for ``python -m eval_harness --help``.
        backend: ``"plain"`` (transformers model, CE) or ``"numadapter"`` (numadapter's PEFT model and loss).
        tokenizer: the tokenizer kind a from-scratch model gets (`eval_harness.arms.models.scratch_tokenizer`):
            ``"digits"`` (one token per digit) or ``"subword"`` (Llama-3-style groups of up to 3 digits). Unused in
            the adapter regime (the base's tokenizer).
        adapter: `NumberAdapterConfig` number settings (numadapter backend), e.g. ``{"encoding": "fone"}``.
        scratch_adapter: extra settings used only from scratch (the papers' from-scratch choices).
        prediction: ``"generate"``, ``"fone_head"`` or ``"xval_head"`` (see the module docstring).
        regimes: the regimes the method runs in.
        source: where the method comes from.
        product_adapter: a plain method's `NumberAdapterConfig` number settings on the product train path
            (`eval_harness.product`), where numadapter trains it: ``lora`` is ``{"encoding": "digits",
            "train_eos_row": False}``, numadapter's plain LoRA (numbers stay the tokenizer's digit tokens, no [AGG],
            no NTL, the EOS rows frozen: PEFT's LoRA parameters and nothing else train). Empty: the method keeps the
            harness loop there.
    """

    name: str
    description: str
    backend: Literal["plain", "numadapter"]
    tokenizer: Literal["digits", "subword"] = "digits"
    adapter: Mapping[str, Any] = field(default_factory=dict)
    scratch_adapter: Mapping[str, Any] = field(default_factory=dict)
    prediction: Literal["generate", "fone_head", "xval_head"] = "generate"
    regimes: tuple[str, ...] = REGIMES
    source: str = ""
    product_adapter: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"Method {self.name!r}: `backend` must be one of {list(BACKENDS)}, got {self.backend!r}.")
        if self.prediction not in PREDICTIONS:
            raise ValueError(
                f"Method {self.name!r}: `prediction` must be one of {list(PREDICTIONS)}, got {self.prediction!r}."
            )
        if self.backend == "plain" and self.adapter:
            raise ValueError(f"Method {self.name!r}: a plain method takes no adapter settings, got {self.adapter}.")
        if self.backend != "plain" and self.product_adapter:
            raise ValueError(
                f"Method {self.name!r}: `product_adapter` is for plain methods (a numadapter method trains with "
                f"`adapter` on every path), got {self.product_adapter}."
            )

    @property
    def on_product_path(self) -> bool:
        """Whether the product train path (`numadapter.NumberSFTTrainer`) can train this method."""
        return self.backend == "numadapter" or bool(self.product_adapter)

    @property
    def encoding(self) -> str | None:
        """The numadapter encoding (``"fone"``, ``"xval"``, ``"digits"``), None for plain methods."""
        return self.adapter.get("encoding") if self.backend == "numadapter" else None

    def adapter_settings(self, regime: str, product: bool = False) -> dict[str, Any]:
        """The `NumberAdapterConfig` number settings for `regime` (scratch adds `scratch_adapter`); a plain method
        on the product path (`product`) gets its `product_adapter`."""
        if self.backend == "plain":
            return dict(self.product_adapter) if product else {}
        settings = dict(self.adapter)
        if regime == "scratch":
            settings.update(self.scratch_adapter)
        return settings

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable description (written into every result file)."""
        return {
            "name": self.name,
            "description": self.description,
            "backend": self.backend,
            "tokenizer": self.tokenizer,
            "adapter": dict(self.adapter),
            "scratch_adapter": dict(self.scratch_adapter),
            "prediction": self.prediction,
            "source": self.source,
            "product_adapter": dict(self.product_adapter),
        }


def _methods() -> list[Method]:
    # FoNE from scratch: the paper's own layout (Algorithm 1 zero-padding, Figure 1(d) head reading the first 2P
    # hidden dims); pretrained bases keep numadapter's defaults (learned projections).
    fone_scratch = {"fone_projection": "pad", "fone_head_input": "slice"}
    methods = [
        Method(
            "digits", "digit-wise tokens (one per digit), token cross-entropy", "plain", "digits",
            regimes=("scratch",), source="FoNE Sec. 4.1 baseline",
        ),
        Method(
            "subword", "Llama-3-style subword tokens (digits in groups of up to 3), token cross-entropy", "plain",
            "subword", regimes=("scratch",), source="FoNE Sec. 4.1 baseline",
        ),
        Method(
            "lora", "LoRA alone on the base's own tokenizer, token cross-entropy", "plain",
            regimes=("adapter",), source="adapter baseline",
            product_adapter={"encoding": "digits", "train_eos_row": False},
        ),
        Method(
            "xval", "xVal: one [NUM] scaled by the value, regression head (MSE)", "numadapter",
            adapter={"encoding": "xval"}, prediction="xval_head", source="xVal; FoNE Sec. 4.1 baseline",
        ),
        Method(
            "fone", "FoNE: one [NUM] with Fourier features, digit head (CE per digit)", "numadapter",
            adapter={"encoding": "fone", **PAPER_HEAD}, scratch_adapter=fone_scratch,
            prediction="fone_head", source="FoNE",
        ),
        Method(
            "fone_ntl", f"FoNE + NTL-WAS on the digit head's distributions (weight {NTL_WEIGHT})", "numadapter",
            adapter={"encoding": "fone", **PAPER_HEAD, "ntl_weight": NTL_WEIGHT, "ntl_kind": "was"},
            scratch_adapter=fone_scratch, prediction="fone_head", source="FoNE + NTL",
        ),
        Method(
            "fone_feature", "FoNE, carry-aware digit head: each digit 2-vector points at the answer's own Fourier "
            "feature, read lowest place first (fone_head_target='feature')", "numadapter",
            adapter={"encoding": "fone", "fone_head_target": "feature", "fone_head_input": "linear"},
            scratch_adapter=fone_scratch,
            prediction="fone_head", source="FoNE, numadapter's head target",
        ),
        Method(
            "fone_context", "FoNE with the context head (numadapter's default): the answer as a signed combination "
            "of the exact features of the numbers before it (fone_head_input='context')", "numadapter",
            adapter={"encoding": "fone"}, regimes=("adapter",), prediction="fone_head",
            source="FoNE, numadapter's context head",
        ),
    ]  # fmt: skip
    for kind in NTL_KINDS:
        methods.append(
            Method(
                f"digits_ntl_{kind.replace('-', '_')}",
                f"digit-wise tokens, CE + NTL-{kind.upper()} (weight {NTL_WEIGHT})",
                "numadapter",
                "digits",
                adapter={"encoding": "digits", "ntl_weight": NTL_WEIGHT, "ntl_kind": kind},
                source="NTL paper",
            )
        )
    methods += [
        Method(
            "digits_agg", "digit-wise tokens with an [AGG] token before each input number (eq. 1)", "numadapter",
            "digits", adapter={"encoding": "digits", "aggregate": True}, source="digit-aggregation paper",
        ),
        Method(
            "digits_agg_aux", f"digits + [AGG] + the auxiliary aggregate loss (lambda {AGGREGATE_LAMBDA}, eq. 3)",
            "numadapter", "digits",
            adapter={"encoding": "digits", "aggregate": True, "aggregate_loss_lambda": AGGREGATE_LAMBDA},
            source="digit-aggregation paper",
        ),
    ]  # fmt: skip
    return methods


METHODS: dict[str, Method] = {m.name: m for m in _methods()}


def get_method(name: str) -> Method:
    """The registered method called `name`.

    Raises:
        ValueError: unknown name; the message lists the valid names.
    """
    if not isinstance(name, str) or name not in METHODS:
        raise ValueError(
            f"Unknown method {name!r}. Valid methods: {', '.join(METHODS)} (see `python -m eval_harness --help`)."
        )
    return METHODS[name]


__all__ = ["AGGREGATE_LAMBDA", "METHODS", "NTL_WEIGHT", "Method", "get_method"]
