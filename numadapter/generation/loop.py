"""The decode loop: KV cache, left padding, and numbers fed back through the side buffer.

``model.generate`` cannot carry per-step side values, so numadapter runs its own loop (docs/DESIGN.md, "Own the
decode loop"):

1. **Prefill** through the public forward of the PEFT model (``model(**inputs)``: the number tensors are validated
   against the ids and the number features added at the prompt's [NUM] rows). Causal LMs: the left-padded prompt
   with ``position_ids = cumsum(attention_mask) - 1`` (0 on padding) and ``logits_to_keep=1``, as transformers does.
   T5: the encoder once, and the first decoder step from ``decoder_start_token_id``.
2. **Steps** (cached): one new token per sequence through the transformers model inside the PEFT model, with the
   adapter's own hooks (`NumberRuntime.hooks`, installed once for the whole loop) and its side buffer
   armed per step with the number row of the fed token: when a row's token is [NUM], its side row carries the
   number head's prediction from the step that chose it (`readout`), on the decoder side for T5. This skips the
   public forward's per-call validation (one host sync each) because the loop builds these tensors itself.
3. The next token comes from the last-position logits (`sampling`); the host reads it back (the one device-to-host
   sync per step; a second one only on steps where some row emitted [NUM], to read the numbers) and records it
   (`stopping`).

``use_cache=False`` runs the public forward on the whole sequence at every step instead (prompt + generated ids
with their number tensors): slow, but independent of the cache and of the lean step path, which is how the tests
check that both give the same tokens and numbers.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import torch
from transformers.modeling_outputs import BaseModelOutput

from numadapter.generation.digit_numbers import DigitNumbers
from numadapter.generation.expression_check import (
    ExpressionCheck,
    check_expressions,
    checks_expressions,
    not_copies,
    with_values,
)
from numadapter.generation.prompts import PromptBatch, position_ids
from numadapter.generation.readout import NumberReader
from numadapter.generation.sampling import TokenChooser
from numadapter.generation.stopping import RowTracker
from numadapter.methods.base import GeneratedNumber, Prediction
from numadapter.methods.fone.answer_mode import head_left_out
from numadapter.numbers import NumberOutOfRangeError
from numadapter.tuner.forward_hooks import whole_hidden
from numadapter.tuner.patches import output_module
from numadapter.tuner.runtime import NumberRuntime
from numadapter.tuner.side_buffer import NumberInputs

FIELDS = ("mask", "digits", "sign", "values")
# digit answers trained: the least probability of [NUM] at a digit number's start for the head to take it over
TAKEOVER_NUM_PROBABILITY = 0.1
# the most tokens chosen again after a value written as text until one does not continue it (`_not_continuing`)
CLOSE_TRIES = 20


@dataclass
class AdapterParts:
    """The pieces of a numadapter PEFT model the loop drives.

    Attributes:
        model: the ``peft.PeftModel`` (public forward: prefill and the uncached path).
        runtime: the tuner's `NumberRuntime` (the transformers model, the number modules, hooks and side buffer
            for the cached steps, which call the transformers model directly).
        marker: the id whose rows carry number tensors ([NUM] or [AGG]), or None.
        num_token_id: the [NUM] id when numbers are generated as [NUM] (fone / xval), else None.
    """

    model: torch.nn.Module
    runtime: NumberRuntime
    marker: int | None
    num_token_id: int | None

    @property
    def device(self) -> torch.device:
        return self.runtime.inner.get_input_embeddings().weight.device


@dataclass
class Step:
    """One forward result: the last-position logits ``[B, V]`` and the captured LM-head input ``[B, 1, H]``.

    ``hidden`` is what the number head reads (None without a number head); it is only read on steps where some row
    emitted [NUM].
    """

    logits: torch.Tensor
    hidden: torch.Tensor | None


def _cat_side(numbers: dict[str, torch.Tensor], prefix: str, row: NumberInputs) -> None:
    """Appends a ``[B, 1]`` side row to full-length side tensors (in place in the dict)."""
    for field in FIELDS:
        numbers[prefix + field] = torch.cat((numbers[prefix + field], getattr(row, field)), dim=1)


class _Session:
    """Runs the model for one batch: `start` (prefill) then `advance` (one fed token per row)."""

    def __init__(self, parts: AdapterParts, batch: PromptBatch, stack: ExitStack):
        self.parts = parts
        self.batch = batch
        self.stack = stack
        self.hooked = False
        self.with_head = parts.runtime.has_head
        self.keep_prompt = False  # set by the loop: keep the LM-head input at every prompt position
        self.prompt_hidden: torch.Tensor | None = None  # ``[B, T, H]`` with keep_prompt, after `start`

    def _public(self, **kwargs) -> tuple[Step, Any]:
        """The public forward of the PEFT model (validates the number tensors); captures the LM-head input.

        The number head is read from the captured input at the last position (`NumberReader.predict`) rather than
        from the forward's all-position head outputs, so that it sees exactly what the cached steps give it.
        """
        captured: list[torch.Tensor] = []

        def capture(module: torch.nn.Module, args: tuple) -> None:
            captured.append(args[0])

        handle = output_module(self.parts.runtime.inner).register_forward_pre_hook(capture) if self.with_head else None
        keep = self.keep_prompt and self.prompt_hidden is None
        try:
            with whole_hidden(self.parts.runtime.inner, keep) as whole:
                out = self.parts.model(**kwargs)
        finally:
            if handle is not None:
                handle.remove()
        if keep and whole:
            self.prompt_hidden = whole[-1]
        return Step(out.logits[:, -1], captured[-1][:, -1:] if captured else None), out

    def _lean(self, side_name: str, side: NumberInputs | None, current: str | None, **kwargs) -> Step:
        """One step through the transformers model with the adapter's hooks and the side buffer armed."""
        parts = self.parts
        if parts.runtime.modules is None:  # adapters disabled: the base model (LoRA off), no number modules
            return Step(parts.runtime.inner(**kwargs).logits[:, -1], None)
        if not self.hooked:
            self.stack.enter_context(parts.runtime.hooks(capture_hidden=self.with_head))
            self.hooked = True
        sides = {side_name: side} if side is not None else {}
        with parts.runtime.step(sides, current) as buffer:
            out = parts.runtime.inner(**kwargs)
            hidden = buffer.hidden
        logits = out.logits[:, -1]  # (B, V)
        if parts.marker is not None and head_left_out(parts.runtime.config):  # as the public forward does
            logits = logits.index_fill(-1, torch.tensor([parts.marker], device=logits.device), float("-inf"))
        return Step(logits, hidden)


