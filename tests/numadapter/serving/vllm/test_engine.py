"""The vLLM plugin's batch bookkeeping (`EngineNumbers.update`), checked without vLLM.

vLLM's ``BatchUpdate`` lists a slot as removed only when no added or moved request takes it over: a request
preempted in the same step as a new one lands in its slot is in no list but replaced. The request must still be
parked, so that it resumes with its numbers when vLLM adds it back with its output list (its [NUM]s' side rows are
kept by position; a request whose state was lost would be refused).
"""

from __future__ import annotations

from enum import Enum
from types import SimpleNamespace

import pytest
from helpers.adapter_cases import Store
from helpers.answers_cases import SUMS_ONLY
from helpers.generation_cases import copy_latest_number, number_writer

from numadapter.export import export_merged, load_exported
from numadapter.serving.vllm.engine import EngineNumbers
from numadapter.serving.vllm.served import ServedExport

Direction = Enum("MoveDirectionality", ["UNIDIRECTIONAL", "SWAP"])  # vLLM's names
GREEDY = SimpleNamespace(temperature=0.0, max_tokens=16)


def batch(removed=(), added=(), moved=()) -> SimpleNamespace:
    return SimpleNamespace(removed=list(removed), added=list(added), moved=list(moved))


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> EngineNumbers:
    store = Store(str(tmp_path_factory.mktemp("vllm_engine")))
    model, ntok = number_writer(store, copy_latest_number, False, **SUMS_ONLY)
    path = tmp_path_factory.mktemp("export")
    export_merged(model, ntok, str(path))
    exported, _ = load_exported(str(path))
    engine = EngineNumbers()
    engine.attach(ServedExport.load(path, exported.get_base_model().config), eos_id=0)
    return engine


def test_a_request_replaced_in_its_slot_resumes_with_its_state(engine):
    first, second = [], []  # vLLM's live output lists
    engine.update(batch(added=[(0, GREEDY, [5, 6], first)]))
    resumed = engine.requests[0]
    resumed.sides[9] = "side row"  # a [NUM] it wrote at position 9
    first.extend([7, 8])
    engine.update(batch(added=[(0, GREEDY, [1, 2], second)]))  # preempted: a new request takes slot 0
    assert engine.requests[0] is not resumed
    engine.update(batch(added=[(1, GREEDY, [5, 6], first)]))  # back, with its output list
    assert engine.requests[1] is resumed and resumed.side_at(9) == "side row"


def test_a_lost_request_is_refused_not_served_wrong(engine):
    engine.requests.clear()
    engine.parked.clear()
    with pytest.raises(RuntimeError, match="number state is lost"):
        engine.update(batch(added=[(0, GREEDY, [5, 6], [7, 8])]))  # outputs the plugin never followed


def test_moves_and_swaps_follow_the_requests(engine):
    engine.requests.clear()
    lists = [[], [], []]
    engine.update(batch(added=[(slot, GREEDY, [5 + slot], lists[slot]) for slot in range(3)]))
    a, b, c = (engine.requests[slot] for slot in range(3))
    engine.update(batch(removed=[0], moved=[(2, 0, Direction.UNIDIRECTIONAL)]))  # condensed: 2 -> 0
    assert engine.requests == {0: c, 1: b}
    engine.update(batch(moved=[(0, 1, Direction.SWAP)]))
    assert engine.requests == {0: b, 1: c}
    engine.update(batch(moved=[(1, 0, Direction.UNIDIRECTIONAL)]))  # c replaces b, which leaves (parked)
    assert engine.requests == {0: c} and any(parked is b for _, parked in engine.parked.values())
    assert a in [parked for _, parked in engine.parked.values()]
