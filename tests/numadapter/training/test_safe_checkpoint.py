"""numadapter.training.safe_checkpoint: optimizer / scheduler / scaler / RNG state as safetensors + JSON, restored
exactly.

The trainer side (a checkpoint directory holds no pickle, resuming reads none and matches the uninterrupted run) is
tested in tests/numadapter/training/test_trainer.py
(test_resume_gives_the_same_losses_and_checkpoints_hold_number_modules).
"""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from numadapter.training.safe_checkpoint import SafeCheckpointMixin, has_state, load_state, save_state, state_paths


def same(a, b, path="state") -> None:
    """Exact structural equality: types, dtypes and values (NaN equals NaN)."""
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        if a.is_floating_point():  # NaN in the same places, equal values everywhere else
            nan = a.isnan()
            assert torch.equal(nan, b.isnan()) and torch.equal(a[~nan], b[~nan]), path
        else:
            assert torch.equal(a, b), path
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), path
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for key in a:
            same(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and a != a:
        assert b != b, path
    else:
        assert a == b, path


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"exp_avg": torch.tensor([1.0, 2.0])}, {"exp_avg": torch.tensor([1.0, 2.5])}),  # a changed value
        (torch.tensor([float("nan"), 1.0]), torch.tensor([1.0, float("nan")])),  # NaN moved
        (torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 2.0])),  # NaN kept, a value changed
        (torch.tensor([float("inf")]), torch.tensor([float("-inf")])),
        (torch.ones(2).bfloat16(), torch.ones(2).bfloat16() * 2),
        (torch.tensor([1, 2]), torch.tensor([1, 3])),
        (torch.ones(2), torch.ones(2, dtype=torch.float64)),
        (np.array([np.nan, 1.5]), np.array([np.nan, 2.5])),
        ([float("nan"), 0.1], [float("nan"), 0.2]),
    ],
)
def test_same_tells_changed_values_apart(a, b):
    """The comparison the round trips rely on fails on any changed value, NaN or not."""
    with pytest.raises(AssertionError):
        same(a, b)


def test_same_accepts_equal_states_with_nan():
    a = {"v": torch.tensor([float("nan"), 1.0, float("-inf")]), "w": [float("nan")], "n": np.array([np.nan, 1.5])}
    same(a, {"v": a["v"].clone(), "w": [float("nan")], "n": a["n"].copy()})


def test_round_trip_keeps_every_type(tmp_path):
    base = torch.arange(12, dtype=torch.float32)
    state = {
        "state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.randn(2, 3)}, 7: {"bf16": torch.ones(2).bfloat16()}},
        "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 7], "foreach": None, "fused": False}],
        "__looks_like_a_marker__": "kept",
        "floats": [float("inf"), float("-inf"), float("nan"), 0.1, -0.0],
        "big_int": 2**70,
        "views": {"slice": base[2:5], "strided": base[::3], "whole": base, "again": base},
        "bytes": torch.randint(0, 255, (16,), dtype=torch.uint8),
        "empty": torch.zeros(0, 3),
        "nested": ((1, (2, "x")), [None, True]),
        "numpy": (np.arange(6, dtype=np.uint32).reshape(2, 3), np.float64(2.5), np.int64(-3), np.array([np.nan, 1.5])),
    }
    save_state(state, str(tmp_path), "optimizer")
    assert has_state(str(tmp_path), "optimizer") and not has_state(str(tmp_path), "scheduler")
    same(state, load_state(str(tmp_path), "optimizer"))
    json_path, tensor_path = state_paths(str(tmp_path), "optimizer")
    assert json.loads(open(json_path).read())["format"] == "numadapter-state/1"
    assert open(tensor_path, "rb").read(8)  # a safetensors file (header length first), no pickle protocol byte
    assert not open(tensor_path, "rb").read().startswith(b"\x80")


def test_state_without_tensors_is_json_only(tmp_path):
    scheduler = {"base_lrs": [0.02], "last_epoch": 3, "_step_count": 4, "lr_lambdas": [{}], "_last_lr": [0.015]}
    save_state(scheduler, str(tmp_path), "scheduler")
    assert not (tmp_path / "scheduler.safetensors").exists()
    same(scheduler, load_state(str(tmp_path), "scheduler"))