class CausalCached(_Session):
    """Causal LM with a KV cache: left-padded prefill, then one token per step."""

    def start(self, max_new_tokens: int) -> Step:
        batch = self.batch
        positions = position_ids(batch.attention_mask)
        self.mask = None
        if batch.has_padding:
            grown = batch.attention_mask.new_ones(batch.attention_mask.shape[0], max_new_tokens)
            self.mask = torch.cat((batch.attention_mask, grown), dim=1)  # (B, T0 + max_new)
        self.length = batch.input_ids.shape[1]
        kwargs = dict(input_ids=batch.input_ids, position_ids=positions, use_cache=True, logits_to_keep=1)
        if self.mask is not None:
            kwargs["attention_mask"] = batch.attention_mask
        step, out = self._public(**kwargs, **batch.numbers)
        self.cache = out.past_key_values
        self.position = positions[:, -1:]
        return step

    def advance(self, fed: torch.Tensor, side: NumberInputs | None) -> Step:
        self.position = self.position + 1
        self.length += 1
        kwargs = dict(input_ids=fed[:, None], position_ids=self.position, past_key_values=self.cache, use_cache=True)
        if self.mask is not None:
            kwargs["attention_mask"] = self.mask[:, : self.length]
        return self._lean("input", side, "input", **kwargs)


