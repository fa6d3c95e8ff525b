"""`NumberTokenizer`: text <-> token ids plus number side tensors, losslessly.

It wraps any Hugging Face fast tokenizer. Numbers are found on the raw text with `find_numbers` (character
offsets, never on tokens, so a T5 piece "\u25811" or a Llama 3 three-digit group can neither split nor merge two
numbers), then:

- ``encoding="fone"`` / ``"xval"``: each number that fits the configured range becomes ONE ``[NUM]`` token; its
  exact place digits, sign and value go into side tensors aligned with ``input_ids`` (FoNE paper, section 3: one
  token per number; xVal paper, section 2: a single [NUM] token scaled by the value). With
  ``sign_policy="text"`` a sign character stays ordinary text before ``[NUM]`` and ``[NUM]`` holds ``|x|``; with
  ``"feature"`` the sign is part of the number (``num_sign = -1``).
- ``encoding="digits"``: numbers stay ordinary tokens, one token per ASCII digit character (digit tokenisation of
  the digit-aggregation paper, section 4; separators, point and exponent characters are ordinary tokens). With
  ``aggregate=True`` an ``[AGG]`` token is put right before each in-range number and carries its side tensors.
  The paper marks numbers as ``[F] [AGG] d1 ... dn [/F]``; numadapter uses the simpler ``[AGG] d1 ... dn``
  (the number ends at the first non-number token; no start/end marker tokens are added). Every ASCII digit of
  the text is split, also inside words (``H2O``). Numbers written in another digit script (Arabic-Indic, ...)
  keep the base tokenization and get no ``[AGG]``. Without ``aggregate`` nothing depends on the digit range, so
  ``out_of_range`` has no effect; with it, an out-of-range number gets no ``[AGG]`` (or raises).

How encoding works (speed: one Rust call per batch): each number (or the position before it, for ``[AGG]``) is
replaced by the marker string in the text, the whole batch is tokenized by the backend in one call (with its own
truncation and padding), and the side tensors are filled at the positions of the marker ids
(`numadapter.tokenization.encoding`). The markers are added as special tokens that never strip or normalise surrounding
whitespace, so the text between numbers is tokenized as it was written and decoding is lossless on a lossless
(byte-level) base tokenizer.

Internally NumberTokenizer encodes with a private copy of the backend in which (a) a Metaspace pre-tokenizer with
``prepend_scheme="always"`` uses ``"first"`` (otherwise every text piece after ``[NUM]`` would get a spurious
"\u2581", so ``5%`` would decode as ``5 %``), and (b) in digits mode the ten ASCII digits are added tokens, so
every digit is its own token even on a tokenizer that groups digits (Llama 3). Texts without digits encode to
exactly the base tokenizer's ids. Tokens added to ``ntok.tokenizer`` after construction are not seen by this copy:
build a new NumberTokenizer then.

Decoding splices the numbers back at the marker positions: their surface forms (``number_texts``) when given, so
``ntok.decode(ntok(text)) == text`` on byte-level tokenizers; otherwise the canonical text of the number given by
``num_digits`` / ``num_sign`` (what generation produces). On a tokenizer whose own round trip is lossy (T5's
Unigram + Metaspace collapses whitespace runs, unknown characters decode to nothing), numbers are still exact and
the rest equals what the base tokenizer's own round trip gives.

``xval`` range: besides fitting ``int_digits`` / ``frac_digits``, an xVal number must satisfy
``|(v - xval_center) / xval_scale| <= xval_clip`` (v is the value [NUM] carries: ``|x|`` with
``sign_policy="text"``); otherwise it follows ``out_of_range`` like any other out-of-range number. When that range
leaves most numbers of a batch as text, the tokenizer warns once, naming the range (`XValMethod.mostly_text_warning`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tokenizers import AddedToken, Tokenizer
from transformers import AutoTokenizer, BatchEncoding

from numadapter.config import TOKENIZER, NumberAdapterConfig, fields_with, marker_choice, with_legacy_defaults
from numadapter.methods.base import NumberMethod
from numadapter.methods.fone.answer_mode import answers_mode, fone_numbers_in_effect
from numadapter.methods.registry import get_method
from numadapter.numbers import ExactNumber
from numadapter.schema import GROUP_FIELD
from numadapter.schema import SIDE_FIELDS as SIDE_KEYS
from numadapter.tokenization.decoding import NumberDecoding
from numadapter.tokenization.encoding import ASCII_DIGITS, NumberEncoding, check_answer_start
from numadapter.tokenization.matching import check_tokenizer_matches
from numadapter.tokenization.notes import PromptNumbers, note
from numadapter.tokenization.options import TransformersOptions, check_unsupported

CONFIG_NAME = "number_tokenizer_config.json"
# Config fields the tokenizer depends on; saved in CONFIG_NAME.
SAVED_FIELDS = fields_with(TOKENIZER)
_OWN_ATTRIBUTES = frozenset({"tokenizer", "config", "num_token_id", "agg_token_id", "marker_token_id"})


def render_number(exact: ExactNumber | str | int | float) -> str:
    """The canonical text of a number: ``"-12.5"``, ``"0"``, ``"0.001"``, ``"1000"`` (no exponent, no separators)."""
    return str(ExactNumber.parse(exact))


def _marker_token(content: str) -> AddedToken:
    return AddedToken(content, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False)


def _first_prepend(node: Any) -> None:
    """Sets every Metaspace ``prepend_scheme="always"`` in a serialised pre-tokenizer to ``"first"`` (in place)."""
    if isinstance(node, dict):
        if node.get("type") == "Metaspace" and node.get("prepend_scheme") == "always":
            node["prepend_scheme"] = "first"
        for value in node.values():
            _first_prepend(value)
    elif isinstance(node, list):
        for value in node:
            _first_prepend(value)


# The tokenizer attributes whose token a marker may not be (a marker that is also the pad / eos / ... token would make
# that token carry numbers).
_ROLES = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


def check_marker_token(tokenizer: Any, field: str, content: str) -> None:
    """Refuses a marker (`field`: ``"num_token"`` / ``"agg_token"``, string `content`) that is already in use.

    A marker must be a new token, or an existing special token that nothing else uses (a directory saved with the
    marker added, or a reserved special token). Refused: an ordinary token of the vocabulary (the marker would stand
    for that text too), a special token with a role (pad, eos, bos, unk, ...) or written by the chat template.

    Raises:
        ValueError: naming the field, the value, what uses it and a working choice.
    """
    vocab = tokenizer.get_vocab()
    special = {t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if t.special}
    use = None
    if content in vocab and content not in special:
        use = f"an ordinary token of the base vocabulary (id {vocab[content]})"
    else:
        roles = [role for role in _ROLES if getattr(tokenizer, role, None) == content]
        template = getattr(tokenizer, "chat_template", None)
        if roles:
            use = f"the tokenizer's {' and '.join(roles)}"
        elif isinstance(template, str) and content in template:
            use = "a special token written by the tokenizer's chat template"
    if use is not None:
        taken = set(vocab) | set(special)
        raise ValueError(
            f"`{field}`={content!r} is {use} in {type(tokenizer).__name__}: it would stand for a number and for "
            f"itself. Set {field}={marker_choice(field, taken)!r} (a new token numadapter adds)."
        )


class NumberTokenizer(NumberEncoding, NumberDecoding, TransformersOptions):
    """Tokenizer wrapper that turns numbers into ``[NUM]``/``[AGG]`` tokens plus exact side tensors.

    Args:
        tokenizer: a Hugging Face fast tokenizer. ``config.num_token`` (fone/xval) or ``config.agg_token``
            (digits + aggregate) is added to it as a special token unless already present (then its id is reused);
            resize the model's embeddings to ``len(ntok)``.
        config: the `NumberAdapterConfig` whose number settings apply.

    Attributes:
        tokenizer: the wrapped tokenizer (with the marker token added).
        config: the config.
        num_token_id: id of ``[NUM]`` (None with ``encoding="digits"``, which uses no [NUM]).
        agg_token_id: id of ``[AGG]`` (None unless ``encoding="digits"`` and ``aggregate=True``).
        marker_token_id: the id that carries the side tensors (``num_token_id`` or ``agg_token_id``), or None.
    """

    def __init__(self, tokenizer: Any, config: NumberAdapterConfig) -> None:
        if not isinstance(config, NumberAdapterConfig):
            raise TypeError(f"`config` must be a NumberAdapterConfig, got {type(config).__name__}.")
        if not hasattr(tokenizer, "backend_tokenizer"):
            raise TypeError(
                f"NumberTokenizer needs a fast (Rust `tokenizers`) tokenizer, got {type(tokenizer).__name__}: load it "
                "with AutoTokenizer.from_pretrained(path) (fast is the default) or wrap a `tokenizers.Tokenizer` in "
                "PreTrainedTokenizerFast(tokenizer_object=...)."
            )
        config.validate_number_settings()
        self.tokenizer = tokenizer
        self.config = config
        self.num_token_id: int | None = None
        self.agg_token_id: int | None = None
        marker_field = self._method.marker_field(config)  # "num_token", "agg_token" or None
        self.marker_token_id, self._marker = None, None
        if marker_field is not None:
            self._marker = getattr(config, marker_field)
            check_marker_token(tokenizer, marker_field, self._marker)
            self.marker_token_id = self._ensure_token(self._marker)
            setattr(self, marker_field + "_id", self.marker_token_id)
        self._backend = self._build_backend()
        self._cache: dict[str, tuple[tuple[int, ...], int, float] | None | bool] = {}
        # a config already bound to token ids (a saved adapter's) must have been bound to this tokenizer
        check_tokenizer_matches(self, config, "NumberTokenizer", "tokenizer")

    # -- setup ---------------------------------------------------------------------------------------------------
    def _ensure_token(self, content: str) -> int:
        if content not in self.tokenizer.get_added_vocab():
            self.tokenizer.add_tokens([_marker_token(content)], special_tokens=True)
        token_id = self.tokenizer.convert_tokens_to_ids(content)
        if token_id is None or token_id == self.tokenizer.unk_token_id:
            raise ValueError(f"Could not add the token {content!r} to {type(self.tokenizer).__name__}.")
        return token_id

    def _build_backend(self) -> Tokenizer:
        data = json.loads(self.tokenizer.backend_tokenizer.to_str())
        data["truncation"] = None
        data["padding"] = None
        _first_prepend(data.get("pre_tokenizer"))
        for token in data.get("added_tokens", []):
            if token["content"] == self._marker:  # keep whitespace next to the marker as written; not special
                # here, so that it still matches when split_special_tokens=True splits the special-token strings
                token.update(lstrip=False, rstrip=False, normalized=False, single_word=False, special=False)
        backend = Tokenizer.from_str(json.dumps(data))
        if not self._method.replaces_numbers(self.config):  # numbers stay digit tokens: each digit must be one
            missing = [d for d in ASCII_DIGITS if backend.token_to_id(d) is None]
            if missing:
                raise ValueError(
                    f"encoding='digits' needs every digit 0-9 to be one token, but {missing} have no single-token id "
                    f"in the vocabulary of {type(self.tokenizer).__name__}: use encoding='fone' or 'xval' with this "
                    "tokenizer, or a tokenizer whose vocabulary has the ten digits."
                )
            backend.add_tokens([AddedToken(d, special=False, normalized=False) for d in ASCII_DIGITS])
        return backend

    @property
    def digit_token_ids(self) -> list[int] | None:
        """Ids of the single-character tokens "0" ... "9" in the vocabulary, or None if one is missing."""
        ids = [self._backend.token_to_id(d) for d in ASCII_DIGITS]
        return None if None in ids else ids

    @property
    def _method(self) -> NumberMethod:
        """The `NumberMethod` of ``config.encoding`` (looked up, not stored: pickles and fingerprints unchanged)."""
        return get_method(self.config)

    # -- delegation ----------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.tokenizer)

    def __getattr__(self, name: str) -> Any:
        # pad_token_id, eos_token, padding_side, apply_chat_template, ... come from the wrapped tokenizer
        if name.startswith("_") or name in _OWN_ATTRIBUTES:
            raise AttributeError(name)
        return getattr(self.tokenizer, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # ntok.padding_side = "left", ntok.pad_token = ... set the wrapped tokenizer's attribute
        if name.startswith("_") or name in _OWN_ATTRIBUTES or "tokenizer" not in self.__dict__:
            object.__setattr__(self, name, value)
        else:
            setattr(self.tokenizer, name, value)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = {}  # a pure cache: keeps pickles small and `datasets` fingerprints stable
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return (
            f"NumberTokenizer(encoding={self.config.encoding!r}, marker_token_id={self.marker_token_id}, "
            f"tokenizer={type(self.tokenizer).__name__}(len={len(self.tokenizer)}))"
        )

    # -- numbers -------------------------------------------------------------------------------------------------
    def __call__(
        self,
        text: str | Sequence[str],
        padding: bool | str = False,
        truncation: bool | str = False,
        max_length: int | None = None,
        return_tensors: str | None = None,
        add_special_tokens: bool = True,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        *,
        return_attention_mask: bool | None = None,
        return_token_type_ids: bool | None = None,
        return_special_tokens_mask: bool = False,
        return_length: bool = False,
        verbose: bool = True,
        split_special_tokens: bool = False,
        answer_start: int | Sequence[int | Sequence[tuple[int, int]] | None] | None = None,
        digits_in: int | Sequence[int | Sequence[tuple[int, int]] | None] | None = None,
        return_number_groups: bool = False,
        **unsupported: Any,
    ) -> BatchEncoding:
        """Encodes one text or a batch.

        Args:
            text: a string or a list of strings.
            padding: ``False``/``"do_not_pad"``, ``True``/``"longest"`` or ``"max_length"`` (as in transformers).
                Pads on the base tokenizer's ``padding_side`` (or `padding_side`); side tensors are padded with 0.
            truncation: ``True`` (or ``"longest_first"``/``"only_first"``) truncates to `max_length` (default: the
                tokenizer's ``model_max_length``) on its ``truncation_side``; side rows and ``number_texts`` of the
                removed numbers are dropped with their tokens.
            max_length: target length for truncation / ``padding="max_length"``.
            return_tensors: None (Python lists) or ``"pt"``.
            add_special_tokens: add the base tokenizer's bos/eos as its post-processor does.
            split_special_tokens: as in transformers. False (default): a special-token string written in the text
                (``<s>``, ``</s>``, ``<|im_start|>``, ... as a chat template renders them) is encoded as that special
                token, with the base tokenizer's ids; ``decode(..., skip_special_tokens=False)`` gives it back and
                the default ``decode`` drops it, as transformers does. True: such strings are encoded as ordinary
                text, so the default ``decode`` gives them back (the marker strings stay reserved either way).
            pad_to_multiple_of: round the padded length up to a multiple of this.
            padding_side: override the tokenizer's padding side for this call.
            return_attention_mask, return_token_type_ids, return_special_tokens_mask, return_length, verbose: as in
                transformers (token type ids are zeros: one text per sequence).
            answer_start: with ``encoding="fone"`` and ``fone_numbers="answers"``, the character offset from which
                a text's numbers are answers: an int for every text, or one entry per text: an int, None (the text
                has no answer, a prompt) or a list of ``(start, end)`` character ranges (a chat's assistant turns:
                the numbers starting in them are answers, those of the other turns context). Only an answer that a
                signed combination of the last ``fone_context_numbers`` numbers before it forms becomes [NUM]
                (``num_mask`` 1); every other in-range number stays the base tokenizer's own tokens and gets its row
                at the token holding its last character (``num_mask`` 2: context only). Checked in every mode, used
                only in that one.
            digits_in: in the other modes (xVal, FoNE over every number), the character ranges whose numbers stay
                the base tokenizer's own digit tokens, with no row; the same format as `answer_start` (None: every
                number as the encoding writes it). The trainers use it for ``xval_digit_answers``: the answers of a
                share of the training examples in digits, so the LM keeps writing numbers in digits.
            return_number_groups: add ``number_group`` (``[B, T]``: k on every token of the k-th number that has a
                row, 0 elsewhere), read from the token offsets; only with ``fone_numbers="answers"``
                (`numadapter.data.prepare_dataset` uses it; `numadapter.data.number_groups` serves the other modes).
            **unsupported: transformers' other options; a neutral value (``text_pair=None``, ``stride=0``, ...) is
                accepted, anything else raises a `ValueError` naming it.

        The ``input_ids`` tensor of ``return_tensors="pt"`` is noted with its numbers
        (`numadapter.tokenization.notes`), so ``decode`` of it or of a row of it (``enc["input_ids"][0]``) renders
        them; a copy carries none. ``model.generate`` takes the numbers from the number tensors of this output
        (``model.generate(**enc)``), never from the ids.

        Returns:
            A `BatchEncoding` with ``input_ids``, ``attention_mask``, ``num_mask`` [B, T], ``num_digits``
            [B, T, P], ``num_sign`` [B, T], ``num_values`` [B, T] (float32) and ``number_texts`` (list of lists of
            str). For a single string without ``return_tensors`` the batch dimension is dropped, as in transformers.

        Raises:
            ValueError: a text contains ``config.num_token`` or ``config.agg_token`` literally (reserved in every
                encoding), bad arguments (an `answer_start` outside a text, or a list of another length than the
                batch), or (``out_of_range="error"``) `NumberOutOfRangeError` for a number outside the configured
                range.
        """
        check_unsupported(unsupported)
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        if return_tensors not in (None, "pt"):
            raise ValueError(f"`return_tensors` must be None or 'pt', got {return_tensors!r}.")
        starts = check_answer_start(answer_start, texts)
        in_digits = check_answer_start(digits_in, texts, name="digits_in")
        answers = answers_mode(self.config)
        if return_number_groups and not answers:
            raise ValueError(
                f"return_number_groups=True is for fone_numbers='answers' (encoding='fone'), but this tokenizer has "
                f"encoding={self.config.encoding!r}, fone_numbers={self.config.fone_numbers!r}: use "
                "numadapter.data.number_groups for its number groups, or leave return_number_groups=False."
            )
        substituted, numbers, left = [], [], []
        for index, item in enumerate(texts):
            if answers:
                sub, nums = self._substitute_answers(index, item, starts[index], left)
            else:
                sub, nums = self._substitute(index, item, left, in_digits[index])
            substituted.append(sub)
            numbers.append(nums)
        if left:
            self._warn_mostly_text(left, sum(map(len, numbers)))
            self._warn_not_context(left)
        self._configure(padding, truncation, max_length, pad_to_multiple_of, padding_side)
        encodings = self._encode(substituted, add_special_tokens, split_special_tokens, offsets=answers)
        ids = [e.ids for e in encodings]
        mask = [e.attention_mask for e in encodings]
        rows = None
        if answers:
            rows = [self._placed_rows(e, placed) for e, placed in zip(encodings, numbers)]
            numbers = self._marker_numbers(ids, rows)
        else:
            numbers = self._kept_numbers(ids, numbers, truncation not in (False, "do_not_truncate", None))
        number_texts = [[n.text for n in nums] for nums in numbers]
        if return_tensors == "pt":
            if len({len(row) for row in ids}) > 1:
                raise ValueError(
                    f"return_tensors='pt' needs sequences of one length, got lengths {sorted({len(r) for r in ids})}: "
                    "pass padding=True (or 'max_length')."
                )
            input_ids = np.array(ids, dtype=np.int64).reshape(len(ids), -1 if ids else 0)  # (B, T)
            data: dict[str, Any] = {
                "input_ids": torch.from_numpy(input_ids),
                "attention_mask": torch.from_numpy(np.array(mask, dtype=np.int64).reshape(input_ids.shape)),
            }
            data.update(self._side_tensors(input_ids, numbers, rows))
            data["number_texts"] = number_texts
            if self.marker_token_id is not None:
                sides = {key: data[key] for key in SIDE_KEYS}
                note(data["input_ids"], PromptNumbers(sides, number_texts, self, data["attention_mask"]))
        else:
            side = self._side_lists(ids, numbers, rows)
            data = {"input_ids": ids, "attention_mask": mask, **side, "number_texts": number_texts}
        if return_number_groups:
            groups = self._group_lists(ids, rows)
            data[GROUP_FIELD] = torch.tensor(groups, dtype=torch.long) if return_tensors == "pt" else groups
        extras = (return_attention_mask, return_token_type_ids, return_special_tokens_mask, return_length)
        self._extras(data, ids, *extras)
        if single and return_tensors is None:
            data = {k: v[0] for k, v in data.items()}
        return BatchEncoding(data)

    def _encode(
        self, texts: list[str], add_special_tokens: bool, split_special_tokens: bool = False, offsets: bool = False
    ) -> list[Any]:
        """The backend's encodings of `texts`; with `offsets` they carry character offsets (``char_to_token``),
        which the faster ``encode_batch_fast`` leaves out."""
        if not isinstance(split_special_tokens, bool):
            raise TypeError(f"`split_special_tokens` must be True or False, got {split_special_tokens!r}.")
        self._backend.encode_special_tokens = split_special_tokens
        fast = None if offsets else getattr(self._backend, "encode_batch_fast", None)
        encode = fast or self._backend.encode_batch
        return encode(texts, add_special_tokens=add_special_tokens)

    def _configure(self, padding, truncation, max_length, pad_to_multiple_of, padding_side) -> None:
        tok, backend = self.tokenizer, self._backend
        if padding in (True, "longest"):
            pad_length = None
        elif padding == "max_length":
            pad_length = max_length if max_length is not None else tok.model_max_length
        elif padding in (False, "do_not_pad", None):
            pad_length = False
        else:
            raise ValueError(f"`padding` must be False, True, 'longest' or 'max_length', got {padding!r}.")
        if truncation in (True, "longest_first", "only_first"):
            limit = max_length if max_length is not None else tok.model_max_length
            if limit is None or limit > 10**8:
                raise ValueError(
                    "truncation=True needs `max_length` (the tokenizer has no model_max_length): pass max_length=..."
                )
            backend.enable_truncation(int(limit), direction=tok.truncation_side)
        elif truncation in (False, "do_not_truncate", None):
            backend.no_truncation()
        else:
            raise ValueError(f"`truncation` must be True/False, 'longest_first' or 'only_first', got {truncation!r}.")
        if pad_length is False:
            backend.no_padding()
            return
        if tok.pad_token_id is None:
            raise ValueError(
                f"padding={padding!r} needs a pad token, but {type(tok).__name__} has none: set tokenizer.pad_token "
                "(e.g. to the eos token) before padding."
            )
        side = padding_side or tok.padding_side
        if side not in ("left", "right"):
            raise ValueError(f"`padding_side` must be 'left' or 'right', got {side!r}.")
        backend.enable_padding(
            direction=side,
            pad_id=tok.pad_token_id,
            pad_token=tok.pad_token,
            length=None if pad_length is None else int(pad_length),
            pad_to_multiple_of=pad_to_multiple_of,
        )

    # -- persistence ---------------------------------------------------------------------------------------------
    def save_pretrained(self, path: str | os.PathLike) -> None:
        """Saves the tokenizer files and ``number_tokenizer_config.json`` (the number settings; JSON only)."""
        os.makedirs(path, exist_ok=True)
        self.tokenizer.save_pretrained(path)
        settings = {name: getattr(self.config, name) for name in SAVED_FIELDS}
        if settings["fone_numbers"] == "auto" and self.config.task_type is not None:  # the architecture decided it
            settings["fone_numbers"] = fone_numbers_in_effect(self.config)
        settings.update(num_token_id=self.num_token_id, agg_token_id=self.agg_token_id)
        with open(os.path.join(path, CONFIG_NAME), "w", encoding="utf-8") as f:
            json.dump(settings, f, indent=2, sort_keys=True)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, config: NumberAdapterConfig | None = None) -> NumberTokenizer:
        """Loads what `save_pretrained` wrote. `config`, when given, must agree with the saved number settings."""
        file = os.path.join(path, CONFIG_NAME)
        if not os.path.isfile(file):
            raise FileNotFoundError(
                f"No {CONFIG_NAME} in {os.fspath(path)!r}: this is not a NumberTokenizer directory (save one with "
                "NumberTokenizer.save_pretrained)."
            )
        from numadapter.json_file import read_json

        settings = read_json(file, "save the NumberTokenizer again with NumberTokenizer.save_pretrained")
        saved_ids = {k: settings.pop(k, None) for k in ("num_token_id", "agg_token_id")}
        # a field saved before it existed meant its old default (fone_numbers: 'all', every number a [NUM])
        settings.update({k: v for k, v in with_legacy_defaults(settings).items() if k in SAVED_FIELDS})
        if config is None:
            config = NumberAdapterConfig(**{k: v for k, v in settings.items() if k in SAVED_FIELDS})
        else:
            differ = {k: (v, getattr(config, k)) for k, v in settings.items() if getattr(config, k, v) != v}
            saved_mode = settings.get("fone_numbers", "auto")
            if saved_mode == "auto" or saved_mode == fone_numbers_in_effect(config):  # 'auto' takes the config's
                differ.pop("fone_numbers", None)
            if differ:
                raise ValueError(
                    f"The given config disagrees with {file} on {differ} (saved, given): pass a matching config or "
                    "config=None to use the saved settings."
                )
        ntok = cls(AutoTokenizer.from_pretrained(path), config)
        for name, saved in saved_ids.items():
            if saved is not None and getattr(ntok, name) != saved:
                raise ValueError(f"{name} is {getattr(ntok, name)} after loading but was saved as {saved}.")
        return ntok
