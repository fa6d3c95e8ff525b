"""One request's numbers inside vLLM: the tokens `numadapter.generate` would choose, and the [NUM]s' text.

vLLM's engine samples one token per request per step and builds the text from token ids alone, so a [NUM] token
cannot carry its number into the text. The plugin writes each number the head forms as

    [NUM] d1 d2 ... dk

where [NUM] is the token numadapter writes (fed back with its number's features, exactly as in numadapter's loop,
so the next token is the one `numadapter.generate` chooses) and d1..dk are the number's digit tokens
(`ServedExport.text_ids`): [NUM] is a special token that vLLM's detokenizer drops, so the text shows the digits.
The token chosen after the [NUM] waits until the digits are written. Where numadapter's decoding puts a space
between a [NUM]'s number and digits next to it (`numadapter.tokenization.decoding.digits_apart`,
`number_separator`: "5" then a [NUM] 5 reads "5 5", not 55), a space token goes there too, so the text reads the
same numbers. The digits stay in the sequence (vLLM cannot
leave them out), so tokens chosen after them read a context that numadapter's loop does not have; docs/DESIGN.md
("Serving the export with vLLM") says what that changes and how it was measured.

Every token is chosen here by numadapter's rules (`numadapter.generation.loop.choose_step` on a batch of one) and
forced by the logits processor, so the request's state never depends on reading vLLM's sampled tokens back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch

from numadapter.generation.core import digit_numbers_for
from numadapter.generation.loop import Step, choose_step
from numadapter.generation.prompts import encode_prompts
from numadapter.generation.readout import NumberReader
from numadapter.generation.sampling import SamplingSettings, TokenChooser
from numadapter.methods.registry import get_method
from numadapter.serving.vllm.served import ServedExport
from numadapter.tokenization.decoding import digits_apart, number_separator
from numadapter.tuner.side_buffer import NumberInputs

logger = logging.getLogger(__name__)

GREEDY_BELOW = 1e-5  # vLLM's own threshold: a temperature below it is greedy decoding
# SamplingParams numadapter's choice does not apply (name -> the value that means "off")
UNSUPPORTED = {
    "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "min_p": 0.0, "logit_bias": None,
    "allowed_token_ids": None, "bad_words": None, "structured_outputs": None,
}  # fmt: skip


def unsupported_settings(params: Any) -> list[str]:
    """The settings of a request's ``SamplingParams`` that numadapter's choice of tokens does not apply."""
    found = []
    for name, off in UNSUPPORTED.items():
        value = getattr(params, name, off)
        if value != off and value not in (None, [], {}):
            found.append(f"{name}={value!r}")
    return found


def chooser_for(served: ServedExport, params: Any, eos_id: int | None) -> TokenChooser:
    """numadapter's `TokenChooser` for a request's vLLM ``SamplingParams``: greedy at temperature 0, else sampled
    with its temperature, top-k and top-p (and its seed, when given); no end before ``min_tokens`` chosen tokens."""
    if params is None or params.temperature < GREEDY_BELOW:
        settings = SamplingSettings()
        generator = None
    else:
        top_k = params.top_k if params.top_k and params.top_k > 0 else None
        top_p = params.top_p if params.top_p < 1.0 else None
        settings = SamplingSettings(True, float(params.temperature), top_k, top_p)
        generator = torch.Generator().manual_seed(params.seed) if params.seed is not None else None
    suppressed = get_method(served.config).suppressed_ids(served.config)
    least = int(getattr(params, "min_tokens", 0) or 0)
    ends = [eos_id] if eos_id is not None and least else []
    return TokenChooser(settings, suppressed, ends, least, generator, torch.device("cpu"))


@dataclass
class Chosen:
    """A token to force: a [NUM] comes with its number's side row, digit ids and text."""

    token: int
    side: NumberInputs | None = None
    digits: list[int] = field(default_factory=list)
    text: str = ""