class CausalUncached(_Session):
    """Causal LM without cache: the public forward on the whole sequence at every step (the reference path)."""

    def start(self, max_new_tokens: int) -> Step:
        self.ids = self.batch.input_ids
        self.mask = self.batch.attention_mask
        self.numbers = dict(self.batch.numbers)
        return self._run()

    def _run(self) -> Step:
        kwargs = dict(input_ids=self.ids, position_ids=position_ids(self.mask), use_cache=False, logits_to_keep=1)
        if self.batch.has_padding:
            kwargs["attention_mask"] = self.mask
        return self._public(**kwargs, **self.numbers)[0]

    def advance(self, fed: torch.Tensor, side: NumberInputs | None) -> Step:
        self.ids = torch.cat((self.ids, fed[:, None]), dim=1)
        self.mask = torch.cat((self.mask, self.mask.new_ones(self.mask.shape[0], 1)), dim=1)
        if self.numbers:
            _cat_side(self.numbers, "num_", side if side is not None else _zero_row(self.parts, fed))
        return self._run()


def _zero_row(parts: AdapterParts, fed: torch.Tensor) -> NumberInputs:
    """A ``[B, 1]`` side row without numbers."""
    places = parts.runtime.config.num_places
    zeros = torch.zeros(fed.shape[0], 1, dtype=torch.long, device=fed.device)
    digits = torch.zeros(fed.shape[0], 1, places, dtype=torch.long, device=fed.device)
    return NumberInputs(mask=zeros, digits=digits, sign=zeros, values=zeros.float())


def decoder_start(parts: AdapterParts, batch: PromptBatch) -> torch.Tensor:
    """``[B, 1]`` of the model's ``decoder_start_token_id`` (T5), on the device of ``batch.input_ids``."""
    start = parts.runtime.inner.generation_config.decoder_start_token_id
    if start is None:
        start = parts.runtime.inner.config.decoder_start_token_id
    if start is None:
        raise ValueError(
            f"{type(parts.runtime.inner).__name__} has no decoder_start_token_id (generation_config or config): set "
            "model.generation_config.decoder_start_token_id (T5 uses the pad token id)."
        )
    return torch.full((batch.input_ids.shape[0], 1), int(start), dtype=torch.long, device=batch.input_ids.device)


class Seq2SeqCached(_Session):
    """T5 with a cache: the encoder once, then the decoder one token per step from ``decoder_start_token_id``."""

    def start(self, max_new_tokens: int) -> Step:
        batch = self.batch
        step, out = self._public(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            decoder_input_ids=decoder_start(self.parts, batch),
            use_cache=True,
            **batch.numbers,
        )
        self.cache = out.past_key_values
        self.encoder = BaseModelOutput(last_hidden_state=out.encoder_last_hidden_state)
        return step

    def advance(self, fed: torch.Tensor, side: NumberInputs | None) -> Step:
        kwargs = dict(
            encoder_outputs=self.encoder,
            attention_mask=self.batch.attention_mask,
            decoder_input_ids=fed[:, None],
            past_key_values=self.cache,
            use_cache=True,
        )
        return self._lean("decoder", side, None, **kwargs)


class Seq2SeqUncached(_Session):
    """T5 without cache: the public forward (encoder and the whole decoder sequence) at every step."""

    def start(self, max_new_tokens: int) -> Step:
        self.decoder_ids = decoder_start(self.parts, self.batch)
        self.decoder_numbers: dict[str, torch.Tensor] = {}
        if self.batch.numbers:
            row = _zero_row(self.parts, self.decoder_ids[:, 0])
            self.decoder_numbers = {"decoder_num_" + field: getattr(row, field) for field in FIELDS}
        return self._run()

    def _run(self) -> Step:
        batch = self.batch
        return self._public(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            decoder_input_ids=self.decoder_ids,
            use_cache=False,
            **batch.numbers,
            **self.decoder_numbers,
        )[0]

    def advance(self, fed: torch.Tensor, side: NumberInputs | None) -> Step:
        self.decoder_ids = torch.cat((self.decoder_ids, fed[:, None]), dim=1)
        if self.decoder_numbers:
            row = side if side is not None else _zero_row(self.parts, fed)
            _cat_side(self.decoder_numbers, "decoder_num_", row)
        return self._run()


