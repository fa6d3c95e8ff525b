"""The [NUM] / [AGG] embedding rows: PEFT trainable tokens, placed by tie detection, with a sparse forward.

The rows are PEFT trainable tokens (`NumberRowsWrapper` / `NumberTokenRows`, subclasses of PEFT's
`TrainableTokensWrapper` / `TrainableTokensLayer` with the same parameters and state-dict keys
``...embed_tokens.token_adapter.trainable_tokens_delta``, merge / unmerge / ``merge_and_unload`` as in PEFT), but
numadapter places them itself instead of through ``LoraConfig.trainable_token_indices``:

- PEFT decides ties from ``config.tie_word_embeddings``, which transformers 5 forces to True for every T5; it would
  tie a T5 v1.1 LM head (own weights) to the embedding rows. numadapter ties by storage (`patches.tied_group`):
  every module sharing the input embedding Parameter gets a *tied* wrapper (T5: ``encoder.embed_tokens``,
  ``decoder.embed_tokens`` and a tied ``lm_head``; Llama / Granite: a tied ``lm_head``); an untied LM head gets its
  own rows, so the model can learn to emit [NUM]. Extra tokens a user lists in ``trainable_token_indices`` (a list
  of ids) join the same rows.
- `NumberTokenRows` (the class of every such layer) computes the same result as PEFT's layer without materialising
  a merged ``[V, H]`` copy: the embedding output is replaced at the [NUM] positions, and the LM head's [NUM] logit
  columns get ``hidden @ (rows - originals).T`` added in place, where the base rows (``originals``) of new number
  tokens are zero (`zero_rows`), so the column is exactly ``hidden @ rows.T``. PEFT's version computes a full
  ``[V, H]`` weight gradient through the LM head every step (a second LM-head-sized matmul); this one only
  ``[K, H]``.

Initial values (`initial_rows`): the [NUM] row is the mean of the ten digit-token rows of the same matrix (input
embedding and, when untied, LM head), so [NUM] starts as "some digit" in both directions; without known digit ids
it is the mean of all original rows. The [AGG] row starts at zero (the digit-aggregation paper's aggregate is then
exactly the [AGG] input).

The EOS rows (config ``train_eos_row``, default True) join the same rows as an existing token (like a user id): they
start from the base's own rows, so the adapter is a no-op until trained. Why: LoRA freezes the LM head, and data
ends every answer with EOS. A base that never learned its EOS row (pretrained on text without EOS; a chat end token
unused in pretraining) puts ~0 mass on EOS whatever its hidden state, and no LoRA update can raise it. Training that
unreachable target after each answer's [NUM] drives the hidden state at every [NUM] to one fixed point with the
flattest reachable distribution: after any number, in any context, the same near-uniform next-token distribution,
while the EOS cross-entropy stays high. `tests/numadapter/tuner/test_token_rows.py` reproduces it and shows the fix.

ZeRO-3 (docs/DESIGN.md, "ZeRO-3 safe"): the base weight may be partitioned (empty) here, when the base was loaded under
``zero.Init``. Every read of it (initial values, PEFT's originals) and the zeroing of the number rows run under
`numadapter.integrations.deepspeed_zero.gathered_parameters`; the new row parameters are ordinary and DeepSpeed
partitions them when its engine starts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from peft.tuners.trainable_tokens.layer import TrainableTokensLayer
from peft.utils.other import TrainableTokensWrapper, _set_trainable
from torch import nn

from numadapter.integrations.deepspeed_zero import full_shape, gathered_parameters


class NumberTokenRows(TrainableTokensLayer):
    """`TrainableTokensLayer` with a sparse forward (same parameters, state dict, merge and unmerge).

    Embedding: ``out = base(x)``, then rows where ``x`` is a trained token id are replaced by the trained rows.
    Linear (LM head): ``out = base(x)``; ``out[..., ids] += x @ (rows - originals).T``, where ``originals`` are the
    base rows at wrapping time. numadapter zeroes the base rows of the number tokens before wrapping, so for them this
    is exactly the replacement ``x @ rows.T``; for extra user tokens (``trainable_token_indices``) it equals it up to
    rounding. The in-place add passes the logits gradient through without a copy.
    """

    def update_layer(self, adapter_name, config=None, tied_adapter=None, **kwargs) -> None:
        """PEFT's ``update_layer``, with the base weight gathered under ZeRO-3 while the original rows are read."""
        if tied_adapter is not None:  # a tied layer reads nothing: it shares the source's rows
            return super().update_layer(adapter_name, config, tied_adapter=tied_adapter, **kwargs)
        with gathered_parameters([self.get_base_layer().weight], modifier_rank=None):
            super().update_layer(adapter_name, config, tied_adapter=tied_adapter, **kwargs)

    def _collect_token_weights(self, weight: torch.Tensor, rows: list[int], embed_dim: int) -> torch.Tensor:
        """The original rows ``[K, H]`` under ZeRO-3 (PEFT's own version allocates on CUDA and fails on CPU).

        `update_layer` has gathered `weight`, so every rank reads the same rows; no broadcast is needed.
        """
        return weight.data[rows].detach().clone()

    def _index(self, adapter_name: str, device: torch.device) -> torch.Tensor:
        cache = self.__dict__.setdefault("_numadapter_index", {})
        key = (adapter_name, str(device))
        if key not in cache:
            cache[key] = torch.tensor(self.token_indices[adapter_name], dtype=torch.long, device=device)
        return cache[key]

    def forward_adapters(self, x: torch.Tensor, active_adapters, *args, **kwargs) -> torch.Tensor:
        base = self.base_layer
        if (
            self.disable_adapters
            or not active_adapters
            or self.merged
            or not isinstance(base, (nn.Embedding, nn.Linear))
        ):
            return super().forward_adapters(x, active_adapters, *args, **kwargs)
        self._check_overlapping_tokens(active_adapters)
        result = base(x, *args, **kwargs)
        for name in active_adapters:
            if name not in self.trainable_tokens_delta:
                continue
            rows = self.trainable_tokens_delta[name]  # (K, H)
            index = self._index(name, result.device)  # (K,)
            if isinstance(base, nn.Embedding):
                hit = x.unsqueeze(-1) == index  # (..., K)
                which = hit.to(torch.long).argmax(-1)  # (...)
                values = F.embedding(which, rows).to(result.dtype)  # (..., H)
                scale = self._get_embed_scale()
                if scale is not None:
                    values = values * scale.to(values.dtype)
                result = torch.where(hit.any(-1, keepdim=True), values, result)
            else:  # base columns are x @ originals.T (zero for new tokens): add x @ (rows - originals).T
                change = rows.float() - self.trainable_tokens_original[name].float()  # (K, H); exact when zero
                cols = F.linear(x, change.to(x.dtype))  # (..., K)
                result.index_add_(-1, index, cols.to(result.dtype))
        return result


