"""The plugin's state in one vLLM worker: the served export and a `NumberRequest` per slot of vLLM's batch.

The model (`numadapter.serving.vllm.model`) and the logits processor (`numadapter.serving.vllm.processor`) run in
the same worker process and meet here, in `ENGINE`:

1. the processor's ``update_state`` keeps `requests` in step with vLLM's persistent batch (its rows are the batch's
   slots: added, removed, moved);
2. the model's forward reads, from vLLM's attention metadata, each slot's token span and sequence length
   (`locate`), and gives every fed [NUM] its number's features (`embed`): the side row its request recorded at that
   position;
3. ``compute_logits`` keeps the LM-head input of the sampled rows (`keep_hidden`), one row per slot;
4. the processor's ``apply`` forces each slot's next token (`force`): the one its `NumberRequest` chooses, on
   the rows that vLLM samples for real (a chunk of a prompt that is not its last is sampled and discarded by vLLM,
   and skipped here: its slot's sequence is not yet as long as the request).
"""

from __future__ import annotations

import bisect
import logging
import math
from collections import OrderedDict
from typing import Any

import torch

from numadapter.serving.vllm.requests import NumberRequest
from numadapter.serving.vllm.served import ServedExport

logger = logging.getLogger(__name__)

PARKED = 4096  # requests removed from the batch (preempted) kept for their return, most recent first