def _head_where_it_forms(
    reader: NumberReader,
    hidden: torch.Tensor,
    logits: torch.Tensor,
    chosen: torch.Tensor,
    tokens: list[int],
    active: list[int],
    num_id: int,
) -> tuple[torch.Tensor, list[int]]:
    """``fone_digit_answers`` or ``xval_digit_answers`` > 0 (the LM was trained to write answers both ways): on the
    rows whose chosen token starts a number in digits and where the LM gives [NUM] at least
    `TAKEOVER_NUM_PROBABILITY` (``logits [B, V]``), [NUM] instead where the head forms that number (xVal's: where a
    number comes before it) (``(chosen [B], tokens)``).

    Training writes half of the answers the head forms as [NUM] and every other answer in digits, so the LM's
    probability of [NUM] says whether this is a number the head was trained to write; an untrained head (a task
    whose answers it never forms) still combines some numbers, and must not take over the LM's digits there."""
    starts = [r for r in active if tokens[r] != num_id and reader.starts_number(r, tokens[r])]
    if starts:
        num_probability = torch.softmax(logits[starts].float(), -1)[:, num_id].tolist()
        starts = [r for r, p in zip(starts, num_probability) if p >= TAKEOVER_NUM_PROBABILITY]
    if not starts:
        return chosen, tokens
    trial = reader.predict(hidden, starts)
    unformed = set(reader.unformed(trial, starts, logits)) | set(reader.without_context(starts))
    formed = [r for r in starts if r not in unformed]
    if not formed:
        return chosen, tokens
    return _with_rows(chosen, formed, torch.full_like(chosen, num_id))


def _in_digits(
    logits: torch.Tensor,
    chooser: TokenChooser,
    t: int,
    chosen: torch.Tensor,
    rows: list[int],
    num_id: int,
    digit_ids: Sequence[int] | None = None,
) -> tuple[torch.Tensor, list[int]]:
    """The step's tokens on `rows`, where the LM chose [NUM] and the head forms no number, chosen again from their
    logits ``[B, V]`` among the digit tokens `digit_ids` (the number is written in digits; every [NUM] in training
    stood for a number, so the LM's next choice without it, often the end of the answer, would drop the number),
    or among every token but [NUM] when the digit ids are unknown: ``(chosen [B], the same as a list)``."""
    barred = logits.clone()
    if digit_ids:
        allowed = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)
        allowed[list(digit_ids)] = True
        barred[rows] = barred[rows].masked_fill(~allowed, float("-inf"))
    barred[rows, num_id] = float("-inf")
    return _with_rows(chosen, rows, chooser(barred, t))


def _not_continuing(
    digit_numbers: DigitNumbers,
    logits: torch.Tensor,
    chooser: TokenChooser,
    t: int,
    chosen: torch.Tensor,
    tokens: list[int],
    rows: list[int],
) -> tuple[torch.Tensor, list[int]]:
    """On `rows`, a token that would continue the number just written (`DigitNumbers.continues`: ``"0"`` after
    ``"174254976"`` makes another number) is chosen again without it, up to `CLOSE_TRIES` times (greedy: the best
    token that does not continue it; sampling: a draw among those). ``(chosen [B], tokens)``."""
    barred = logits.clone()
    for row in rows:
        for _ in range(CLOSE_TRIES):
            if not digit_numbers.continues(tokens[row]):
                break
            barred[row, tokens[row]] = float("-inf")
            chosen, tokens = _with_rows(chosen, [row], chooser(barred, t))
    return chosen, tokens