class NumberRequest:
    """The number state of one vLLM request.

    Args:
        served: the export.
        prompt_ids: the request's prompt token ids.
        params: its ``SamplingParams`` (``max_tokens`` bounds the digits written after a [NUM]).
        eos_id: the id forced to end a request whose number cannot be written (see `next_token`).
    """

    def __init__(self, served: ServedExport, prompt_ids: list[int], params: Any, eos_id: int | None) -> None:
        self.served = served
        self.prompt_ids = list(prompt_ids)
        self.max_tokens = getattr(params, "max_tokens", None)
        self.eos_id = eos_id
        self.chooser = chooser_for(served, params, eos_id)
        self.reader: NumberReader | None = None
        self.queue: list[Chosen] = []  # tokens to force before the next choice
        self.digits: list[int] = []  # the digits of a [NUM] just forced, written after the next chosen token
        self.number = ""  # that number's text
        self.forced: list[int] = []  # the output tokens
        self.chosen: list[Chosen] = []  # the tokens chosen by numadapter's rules, in order (numadapter's sequence)
        self.sides: dict[int, NumberInputs] = {}  # position of each forced [NUM] -> its number's side row
        self.refused = served.num_id in self.prompt_ids
        self.output_ids: list[int] = []  # vLLM's live list of the request's output ids (identifies it when preempted)

    @property
    def length(self) -> int:
        """Tokens in the sequence so far (prompt and output)."""
        return len(self.prompt_ids) + len(self.forced)

    def _begin(self) -> NumberReader:
        """The reader over the prompt's numbers, as `numadapter.generate` reads them from the prompt's text."""
        served = self.served
        reader = NumberReader(served.config, served.modules.head)
        text = served.ntok.tokenizer.decode(self.prompt_ids, skip_special_tokens=True)
        batch = encode_prompts(served.ntok, [text], 0, "left", torch.device("cpu"))
        digit_numbers = digit_numbers_for(served.config, served.ntok, 1, served.num_id, [list(self.prompt_ids)])
        reader.begin(batch.numbers, digit_numbers, None)
        return reader

    def _choose(self, logits: torch.Tensor, hidden: torch.Tensor) -> Chosen:
        """The token numadapter's loop chooses here (with its [NUM]'s side row, digit ids and text)."""
        if self.reader is None:
            self.reader = self._begin()
        step = Step(logits.float().unsqueeze(0), hidden.float().reshape(1, 1, -1))
        t = len(self.chosen)  # tokens chosen by numadapter's rules before this one
        choice = choose_step(step, self.reader, self.chooser, t, [0], self.served.num_id)
        token = choice.tokens[0]
        if not choice.rows:
            return Chosen(token)
        number = choice.numbers[0]
        if not number.feedable:
            logger.warning(
                "numadapter: a request stopped at its generated token %d: %s", t,
                number.reason or self.reader.out_of_range_message(number.value),
            )  # fmt: skip
            return Chosen(self._end())
        side = self.reader.side_row(choice.prediction, choice.chosen, [0])
        return Chosen(token, side, self.served.text_ids(number.text), number.text)

    def _end(self) -> int:
        if self.eos_id is None:
            raise RuntimeError("numadapter's vLLM plugin: the export has no eos_token_id to end a request with.")
        return self.eos_id

    def _text_before(self) -> str:
        """The end of the text so far (prompt and output), as the tokenizer decodes it."""
        tail = (self.prompt_ids + self.forced)[-6:]
        return self.served.ntok.tokenizer.decode(tail, skip_special_tokens=True)

    def _force(self, chosen: Chosen, after_number: bool = False) -> int:
        """Records `chosen` as the next output token; a [NUM] keeps its side row at its position and its digits
        (after a space where they would run into digits before them) for the steps that follow the next choice.
        `after_number`: the token comes right after another number's digits (a space was settled there)."""
        token = chosen.token
        if chosen.side is not None:
            digits = chosen.digits
            if not after_number and digits_apart(self._text_before(), chosen.text):
                digits = self.served.text_ids(" ") + digits
            room = None if self.max_tokens is None else self.max_tokens - len(self.forced) - 1
            if room is not None and room < len(digits) + 1:  # its digits would be cut: end before the [NUM]
                logger.warning(
                    "numadapter: max_tokens=%d leaves no room for the number at generated token %d (a [NUM] and %d "
                    "digit tokens); the request ends there (raise max_tokens).", self.max_tokens, len(self.forced),
                    len(digits),
                )  # fmt: skip
                token = self._end()
            else:
                self.sides[self.length] = chosen.side
                self.digits, self.number = digits, chosen.text
        self.forced.append(token)
        return token

    def _after_number(self, chosen: Chosen) -> list[Chosen]:
        """What follows a number's digits: a space where numadapter's decoding puts one between the number and the
        text or number of `chosen` (`digits_apart`, `number_separator`), then `chosen`."""
        if chosen.side is not None:
            space = number_separator(self.number, chosen.text) != ""
        else:
            space = bool(digits_apart(self.number, self.served.ntok.tokenizer.decode([chosen.token])))
        return ([Chosen(i) for i in self.served.text_ids(" ")] if space else []) + [chosen]

    def next_token(self, logits: torch.Tensor, hidden: torch.Tensor) -> int:
        """The token to force at this step, from the step's logits ``[V]`` and LM-head input ``[H]``."""
        if self.refused:
            return self._force(Chosen(self._end()))
        if self.queue:  # a number's digits, then the token chosen after its [NUM]: these logits are not used
            return self._force(self.queue.pop(0), after_number=True)
        chosen = self._choose(logits, hidden)
        self.chosen.append(chosen)
        if self.digits:  # the step fed a [NUM]: write its digits first
            first, *rest = self.digits
            self.digits = []
            self.queue = [Chosen(d) for d in rest] + self._after_number(chosen)
            return self._force(Chosen(first))
        return self._force(chosen)

    def side_at(self, position: int) -> NumberInputs | None:
        """The side row of the [NUM] forced at sequence `position`, or None."""
        return self.sides.get(position)
