"""transformers' tokenizer surface for `NumberTokenizer`: the options pipelines and trainers pass, and chat templates.

`TransformersOptions` is a mixin: the class using it provides ``tokenizer`` (the wrapped fast tokenizer),
``marker_token_id``, ``_special_ids()`` and ``__call__`` (the number-aware encoder).
"""

from __future__ import annotations

from typing import Any

import torch

# transformers' tokenizer options NumberTokenizer does not implement, with the values that mean "off"
NEUTRAL_OPTIONS: dict[str, tuple[Any, ...]] = {
    "text_pair": (None,),
    "text_target": (None,),
    "text_pair_target": (None,),
    "stride": (0,),
    "is_split_into_words": (False,),
    "return_overflowing_tokens": (False,),
    "return_offsets_mapping": (False,),
}


def check_unsupported(options: dict[str, Any]) -> None:
    """Accepts transformers' tokenizer options at their neutral values; `ValueError` / `TypeError` otherwise."""
    for name, value in options.items():
        if name not in NEUTRAL_OPTIONS:
            raise TypeError(f"NumberTokenizer() got an unexpected keyword argument {name!r}.")
        if not any(value is n or value == n for n in NEUTRAL_OPTIONS[name]):
            raise ValueError(
                f"NumberTokenizer does not support {name}={value!r}: it encodes whole single texts (numbers are "
                f"found on the raw text); leave {name} at {NEUTRAL_OPTIONS[name][0]!r} (encode targets or pairs as "
                "separate calls)."
            )


class TransformersOptions:
    """Optional outputs of transformers' ``__call__`` and ``apply_chat_template`` for a number-aware tokenizer."""

    tokenizer: Any
    marker_token_id: int | None

    def _extras(self, data: dict, ids: list[list[int]], attention: Any, types: Any, special: bool, length: bool):
        """transformers' optional outputs, added to (or removed from) `data` in place."""
        as_tensor = isinstance(data["input_ids"], torch.Tensor)
        if attention is False:
            del data["attention_mask"]
        if types:
            data["token_type_ids"] = torch.zeros_like(data["input_ids"]) if as_tensor else [[0] * len(r) for r in ids]
        if special:
            ids_special = self._special_ids() - {self.marker_token_id}
            mask = [[int(i in ids_special) for i in row] for row in ids]
            data["special_tokens_mask"] = torch.tensor(mask, dtype=torch.long) if as_tensor else mask
        if length:
            lengths = [len(row) for row in ids]
            data["length"] = torch.tensor(lengths, dtype=torch.long) if as_tensor else lengths

    def apply_chat_template(
        self,
        conversation: Any,
        tools: Any = None,
        documents: Any = None,
        chat_template: str | None = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool = False,
        tokenize: bool = True,
        padding: bool | str = False,
        truncation: bool | str = False,
        max_length: int | None = None,
        return_tensors: str | None = None,
        return_dict: bool = True,
        return_assistant_tokens_mask: bool = False,
        tokenizer_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """The wrapped tokenizer's chat template, encoded by this tokenizer (numbers become [NUM] with their tensors).

        The template is rendered to text by the wrapped tokenizer (``tokenize=False``, with `tools`, `documents`,
        `chat_template`, `add_generation_prompt`, `continue_final_message` and `kwargs` for the template); the text
        is then encoded like ``self(text, add_special_tokens=False, ...)``, since the template writes its own special
        tokens. Returns the text when ``tokenize=False``; the `BatchEncoding` when ``return_dict=True``
        (transformers 5's default), else the ids.

        Raises:
            ValueError: ``return_assistant_tokens_mask=True`` (not supported).
        """
        if return_assistant_tokens_mask:
            raise ValueError("NumberTokenizer.apply_chat_template does not compute return_assistant_tokens_mask.")
        text = self.tokenizer.apply_chat_template(
            conversation, tools=tools, documents=documents, chat_template=chat_template,
            add_generation_prompt=add_generation_prompt, continue_final_message=continue_final_message,
            tokenize=False, **kwargs,
        )  # fmt: skip
        if not tokenize:
            return text
        options = dict(tokenizer_kwargs or {})
        options.setdefault("add_special_tokens", False)
        enc = self(text, padding=padding, truncation=truncation, max_length=max_length, return_tensors=return_tensors,
                   **options)  # fmt: skip
        return enc if return_dict else enc["input_ids"]