class EngineNumbers:
    """The served export and the number state of the requests in vLLM's batch (one per worker process)."""

    def __init__(self) -> None:
        self.served: ServedExport | None = None
        self.eos_id: int | None = None
        self.requests: dict[int, NumberRequest] = {}  # batch slot -> request
        self.parked: OrderedDict[int, tuple[list[int], NumberRequest]] = OrderedDict()
        self.hidden: torch.Tensor | None = None  # (R, H) the LM-head input of the sampled rows
        self.starts: list[int] | None = None  # per slot, where its tokens start in the forward (and the end)
        self.lengths: list[int] | None = None  # per slot, the sequence length after the forward

    def attach(self, served: ServedExport, eos_id: int | None) -> None:
        self.served, self.eos_id = served, eos_id
        self.requests.clear()
        self.parked.clear()

    # -- the batch (logits processor's update_state) ----------------------------------------------------------
    def update(self, batch_update: Any) -> None:
        """Follows vLLM's ``BatchUpdate``: removed, then added, then moved slots. A request leaving the batch is
        parked (a preempted one comes back with its output list); vLLM lists a slot as removed only when no added or
        moved request takes it over, so a request replaced in its slot leaves the batch too."""
        if self.served is None:
            return
        for slot in batch_update.removed:
            self._leave(slot)
        for slot, params, prompt_ids, output_ids in batch_update.added:
            self._leave(slot)
            self.requests[slot] = self._request(params, prompt_ids or [], output_ids)
        for first, second, direction in batch_update.moved:
            a = self.requests.pop(first, None)
            if direction.name == "SWAP":  # vLLM's MoveDirectionality (else UNIDIRECTIONAL)
                b = self.requests.pop(second, None)
                if b is not None:
                    self.requests[first] = b
            else:
                self._leave(second)
            if a is not None:
                self.requests[second] = a

    def _leave(self, slot: int) -> None:
        """The request in `slot` (if any) leaves the batch: parked for its return."""
        request = self.requests.pop(slot, None)
        if request is not None:
            self._park(request)

    def _park(self, request: NumberRequest) -> None:
        key = id(request.output_ids)
        self.parked[key] = (request.output_ids, request)
        self.parked.move_to_end(key)
        while len(self.parked) > PARKED:
            self.parked.popitem(last=False)

    def _request(self, params: Any, prompt_ids: list[int], output_ids: list[int]) -> NumberRequest:
        """A new request, or a preempted one coming back with the tokens it was forced so far."""
        parked = self.parked.pop(id(output_ids), None)
        if parked is not None and parked[0] is output_ids:
            return parked[1]
        if output_ids:
            raise RuntimeError(
                "numadapter's vLLM plugin: a request came back to the batch with generated tokens the plugin did not "
                "follow (its number state is lost); numbers would be written wrong. Serve with fewer concurrent "
                "requests (--max-num-seqs) or more KV cache so that requests are not preempted."
            )
        assert self.served is not None
        request = NumberRequest(self.served, prompt_ids, params, self.eos_id)
        request.output_ids = output_ids
        if request.refused:
            logger.error(
                "numadapter: a prompt holds the [NUM] token (id %d) itself; only the numbers the head writes are "
                "[NUM]s. The request is ended without an answer: write the prompt's numbers in digits.",
                self.served.num_id,
            )
        return request

    # -- the forward (model) -----------------------------------------------------------------------------------
    def locate(self) -> None:
        """Reads each slot's token span and sequence length of the current forward from vLLM's attention metadata."""
        from vllm.forward_context import get_forward_context, is_forward_context_available

        self.starts = self.lengths = None
        if not is_forward_context_available():
            return
        metadata = get_forward_context().attn_metadata
        if isinstance(metadata, list):
            metadata = metadata[0] if metadata else None
        if not metadata:
            return
        first = next(iter(metadata.values())) if isinstance(metadata, dict) else metadata
        starts = getattr(first, "query_start_loc", None)
        lengths = getattr(first, "seq_lens", None)
        if starts is None or lengths is None:
            return
        count = lengths.shape[0]
        self.starts = starts[: count + 1].tolist()
        self.lengths = lengths[:count].tolist()

    def embed(self, embeddings: torch.Tensor, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``embeddings [N, H]`` with the features of the number of every fed [NUM] added.

        Raises:
            RuntimeError: a [NUM] the plugin did not write (it cannot be given a number), outside a refused prompt.
        """
        served = self.served
        if served is None:
            return embeddings
        where = (input_ids == served.num_id).nonzero().flatten().tolist()
        if not where:
            return embeddings
        if self.starts is None:
            raise RuntimeError("numadapter's vLLM plugin: a [NUM] was fed, but vLLM gave no attention metadata.")
        rows, sides = [], []
        for index in where:
            slot = bisect.bisect_right(self.starts, index) - 1
            request = self.requests.get(slot)
            if request is not None and request.refused:
                continue
            position = int(positions[index])
            side = request.side_at(position) if request is not None else None
            if side is None:
                raise RuntimeError(
                    f"numadapter's vLLM plugin: the [NUM] fed at position {position} (batch slot {slot}) is none that "
                    "the plugin wrote, so it has no number."
                )
            rows.append(index)
            sides.append(side)
        if not rows:
            return embeddings
        index = torch.tensor(rows, dtype=torch.long, device=embeddings.device)
        return embeddings.index_copy(0, index, served.embed(embeddings[index], sides))

    def keep_hidden(self, hidden: torch.Tensor) -> None:
        """Keeps the LM-head input ``[R, H]`` of the rows vLLM samples (one per slot, in slot order)."""
        self.hidden = hidden

    # -- sampling (logits processor's apply) -------------------------------------------------------------------
    def force(self, logits: torch.Tensor) -> torch.Tensor:
        """`logits` ``[R, V]`` with each sampled slot's chosen token forced (-inf everywhere else)."""
        if self.served is None or not self.requests:
            return logits
        hidden, self.hidden = self.hidden, None
        if hidden is None or hidden.shape[0] != logits.shape[0]:
            raise RuntimeError(
                "numadapter's vLLM plugin: the logits to sample do not come with the LM-head input of the same rows "
                f"({None if hidden is None else hidden.shape[0]} against {logits.shape[0]}); speculative decoding "
                "and pipeline parallelism are not supported."
            )
        for slot, request in self.requests.items():
            if slot >= logits.shape[0]:
                continue
            if self.lengths is not None and self.lengths[slot] != request.length:
                continue  # a chunk of the prompt that is not its last: vLLM discards this sample
            token = request.next_token(logits[slot], hidden[slot])
            row = torch.full_like(logits[slot], -math.inf)
            row[token] = 0.0
            logits[slot] = row
        return logits


ENGINE = EngineNumbers()