def test_restored_optimizer_and_scheduler_continue_identically(tmp_path):
    torch.manual_seed(0)
    data = torch.randn(8, 4)

    def make():
        torch.manual_seed(1)
        model = torch.nn.Linear(4, 2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))
        return model, optimizer, scheduler

    def step(model, optimizer, scheduler):
        optimizer.zero_grad()
        model(data).pow(2).mean().backward()
        optimizer.step()
        scheduler.step()

    model, optimizer, scheduler = make()
    for _ in range(3):
        step(model, optimizer, scheduler)
    save_state(optimizer.state_dict(), str(tmp_path), "optimizer")
    save_state(scheduler.state_dict(), str(tmp_path), "scheduler")
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    step(model, optimizer, scheduler)

    other, other_optimizer, other_scheduler = make()
    other.load_state_dict(weights)
    other_optimizer.load_state_dict(load_state(str(tmp_path), "optimizer"))
    other_scheduler.load_state_dict(load_state(str(tmp_path), "scheduler"))
    step(other, other_optimizer, other_scheduler)
    for key, value in model.state_dict().items():
        assert torch.equal(other.state_dict()[key], value), key
    assert other_scheduler.get_last_lr() == scheduler.get_last_lr() == pytest.approx([0.1 / 5], rel=1e-12)


def test_rng_states_round_trip(tmp_path):
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    random.random(), np.random.standard_normal(), torch.rand(1)  # noqa: B018 (advance, cached gaussian set)
    states = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()}
    save_state(states, str(tmp_path), "rng_state")
    want = (random.random(), np.random.standard_normal(3).tolist(), torch.rand(3))
    loaded = load_state(str(tmp_path), "rng_state")
    random.setstate(loaded["python"])
    np.random.set_state(loaded["numpy"])
    torch.random.set_rng_state(loaded["cpu"])
    got = (random.random(), np.random.standard_normal(3).tolist(), torch.rand(3))
    assert got[:2] == want[:2] and torch.equal(got[2], want[2])


def test_unsupported_values_are_named(tmp_path):
    with pytest.raises(
        TypeError, match=r"optimizer\['state'\]\[0\]\['hook'\] is of type object.*save_only_model=True"
    ):
        save_state({"state": {0: {"hook": object()}}}, str(tmp_path), "optimizer")
    with pytest.raises(TypeError, match="numpy array of dtype <U1"):
        save_state({"names": np.array(["a"])}, str(tmp_path), "scaler")
    with pytest.raises(TypeError, match=r"key \(1, 2\) of type tuple"):
        save_state({(1, 2): 0}, str(tmp_path), "scaler")
    assert not has_state(str(tmp_path), "optimizer")  # nothing half-written


def test_foreign_json_is_refused(tmp_path):
    (tmp_path / "optimizer.json").write_text(json.dumps({"state": {}}))
    with pytest.raises(ValueError, match="not a numadapter checkpoint state file"):
        load_state(str(tmp_path), "optimizer")


class _TrainerStandIn:
    """What SafeCheckpointMixin falls back to (transformers' own methods), recorded instead of run."""

    def _save_scaler(self, output_dir):
        self.fallback = ("save", output_dir)

    def _load_scaler(self, checkpoint):
        self.fallback = ("load", checkpoint)


class _Scaled(SafeCheckpointMixin, _TrainerStandIn):
    def __init__(self, scaler) -> None:
        self.accelerator = SimpleNamespace(scaler=scaler)
        self.args = SimpleNamespace(should_save=True)
        self.fallback = None


def test_grad_scaler_state_is_saved_as_json(tmp_path):
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=3.0, growth_interval=7)
    _Scaled(scaler)._save_scaler(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scaler.json"]
    fresh = torch.amp.GradScaler("cpu")
    trainer = _Scaled(fresh)
    trainer._load_scaler(str(tmp_path))
    assert trainer.fallback is None
    assert (fresh.get_scale(), fresh.get_growth_factor(), fresh.get_growth_interval()) == (1024.0, 3.0, 7)
    none = _Scaled(None)  # no scaler (no fp16): transformers' method decides (it writes nothing)
    none._save_scaler(str(tmp_path / "other"))
    assert none.fallback == ("save", str(tmp_path / "other"))
    old = _Scaled(fresh)  # a checkpoint without scaler.json (a plain Trainer's scaler.pt): transformers loads it
    old._load_scaler(str(tmp_path / "other"))
    assert old.fallback == ("load", str(tmp_path / "other"))