@torch.no_grad()
def zero_rows(weight: torch.Tensor, ids: list[int]) -> None:
    """Sets rows `ids` of a base weight to zero (the trained rows replace them; see `NumberTokenRows`)."""
    if not ids or weight.device.type == "meta":
        return
    with gathered_parameters([weight], modifier_rank=0):
        weight.data[ids] = 0


@torch.no_grad()
def initial_rows(
    weight: torch.Tensor, ids: list[int], num_token_id: int | None, digit_ids: list[int] | None, original_rows: int
) -> torch.Tensor:
    """Initial values ``[K, H]`` (float32) of the trained rows `ids` of `weight` (see the module docstring).

    Under ZeRO-3 the weight is gathered for the read (every rank enters; all get the same values).
    """
    hidden = full_shape(weight)[1]
    if weight.device.type == "meta":
        return torch.zeros(len(ids), hidden, device="meta")
    with gathered_parameters([weight], modifier_rank=None):
        if digit_ids is not None:
            reference = weight.data[digit_ids].float().mean(0)  # (H,)
        else:
            reference = weight.data[:original_rows].float().mean(0)  # (H,)
    out = torch.zeros(len(ids), hidden, dtype=torch.float32, device=weight.device)
    for k, token_id in enumerate(ids):
        if token_id == num_token_id:
            out[k] = reference
    return out


class NumberRowsWrapper(TrainableTokensWrapper):
    """PEFT's `TrainableTokensWrapper` holding a `NumberTokenRows` from the start (PEFT builds its own layer class,
    whose ZeRO-3 read of the original rows only works on CUDA)."""

    def init_modules(self, adapter_name: str, token_indices: list[int], tied_adapter) -> None:
        self.token_adapter = NumberTokenRows(self.original_module, adapter_name, token_indices, tied_adapter)


def wrap_number_rows(
    model: nn.Module,
    adapter_name: str,
    ids: list[int],
    tied: list[str],
    untied_output: str | None,
    inference_mode: bool,
    activate: bool,
) -> list[TrainableTokensWrapper]:
    """Wraps the modules holding the number rows with PEFT trainable tokens (or adds `adapter_name` to them).

    Args:
        model: the transformers model (inside the tuner).
        adapter_name: the adapter.
        ids: the token ids whose rows are trained.
        tied: qualified names of the modules sharing the input embedding weight, the input embedding first.
        untied_output: the output embedding's name when it has its own weight, else None.
        inference_mode: freeze the rows.
        activate: make `adapter_name` active on the wrappers.

    Returns:
        The source wrappers holding trainable rows: the input embedding's, then the untied LM head's if any.
    """
    common = dict(inference_mode=inference_mode, strict_module_check=True, wrapper_cls=NumberRowsWrapper)
    _set_trainable(model, adapter_name, [tied[0]], token_indices=ids, activate_adapter=activate, **common)
    source = model.get_submodule(tied[0])
    for name in tied[1:]:
        _set_trainable(
            model,
            adapter_name,
            [name],
            token_indices=ids,
            tied_adapter=source.token_adapter,
            activate_adapter=activate,
            **common,
        )
    sources = [source]
    if untied_output is not None:
        _set_trainable(model, adapter_name, [untied_output], token_indices=ids, activate_adapter=activate, **common)
        sources.append(model.get_submodule(untied_output))
    return sources
