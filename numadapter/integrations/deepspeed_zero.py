"""Parameters that may be DeepSpeed ZeRO-3 partitioned: their full shape, their identity, and gathering them.

docs/DESIGN.md, "ZeRO-3 safe". Under ZeRO-3 every parameter is *partitioned*: each rank keeps a slice in
``param.ds_tensor`` and the Parameter itself holds an empty tensor (``param.shape == (0,)``, ``param.numel() == 0``,
``data_ptr() == 0``) except while a module's forward runs (DeepSpeed gathers it) or inside
``deepspeed.zero.GatheredParameters``. This happens from the start when the base model is loaded under
``deepspeed.zero.Init`` (transformers does that in ``from_pretrained`` whenever a ZeRO-3 ``HfDeepSpeedConfig`` is
alive, e.g. after ``TrainingArguments(deepspeed=...)`` or with accelerate's ``zero3_init_flag: true``), and from
``deepspeed.initialize`` on otherwise.

DeepSpeed marks such a parameter with attributes numadapter reads instead of the tensor:

- ``ds_id``: a unique id per Parameter. Tied weights are one Parameter object, so they share it; two different
  partitioned Parameters have different ids although both have ``data_ptr() == 0`` and shape ``(0,)``.
- ``ds_shape``: the full shape.

Every helper here is a no-op (or reads the plain tensor) for an ordinary parameter; DeepSpeed is imported only when a
partitioned parameter is actually met, so nothing here needs it installed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import nn


def is_partitioned(param: torch.Tensor) -> bool:
    """Whether `param` is managed by DeepSpeed ZeRO-3 (it carries a ``ds_id``; its data may be empty)."""
    return hasattr(param, "ds_id")


def full_shape(param: torch.Tensor) -> torch.Size:
    """The shape of `param` as the model sees it: ``ds_shape`` for a ZeRO-3 parameter, else ``param.shape``."""
    shape = getattr(param, "ds_shape", None)
    return torch.Size(shape) if shape is not None else param.shape


def matrix_shape(weight: torch.Tensor, what: str) -> tuple[int, int]:
    """The full ``(rows, columns)`` of an embedding / linear weight, refusing a shape that is not one.

    A ZeRO-3 partition seen without its ``ds_shape`` (shape ``(0,)``) must never be read as "0 rows": that would
    record ``original_vocab_size = 0`` in the adapter config and break every later load.

    Args:
        weight: the weight ``[rows, columns]`` (possibly partitioned).
        what: what the weight is, for the error message (e.g. ``"the input embedding weight"``).

    Returns:
        ``(rows, columns)``, both >= 1.

    Raises:
        ValueError: the shape is not 2-D with both sizes >= 1; the message names the shape found and the fix.
    """
    shape = tuple(full_shape(weight))
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(
            f"{what} has shape {list(shape)}, expected [rows, columns] with both >= 1: the weight is empty (a "
            "DeepSpeed ZeRO-3 partition without `ds_shape`, or a model built without weights). Load the base model "
            "with its weights (under ZeRO-3 through transformers' from_pretrained, which records `ds_shape`)."
        )
    return int(shape[0]), int(shape[1])


def same_parameter(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two weights are tied: the same Parameter, the same ZeRO-3 ``ds_id``, or the same storage.

    Storage (``data_ptr()``, device and shape) is compared only for ordinary, non-empty tensors off the meta device:
    a partitioned or empty tensor has ``data_ptr() == 0`` like every other one, so storage says nothing about it.
    """
    if a is b:
        return True
    if is_partitioned(a) or is_partitioned(b):
        return is_partitioned(a) and is_partitioned(b) and a.ds_id == b.ds_id
    if a.device.type == "meta" or b.device.type == "meta" or a.numel() == 0 or b.numel() == 0:
        return False
    return a.device == b.device and a.data_ptr() == b.data_ptr() and a.shape == b.shape


@contextmanager
def gathered_parameters(
    params: nn.Module | Iterable[torch.Tensor], modifier_rank: int | None = None
) -> Iterator[None]:
    """Makes ZeRO-3 partitioned parameters whole inside the block (a no-op for ordinary parameters).

    Use it to read weights outside a forward pass (initialisation from an embedding row, saving, inspecting). Every
    rank must enter it (it is a collective). With ``modifier_rank=r``, the values rank r writes inside the block are
    broadcast and re-partitioned to every rank on exit; with None the block must only read.

    Args:
        params: a module (all its parameters) or an iterable of parameters.
        modifier_rank: the rank whose in-place changes are kept, or None for read-only access.
    """
    params = list(params.parameters()) if isinstance(params, nn.Module) else list(params)
    partitioned = [p for p in params if is_partitioned(p)]
    if not partitioned:
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(partitioned, modifier_rank=modifier_rank):
        yield


def partition_like(reference: torch.Tensor, params: Iterable[nn.Parameter]) -> None:
    """Partitions new ordinary `params` the way `reference` is (a no-op when `reference` is not ZeRO-3 managed).

    A Parameter created after ``zero.Init`` (e.g. a grown embedding) is ordinary: every rank would keep a full copy
    until ``deepspeed.initialize`` converts it. This converts it at once, through the same ``zero.Init`` that
    partitioned `reference`. Collective: call it on every rank with the same values (rank 0's are broadcast).

    Args:
        reference: a parameter of the model (partitioned or not).
        params: the new parameters (on every rank, same shapes).
    """
    if not is_partitioned(reference):
        return
    fresh = [p for p in params if not is_partitioned(p)]
    if fresh:
        reference.convert_to_zero_parameters(param_list=fresh)
