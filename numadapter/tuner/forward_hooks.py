"""The hooks one forward call installs (and removes afterwards, also on exceptions).

- T5 only: forward pre-hooks on ``encoder`` / ``decoder`` set the buffer's current side, forward hooks
  (``always_call``) reset it, so the shared embedding knows whose number tensors apply.
- A forward hook on each embedding call site (`patches.embedding_call_sites`) adds the number features to the rows
  the side marks: only those N rows go through the number module, the others are the embedding's output bit-exactly.
  It also reads the raw digit-token rows when the [AGG] aggregate or its loss needs them (a module call, so
  DeepSpeed ZeRO-3 gathers the weight).
- A forward pre-hook on the LM head stores its input, the hidden state the number head reads.
- `whole_hidden`: with the pointer head (``fone_context_pointer``), a forward hook on the decoder keeps its output at
  every position (the LM head may see only the last, ``logits_to_keep``): each number's key is read there.

Hooks live only for the duration of `NumberAdapterModel.forward`: a deep copy of the model carries none, and calling
the base model directly behaves exactly like a LoRA model.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import torch
from torch import nn

from numadapter.tuner.number_modules import NumberModules
from numadapter.tuner.patches import Architecture, embedding_call_sites, innermost, output_module, side_scopes
from numadapter.tuner.side_buffer import SideBuffer


def _enter_side(buffer: SideBuffer, side: str, module: nn.Module, args: tuple) -> None:
    buffer.current = side


def _leave_side(buffer: SideBuffer, module: nn.Module, args: tuple, output: object) -> None:
    buffer.current = None


def _capture_hidden(buffer: SideBuffer, module: nn.Module, args: tuple) -> None:
    if buffer.armed and args:
        buffer.hidden = args[0]


def _embed(
    buffer: SideBuffer,
    modules: NumberModules,
    digit_ids: list[int] | None,
    want_digit_rows: bool,
    module: nn.Module,
    args: tuple,
    output: torch.Tensor,
) -> torch.Tensor | None:
    if not buffer.armed:
        return None
    ids = args[0] if args else None
    if want_digit_rows and buffer.digit_embeddings is None and ids is not None:
        index = torch.tensor(digit_ids, dtype=torch.long, device=ids.device)
        buffer.digit_embeddings = innermost(module)(index)  # (10, H), raw rows
    inputs = buffer.inputs_for_current()
    if inputs is None or modules.embedding is None:
        return None
    if ids is None or tuple(ids.shape) != inputs.shape:
        got = None if ids is None else tuple(ids.shape)
        raise RuntimeError(
            f"the {buffer.current!r} embedding was called with ids of shape {got}, but its number tensors have shape "
            f"{inputs.shape}: the model sliced or re-ordered its input ids, which numadapter cannot follow."
        )
    extra = {"digit_embeddings": buffer.digit_embeddings} if modules.needs_digit_embeddings else {}
    if inputs.index is None:  # armed by a caller that did not locate the numbers (costs a host sync)
        inputs.index = (inputs.mask != 0).nonzero(as_tuple=True)
    b, t = inputs.index  # only the N number rows go through the number module

    def rows(tensor: torch.Tensor | None) -> torch.Tensor | None:
        return None if tensor is None else tensor[b, t].unsqueeze(0)  # (1, N, ...)

    mixed = modules.embedding(
        rows(output), rows(inputs.mask), rows(inputs.digits), rows(inputs.sign), rows(inputs.values), **extra
    )  # (1, N, H); fmt: skip
    return output.index_put((b, t), mixed[0])  # (B, T, H): the other rows are the embedding's, bit-exactly


@contextmanager
def number_hooks(
    model: nn.Module,
    arch: Architecture,
    buffer: SideBuffer,
    modules: NumberModules,
    capture_hidden: bool,
    digit_ids: list[int] | None,
    want_digit_rows: bool,
) -> Iterator[None]:
    """Installs the hooks of one forward call on `model` and removes them on exit.

    Args:
        model: the transformers model.
        arch: its `Architecture`.
        buffer: the armed side buffer.
        modules: the active adapter's number modules.
        capture_hidden: store the LM head input in ``buffer.hidden``.
        digit_ids: the digit token ids (for `want_digit_rows`).
        want_digit_rows: store the raw digit-token embeddings in ``buffer.digit_embeddings``.
    """
    handles = []
    try:
        for side, scope in side_scopes(model, arch):
            handles.append(scope.register_forward_pre_hook(partial(_enter_side, buffer, side)))
            handles.append(scope.register_forward_hook(partial(_leave_side, buffer), always_call=True))
        if modules.embedding is not None or want_digit_rows:
            hook = partial(_embed, buffer, modules, digit_ids, want_digit_rows)
            for site in embedding_call_sites(model, arch):
                handles.append(site.register_forward_hook(hook))
        if capture_hidden:
            handles.append(output_module(model).register_forward_pre_hook(partial(_capture_hidden, buffer)))
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def whole_hidden(model: nn.Module, wanted: bool) -> Iterator[list[torch.Tensor]]:
    """Keeps the decoder's output ``[B, T, H]`` (the LM head's input at every position) of the calls in the block.

    Args:
        model: the transformers causal LM (or a wrapper that forwards ``get_decoder``).
        wanted: False: nothing is hooked and the list stays empty.

    Yields:
        The list the outputs are appended to, one per decoder call.
    """
    kept: list[torch.Tensor] = []
    if not wanted:
        yield kept
        return

    def keep(module: nn.Module, args: tuple, output: object) -> None:
        kept.append(output[0] if isinstance(output, tuple) else output.last_hidden_state)

    handle = model.get_decoder().register_forward_hook(keep)
    try:
        yield kept
    finally:
        handle.remove()
