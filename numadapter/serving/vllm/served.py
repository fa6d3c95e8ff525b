"""What the vLLM plugin serves of an export: its number config, number modules and tokenizer, and the modes refused.

The plugin serves the exports whose [NUM] the FoNE context head writes in answers mode (`fone_numbers="answers"`,
the default on a causal LM; the quick start's kind): every other number is a digit token that vLLM handles as any
model's. Modes whose state it cannot keep inside vLLM yet are refused by name when the engine loads the export,
never served wrong: xVal, digits with [AGG], ``fone_numbers="all"`` and the pointer head (its keys are read at every
prompt position, which prefix caching skips).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch

from numadapter.export import load_number_modules, read_number_config
from numadapter.methods.fone.answer_mode import answers_mode, head_left_out
from numadapter.tokenization.tokenizer import NumberTokenizer
from numadapter.tuner.number_modules import NumberModules, marker_token_id
from numadapter.tuner.side_buffer import NumberInputs

ELSEWHERE = (
    "Serve it with numadapter itself: numadapter.load_exported(DIR) and numadapter.generate, or transformers' "
    "pipeline('text-generation', model=DIR) after `import numadapter`."
)


class UnservedExportError(ValueError):
    """An export the vLLM plugin does not serve (yet); the message names the setting and where to serve it."""


def refusal(config: Any) -> str | None:
    """Why the plugin does not serve an export with `config` (a `NumberAdapterConfig`), or None when it does."""
    if config.task_type == "SEQ_2_SEQ_LM":
        return "an encoder-decoder (T5)"
    if not answers_mode(config):  # xVal, digits with [AGG], FoNE with every number a [NUM]
        settings = ", ".join(
            f"{name}={getattr(config, name, None)!r}" for name in ("encoding", "fone_numbers", "aggregate")
        )
        return f"{settings} (numbers written as [NUM] / [AGG] outside FoNE's answers mode)"
    if getattr(config, "fone_context_pointer", None):
        return "fone_context_pointer=True (the pointer head reads keys at prompt positions that prefix caching skips)"
    if head_left_out(config):
        return "fone_head_in_use=False (an unmarked export: plain vLLM serves it without the plugin)"
    return None


@dataclass
class ServedExport:
    """A number export as the plugin serves it.

    Attributes:
        path: the export directory.
        config: its `NumberAdapterConfig`.
        modules: its `NumberModules` (float32, eval mode, on the CPU).
        ntok: its `NumberTokenizer`.
        num_id: the [NUM] token id.
    """

    path: str
    config: Any
    modules: NumberModules
    ntok: NumberTokenizer
    num_id: int
    _texts: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | os.PathLike, model_config: Any) -> ServedExport:
        """Reads the export at `path` (`model_config`: its transformers config, as vLLM read it).

        Raises:
            UnservedExportError: a mode the plugin does not serve (named, with where to serve it instead).
        """
        path = os.fspath(path)
        config, _ = read_number_config(path)
        why = refusal(config)
        if why is not None:
            raise UnservedExportError(
                f"numadapter's vLLM plugin does not serve {path}: its adapter has {why}; the plugin serves FoNE "
                f"exports in answers mode (the default on a causal LM). {ELSEWHERE}"
            )
        modules = NumberModules(config, model_config.hidden_size, model_config)
        load_number_modules(path, config, modules)
        modules.eval().requires_grad_(False)
        ntok = NumberTokenizer.from_pretrained(path, config=config)
        return cls(path, config, modules, ntok, marker_token_id(config))

    def text_ids(self, text: str) -> list[int]:
        """The token ids of a number's text as the tokenizer writes it (cached): the digits the plugin writes
        after a [NUM], so that the served text shows the number (vLLM's text comes from token ids alone).

        Raises:
            RuntimeError: the ids do not decode back to `text` (the number would be shown wrong).
        """
        ids = self._texts.get(text)
        if ids is None:
            tokenizer = self.ntok.tokenizer
            ids = tokenizer.encode(text, add_special_tokens=False)
            back = tokenizer.decode(ids, skip_special_tokens=True)
            if back != text or not ids:
                raise RuntimeError(
                    f"numadapter's vLLM plugin: the tokenizer of {self.path} writes the number {text!r} as {ids} "
                    f"which reads back as {back!r}; the plugin cannot show it in the text."
                )
            self._texts[text] = ids
        return ids

    def embed(self, embeddings: torch.Tensor, sides: list[NumberInputs]) -> torch.Tensor:
        """The input embeddings ``[N, H]`` of N fed [NUM] tokens with their numbers' features added, as numadapter's
        forward adds them (`numadapter.tuner.forward_hooks`): `sides` holds each [NUM]'s ``[1, 1]`` side row."""
        mask = torch.cat([side.mask for side in sides], dim=1)  # (1, N)
        digits = torch.cat([side.digits for side in sides], dim=1)  # (1, N, P)
        sign = torch.cat([side.sign for side in sides], dim=1)  # (1, N)
        values = torch.cat([side.values for side in sides], dim=1)  # (1, N)
        mixed = self.modules.embedding(embeddings.float().unsqueeze(0), mask, digits, sign, values)  # (1, N, H)
        return mixed[0].to(embeddings.dtype)