def _with_rows(chosen: torch.Tensor, rows: list[int], new: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
    """`chosen` ``[B]`` with `rows` taken from `new` ``[B]``: ``(tokens [B], the same as a list)``."""
    pick = torch.zeros_like(chosen, dtype=torch.bool)
    pick[rows] = True
    chosen = torch.where(pick, new, chosen)
    return chosen, chosen.tolist()


def _with_tokens(chosen: torch.Tensor, tokens: dict[int, int]) -> tuple[torch.Tensor, list[int]]:
    """`chosen` ``[B]`` with each row of `tokens` (``{row: token id}``) set to its token: ``(tokens [B], the same as
    a list)``."""
    new = torch.tensor([tokens.get(row, 0) for row in range(len(chosen))], dtype=chosen.dtype, device=chosen.device)
    return _with_rows(chosen, list(tokens), new)


@dataclass
class StepChoice:
    """The tokens one step writes and the numbers the head writes at its [NUM]s (`choose_step`).

    Attributes:
        chosen: int64 ``[B]`` the tokens (on the logits' device).
        tokens: the same as a list.
        rows: the rows whose token is a [NUM] the head writes (ascending).
        prediction: the head's prediction over all B rows (read on `rows`), or None when `rows` is empty.
        numbers: row -> `GeneratedNumber` on `rows`.
    """

    chosen: torch.Tensor
    tokens: list[int]
    rows: list[int]
    prediction: Prediction | None
    numbers: dict[int, GeneratedNumber]


def choose_step(
    step: Step,
    reader: NumberReader | None,
    chooser: TokenChooser,
    t: int,
    active: list[int],
    num_id: int | None,
) -> StepChoice:
    """The tokens of generated step `t` on the `active` rows, from the step's logits and the LM-head input, with
    numadapter's number rules: the chooser's token; with ``fone_digit_answers`` > 0 a [NUM] where the head forms the
    number the LM starts in digits; with ``fone_expression_check`` the value of an expression the text ends in with
    "=" (`numadapter.generation.expression_check`), and after "number operator" or an equation of its own a [NUM]
    the head writes only as a copy; digit numbers the model completes join the head's context; a
    [NUM] whose number the head does not form is chosen again among the digit tokens; the head's number at every
    other [NUM].

    The decode loop calls it for its whole batch; the vLLM plugin (`numadapter.serving.vllm`) for one request at a
    time, so that both write the same tokens and numbers. Updates `reader`'s context (it follows every row).
    """
    chosen = chooser(step.logits, t)  # (B,)
    digit_numbers = getattr(reader, "digit_numbers", None)
    closed = digit_numbers.take_closed(active) if digit_numbers is not None else []
    forced = digit_numbers.take_next(active) if digit_numbers is not None else {}
    if forced:  # what the expression check writes after a value (the "%" of a sum of shares, a value's text)
        chosen, tokens = _with_tokens(chosen, forced)
    else:
        tokens = chosen.tolist()  # the one host sync of the step
    if closed:  # a value the expression check wrote as text just ended: the next token may not continue it
        chosen, tokens = _not_continuing(digit_numbers, step.logits, chooser, t, chosen, tokens, closed)
    free = [row for row in active if row not in forced]  # the rows whose token the number rules may still change
    if reader is not None:  # the pointer head: the key of the token this step fed
        reader.step_keys(step.hidden, active, first=t == 0)
    if reader is not None and reader.head_first and step.hidden is not None:  # digit answers were trained
        chosen, tokens = _head_where_it_forms(reader, step.hidden, step.logits, chosen, tokens, free, num_id)
    check = ExpressionCheck()  # fone_expression_check: the number after "expression =" is its value
    if reader is not None and step.hidden is not None and checks_expressions(reader):
        check = check_expressions(reader, tokens, free, num_id)
        if check.values:
            chosen, tokens = _with_rows(chosen, list(check.values), torch.full_like(chosen, num_id))
        # a negative value's sign first (sign_policy="text"), its magnitude at the next [NUM]; a value past
        # int_digits as text, its first token now and the others at the next steps
        first = {**check.minus, **{row: ids[0] for row, ids in check.text.items()}}
        if first:
            chosen, tokens = _with_tokens(chosen, first)
        for row, ids in check.text.items():
            reader.digit_numbers.write_next(row, *ids[1:], closes=True)
        for row, token in check.then.items():
            reader.digit_numbers.write_next(row, token)
    if reader is not None:  # numbers the model wrote in digits join the context (fone_numbers="answers")
        reader.observe(tokens, active)
    rows = [r for r in active if tokens[r] == num_id] if num_id is not None else []
    prediction = reader.predict(step.hidden, rows) if rows and step.hidden is not None else None
    if prediction is not None:  # rows whose number the head does not write: the LM writes it in digits
        answers = reader.digit_numbers is not None  # fone_numbers="answers": the head forms no number there
        if answers:
            unchecked = [r for r in rows if r not in check.values]
            unformed = reader.unformed(prediction, unchecked, step.logits) if unchecked else []
            others = not_copies(reader, prediction, [r for r in check.copies_only if r not in unformed])
            left = sorted(unformed + check.in_digits + others)
        else:  # (xVal's head over the numbers before it: none to weigh)
            left = reader.without_context(rows)
        if left:
            digit_ids = getattr(reader.config, "digit_token_ids", None)
            chosen, tokens = _in_digits(step.logits, chooser, t, chosen, left, num_id, digit_ids)
            reader.replace_last(left, tokens)
            rows = [r for r in rows if r not in left]
            prediction = reader.predict(step.hidden, rows) if rows else None
    if prediction is not None:
        config = reader.config
        prediction = with_values(prediction, check.values, config.int_digits, config.frac_digits)
    numbers = reader.numbers(prediction, rows) if prediction is not None else {}
    if reader is not None and reader.digit_numbers is not None and numbers:  # the text a later expression reads
        reader.digit_numbers.wrote({row: number.text for row, number in numbers.items()})
    return StepChoice(chosen, tokens, rows, prediction, numbers)


def decode_loop(
    parts: AdapterParts,
    batch: PromptBatch,
    reader: NumberReader | None,
    chooser: TokenChooser,
    tracker: RowTracker,
    max_new_tokens: int,
    use_cache: bool,
    pad_id: int,
    on_out_of_range: str,
    digit_numbers: DigitNumbers | None = None,
) -> None:
    """Generates up to `max_new_tokens` tokens for every row of `batch`; results land in `tracker`.

    Args:
        parts: the model pieces.
        batch: the padded prompts.
        reader: the number-head reader (None without a number head).
        chooser: picks the next tokens.
        tracker: records tokens and numbers, decides when rows stop.
        max_new_tokens: the most tokens generated per row.
        use_cache: cached steps (fast) or the whole sequence each step (reference).
        pad_id: fed to rows that stopped.
        on_out_of_range: ``"stop"`` (warn, stop that row) or ``"error"`` for a generated number that cannot be fed
            back (an xVal value beyond ``xval_clip``, a FoNE context head's combination beyond ``int_digits``).
        digit_numbers: with ``fone_numbers="answers"``, follows the numbers written in digits (context numbers).
    """
    encoder_decoder = parts.runtime.arch.is_encoder_decoder
    session_cls = {
        (False, True): CausalCached,
        (False, False): CausalUncached,
        (True, True): Seq2SeqCached,
        (True, False): Seq2SeqUncached,
    }[(encoder_decoder, use_cache)]
    num_id = parts.num_token_id
    with ExitStack() as stack:
        session = session_cls(parts, batch, stack)
        session.keep_prompt = reader is not None and reader.pointer  # the pointer reads the prompt's keys
        step = session.start(max_new_tokens)
        if reader is not None:
            reader.begin(batch.numbers, digit_numbers, session.prompt_hidden)
        running: torch.Tensor | None = None  # device mask of rows still running, once some row stopped
        warned = False  # a warning about a fed-back number (GeneratedNumber.reason) was shown
        for t in range(max_new_tokens):
            choice = choose_step(step, reader, chooser, t, tracker.active, num_id)
            chosen, tokens, rows, prediction, numbers = (
                choice.chosen, choice.tokens, choice.rows, choice.prediction, choice.numbers
            )  # fmt: skip
            for row, number in numbers.items():
                if number.feedable and number.reason is not None and not warned:
                    warned = True
                    warnings.warn(
                        f"sequence {row}, generated token {t}: {number.reason} (warned once per call)",
                        UserWarning,
                        stacklevel=4,
                    )
                if not number.feedable:
                    message = number.reason or reader.out_of_range_message(number.value)
                    if on_out_of_range == "error":
                        raise NumberOutOfRangeError(f"sequence {row}, generated token {t}: {message}")
                    warnings.warn(
                        f"sequence {row} stopped at generated token {t}: {message} (pass "
                        "xval_out_of_range='error' to raise instead).",
                        UserWarning,
                        stacklevel=4,
                    )
            stopped = tracker.record(tokens, numbers)
            if not tracker.active or t == max_new_tokens - 1:
                break
            if stopped:
                alive = torch.zeros(len(tokens), dtype=torch.bool)
                alive[tracker.active] = True
                running = alive.to(chosen.device)
            fed = chosen if running is None else torch.where(running, chosen, pad_id)
            side = None
            if prediction is not None:
                side = reader.side_row(prediction, fed, [r for r in rows if tracker.reasons[r] is None])
            step = session.advance(fed, side)
    tracker.finish()
