"""Reading the number head during generation, and turning its prediction into the next step's number features.

When the model emits [NUM] at step t, the number head's output at step t *is* that number (docs/DESIGN.md, "One
function owns each alignment": hidden t scores the number of the token chosen at t):

- FoNE: the digit head's argmax digits and sign (`FoNEDigitHead.predict`), exact; rendered canonically
  (`FoNEDigitHead.to_strings`) and returned as an `ExactNumber`.
- xVal: the regression head's value (`RegressionHead.predict`, float64), rendered with at most ``frac_digits``
  fraction digits (`RegressionHead.to_strings`) and returned as a float.

The same prediction becomes the side-tensor row of that [NUM] when it is fed back as input at step t+1: FoNE gets
its digits (and sign) back, exactly the number the text shows; xVal gets the predicted value itself (float32, as
``num_values`` stores values), as in the xVal paper, so the continuation is conditioned on the head's output and
not on its rounded rendering. An xVal value that normalises outside ``[-xval_clip, xval_clip]`` (or is not
finite) cannot be fed back (the xVal embedding refuses it, and clamping would silently change the number):
`GeneratedNumber.feedable` is False and the decode loop stops that sequence or raises.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from numadapter.config import NumberAdapterConfig
from numadapter.generation.digit_numbers import DigitNumbers
from numadapter.methods.base import GeneratedNumber, Prediction
from numadapter.methods.context import ContextMemory
from numadapter.methods.registry import get_method
from numadapter.tuner.loss import head_outputs
from numadapter.tuner.side_buffer import NumberInputs


class NumberReader:
    """Head predictions -> numbers (host) and -> side-tensor rows (device).

    Args:
        config: the adapter config (``encoding``, digit places, xVal normalisation).
        head: the adapter's number head (`FoNEDigitHead` or `RegressionHead`).
    """

    def __init__(self, config: NumberAdapterConfig, head: torch.nn.Module) -> None:
        self.config = config
        self.head = head
        self.method = get_method(config)
        self.places = config.num_places
        self.context_size = self.method.context_size(config)
        self.memory: ContextMemory | None = None
        self.digit_numbers: DigitNumbers | None = None
        self.head_first = False  # digit answers trained: a number the head forms is written as [NUM]
        self.recent: list[tuple[int, int]] = []  # per row, its two latest generated tokens (the latest first)
        self.pointer = getattr(head, "pointer", None) is not None  # fone_context_pointer: numbers carry keys
        self.token_keys: list[list[torch.Tensor]] = []  # pointer: per row, the key at each generated token
        self.pending: list[int] = []  # pointer: rows whose latest number is a [NUM] fed this step, key unknown
        # per row, whether each of its last K context numbers (most recent first) is a [NUM] the head wrote
        self.head_written: list[list[bool]] = []

    def begin(
        self,
        numbers: dict[str, torch.Tensor],
        digit_numbers: DigitNumbers | None = None,
        prompt_hidden: torch.Tensor | None = None,
    ) -> None:
        """Starts a batch: a head that reads the numbers before it (`NumberMethod.context_size` > 0) remembers the
        last K numbers of each prompt (`numbers`: the prompt's ``num_mask`` / ``num_digits`` / ``num_sign``, which a
        method with a marker token always has) and, as the loop feeds them back, every generated number
        (`side_row`), and with `digit_numbers` (``fone_numbers="answers"``) every number generated in digits
        (`observe`). The pointer head (``fone_context_pointer``) also needs `prompt_hidden` ``[B, T, H]``, the LM-head
        input at every prompt position, where each prompt number's key is read."""
        self.digit_numbers = digit_numbers
        self.head_first = digit_numbers is not None and float(getattr(self.config, "fone_digit_answers", 0.0)) > 0
        if self.context_size and self.method.digit_answer_share(self.config) > 0:  # xVal's ``xval_digit_answers``
            self.head_first = True
        self.recent = [(-1, -1)] * numbers["num_mask"].shape[0] if self.head_first and numbers else []
        if self.context_size:
            mask, digits = numbers["num_mask"], numbers["num_digits"]
            keys = None
            if self.pointer:
                if prompt_hidden is None:
                    raise ValueError("fone_context_pointer=True reads the prompt numbers' keys: pass `prompt_hidden`.")
                keys = self.head.number_keys(prompt_hidden)  # (B, T, D)
            self.memory = ContextMemory(mask, digits, numbers.get("num_sign"), self.context_size, keys)
            self.token_keys = [[] for _ in range(mask.shape[0])]
            self.pending = []
            self.head_written = [[False] * self.context_size for _ in range(mask.shape[0])]  # a prompt's: text

    def without_context(self, rows: list[int]) -> list[int]:
        """The `rows` with no number before the position, where xVal's head over the numbers before it
        (``xval_context_numbers`` > 0) has nothing to weigh and its read-out alone would write a magnitude the
        hidden state of a pretrained base does not hold (a fact the base knew, "water boils at 100"): the loop
        leaves those numbers to the LM's digit tokens. Empty for FoNE and for xVal without the context."""
        if not rows or self.memory is None or self.method.writes_without_context(self.config):
            return []
        filled = self.memory.numbers.valid.any(-1)  # (B,)
        return [row for row, has in zip(rows, filled[rows].tolist()) if not has]

    def step_keys(self, hidden: torch.Tensor | None, rows: list[int], first: bool) -> None:
        """Pointer head: the key of the token fed at this step (``hidden [B, 1, H]``, the LM-head input there) on
        `rows`, kept per generated token (a number written in digits takes the key of its last token), and given
        to the [NUM]s fed at this step (`ContextMemory.set_latest_keys`: a [NUM]'s key is read at the [NUM]).
        `first`: the step fed the prompt, whose last token is no generated token."""
        if not self.pointer or self.memory is None or hidden is None:
            return
        keys = self.head.number_keys(hidden[:, -1])  # (B, D)
        self.memory.set_latest_keys(self.pending, keys)
        self.pending = []
        if not first:
            for row in rows:
                self.token_keys[row].append(keys[row])

    def starts_number(self, row: int, token: int) -> bool:
        """Whether `token` would start a new number in digits on `row`: `DigitNumbers.starts_number` where the
        reader follows the text; else (xVal) whether it is one of the digit tokens ``digit_token_ids`` and neither of
        the row's two latest tokens is one (``12.5``'s ``5`` continues a number)."""
        if self.digit_numbers is not None:
            return self.digit_numbers.starts_number(row, token)
        digits = self.config.digit_token_ids or ()
        return token in digits and not any(previous in digits for previous in self.recent[row])

    def replace_last(self, rows: list[int], tokens: list[int]) -> None:
        """The loop chose the latest token of `rows` again (a [NUM] written in digits): follow its entry in
        `tokens`."""
        if self.digit_numbers is not None:
            self.digit_numbers.replace_last(rows, tokens)
        for row in rows if self.recent else ():
            self.recent[row] = (tokens[row], self.recent[row][1])

    def observe(self, tokens: list[int], rows: list[int]) -> None:
        """Records the numbers that the step's chosen `tokens` complete in digits on `rows` as their latest context
        numbers (before the head reads this step: training marks a number at its last token). A no-op unless
        `begin` got `digit_numbers`, but for the two latest tokens of each row (`starts_number`)."""
        for row in rows if self.recent else ():
            self.recent[row] = (tokens[row], self.recent[row][0])
        if self.digit_numbers is None or self.memory is None:
            return
        completed = self.digit_numbers.observe(tokens, rows)
        rounds = max(map(len, completed.values()), default=0)
        device = self.memory.numbers.digits.device
        keys = self.memory.numbers.keys
        for turn in range(rounds):  # the i-th completed number of every row, then the next: text order per row
            now = [row for row, numbers in completed.items() if len(numbers) > turn]
            digits = torch.zeros(len(tokens), self.places, dtype=torch.long)
            sign = torch.ones(len(tokens), dtype=torch.long)
            for row in now:
                digits[row] = torch.tensor(completed[row][turn][0], dtype=torch.long)
                sign[row] = completed[row][turn][1]
            fed = None
            if keys is not None:  # the key at each number's last token
                fed = keys.new_zeros(len(tokens), keys.shape[-1])
                for row in now:
                    end = self.digit_numbers.ends[row][turn]
                    if end < len(self.token_keys[row]):
                        fed[row] = self.token_keys[row][end]
            self.memory.push(sorted(now), digits.to(device), sign.to(device), fed)
            self._written(now, False)

    def _written(self, rows: list[int], by_head: bool) -> None:
        """Records on `rows` a new latest context number, written by the head (a [NUM]) or in digits."""
        for row in rows:
            self.head_written[row] = [by_head, *self.head_written[row][:-1]]

    def _copies_text(self, prediction: Prediction, rows: list[int]) -> list[bool]:
        """Per row of `rows`: whether its combination is a copy (one number, coefficient +1) of a number written in
        digits. A copy of a [NUM] the head wrote is not: its digits are nowhere in the text for the LM to copy, so
        training writes it as [NUM] too (`numadapter.tokenization.encoding`)."""
        terms = prediction.combined[rows, 0].tolist()
        coefficients = prediction.combination[rows].tolist()
        out = []
        for row, count, row_coefficients in zip(rows, terms, coefficients):
            copy = count == 1 and sum(row_coefficients) == 1
            out.append(copy and not self.head_written[row][row_coefficients.index(1)])
        return out

    def unformed(self, prediction: Prediction, rows: list[int], logits: torch.Tensor | None = None) -> list[int]:
        """The `rows` where the context head combined no number (every coefficient 0 and no pair operation: its
        read-out alone), which ``fone_numbers="answers"`` writes in digit tokens instead: the adapter writes [NUM]
        only for numbers the head forms, as training marked them (one device-to-host copy). With
        ``fone_head_copies=False`` also the rows whose combination is a copy (one number, coefficient +1) of a
        number in digits, which training left to the LM (`_copies_text`); with ``fone_head_min_confidence`` > 0 also
        the rows whose confidence is below it; with ``fone_head_digit_check`` = k > 0 and the step's LM `logits`
        ``[B, V]``, also the rows whose number (not negative) starts with a digit outside the LM's k likeliest digit
        tokens there (`lm_disagrees`). Always the rows whose combination is a negative magnitude (``below_zero``) or
        needs more than ``int_digits`` places: a [NUM]'s digits hold it only modulo ``10^int_digits``, so the LM
        writes that number, as training left such numbers in digits."""
        if prediction.combined is None:
            return []
        terms = prediction.combined[:, 0]  # (B,): the numbers the chosen sum or pair operation combined
        written = terms > 0
        if not getattr(self.config, "fone_head_copies", True) and prediction.combination is not None:
            copies = torch.zeros_like(written)
            copies[rows] = torch.tensor(self._copies_text(prediction, rows), dtype=torch.bool, device=written.device)
            written &= ~copies
        least = float(getattr(self.config, "fone_head_min_confidence", 0.0) or 0.0)
        if least > 0 and prediction.confidence is not None:
            written &= prediction.confidence >= least
        left = [row for row, kept in zip(rows, written[rows].tolist()) if not kept]
        kept = [row for row in rows if row not in left]
        if kept and bool((terms[kept] > 0).any()):
            numbers = self.numbers(prediction, kept).items()
            left = sorted(left + [row for row, number in numbers if number.below_zero or not number.feedable])
        if logits is not None:
            checked = [row for row in rows if row not in left]
            left = sorted(left + self.lm_disagrees(prediction, checked, logits))
        return left

    def lm_disagrees(self, prediction: Prediction, rows: list[int], logits: torch.Tensor) -> list[int]:
        """The `rows` where the number the head would write starts with a digit that is not among the
        ``fone_head_digit_check`` likeliest digit tokens of the LM's `logits` ``[B, V]`` at this step (none when the
        check is 0 or the digit token ids are unknown): a wrong combination is usually off in its leading digit (a
        ledger balance of 868 for 10371). A negative number is not checked (the LM would first write its sign)."""
        top = int(getattr(self.config, "fone_head_digit_check", 0) or 0)
        digit_ids = getattr(self.config, "digit_token_ids", None)
        if top <= 0 or not digit_ids or not rows:
            return []
        ids = torch.tensor(list(digit_ids), dtype=torch.long, device=logits.device)
        likeliest = logits[rows].index_select(-1, ids).topk(min(top, len(ids)), -1).indices.tolist()  # (R, top)
        numbers = self.numbers(prediction, rows)
        out = []
        for row, allowed in zip(rows, likeliest):
            text = numbers[row].text
            if text.startswith("-") or not text[:1].isdigit():
                continue
            if int(text[0]) not in allowed:
                out.append(row)
        return out

    # -- device side ------------------------------------------------------------------------------------------
    def predict(self, hidden: torch.Tensor, rows: list[int]) -> Prediction:
        """The head's prediction for `rows` from the captured LM-head input at the last position.

        The head runs on one row at a time: it computes in float32, and a matrix product over a different number
        of rows can round differently, so a prompt's numbers would otherwise depend on the other prompts of its
        batch (and the cached path differ from the uncached one). Only rows that emitted [NUM] are read.

        Args:
            hidden: ``[B, T, H]`` the LM-head input (T = 1 in cached steps).
            rows: the rows to read.

        Returns:
            A `Prediction` over all B rows (rows not in `rows` hold digits 0, sign +1, value 0).
        """
        batch = hidden.shape[0]
        index = torch.tensor(rows, dtype=torch.long, device=hidden.device)
        memory = self.memory
        outputs = [
            head_outputs(self.config, self.head, hidden[row : row + 1, -1:], memory and memory.rows([row]))
            for row in rows
        ]  # each (1, 1, ...)
        reading = self.method.predict(self.config, self.head, outputs)  # over the N rows
        full_digits = None
        if reading.digits is not None:
            full_digits = torch.zeros(batch, self.places, dtype=torch.long, device=hidden.device)
            full_digits.index_copy_(0, index, reading.digits)
        sign, values = reading.sign.long(), reading.values.to(torch.float64)
        full_sign = torch.ones(batch, dtype=torch.long, device=hidden.device).index_copy_(0, index, sign)
        full_values = torch.zeros(batch, dtype=torch.float64, device=hidden.device).index_copy_(0, index, values)

        def scattered(part: torch.Tensor | None) -> torch.Tensor | None:  # (N, ...) -> (B, ...), zeros elsewhere
            return None if part is None else part.new_zeros(batch, *part.shape[1:]).index_copy_(0, index, part)

        return Prediction(
            full_digits, full_sign, full_values, scattered(reading.confidence), scattered(reading.combination),
            scattered(reading.combined),
        )  # fmt: skip

    def side_row(self, prediction: Prediction, fed: torch.Tensor, rows: list[int]) -> NumberInputs | None:
        """The side-tensor row ``[B, 1]`` of the tokens fed at the next step.

        Args:
            prediction: the head's prediction at the step that chose `fed`.
            fed: int64 ``[B]`` the tokens fed next.
            rows: the rows whose fed token is [NUM] (known on the host), ascending.

        Returns:
            `NumberInputs` of shape ``[B, 1]`` (the prediction on `rows`, zeros elsewhere; ``index`` set from
            `rows`, so no device-to-host sync is needed), or None when `rows` is empty.
        """
        if not rows:
            return None
        batch, device = fed.shape[0], fed.device
        index = torch.tensor(rows, dtype=torch.long, device=device)  # (N,)
        is_number = torch.zeros(batch, dtype=torch.bool, device=device).index_fill_(0, index, True)  # (B,)
        mask = is_number.long().unsqueeze(1)  # (B, 1)
        if self.memory is not None and prediction.digits is not None:
            self.memory.push(rows, prediction.digits, prediction.sign)
            self.pending = list(rows)  # their keys come with the step that feeds the [NUM] (`step_keys`)
            self._written(rows, True)
        if prediction.digits is not None:
            digits = (prediction.digits * mask).unsqueeze(1)  # (B, 1, P)
        else:
            digits = torch.zeros(batch, 1, self.places, dtype=torch.long, device=device)
        values = torch.where(is_number, prediction.values, 0.0).to(torch.float32).unsqueeze(1)  # (B, 1)
        return NumberInputs(
            mask=mask,
            digits=digits,
            sign=prediction.sign.unsqueeze(1) * mask,
            values=values,
            has_numbers=True,
            index=(index, torch.zeros_like(index)),
        )

    # -- host side --------------------------------------------------------------------------------------------
    def numbers(self, prediction: Prediction, rows: list[int]) -> dict[int, GeneratedNumber]:
        """The numbers of `rows` on the host (one device-to-host copy).

        Args:
            prediction: the head's prediction.
            rows: the rows that emitted [NUM].

        Returns:
            row -> `GeneratedNumber`.
        """
        index = torch.tensor(rows, dtype=torch.long, device=prediction.sign.device)
        optional = {"confidence": prediction.confidence, "combination": prediction.combination,
                    "combined": prediction.combined}  # fmt: skip
        present = {name: part.reshape(part.shape[0], -1) for name, part in optional.items() if part is not None}
        columns = [prediction.sign.to(torch.float64).unsqueeze(1), prediction.values.unsqueeze(1)]
        columns += [part.to(torch.float64) for part in present.values()]  # small integers: exact in float64
        if prediction.digits is not None:
            columns.append(prediction.digits.to(torch.float64))
        both = torch.cat(columns, dim=1).index_select(0, index).tolist()  # (N, 2 + extras [+ P]): the one copy
        signs, values = [int(row[0]) for row in both], [row[1] for row in both]
        digits = [[int(d) for d in row[-self.places :]] for row in both] if prediction.digits is not None else None
        spans, start = {}, 2
        for name, part in present.items():
            spans[name] = (start, start + part.shape[1])
            start += part.shape[1]
        extra = {}
        if "combined" in spans:
            low, high = spans["combined"]
            extra["combined"] = [[int(c) for c in row[low:high]] for row in both]
        numbers = self.method.read_numbers(self.config, self.head, digits, signs, values, **extra)
        if "confidence" in spans:
            numbers = [replace(n, confidence=row[spans["confidence"][0]]) for n, row in zip(numbers, both)]
        if "combination" in spans:
            low, high = spans["combination"]
            numbers = [replace(n, combination=tuple(int(c) for c in row[low:high])) for n, row in zip(numbers, both)]
        return dict(zip(rows, numbers))

    def out_of_range_message(self, value: float) -> str:
        """Why a generated number cannot be fed back, and what to change (`NumberMethod.feedback_error`)."""
        return self.method.feedback_error(self.config, value)
