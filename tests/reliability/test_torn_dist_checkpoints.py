"""Torn checkpoints in 2-process runs (issue 16, item 3): DDP and DeepSpeed ZeRO-2 / ZeRO-3 on CPU over gloo.

Each configuration is launched twice with ``torchrun --nproc_per_node 2`` (``torn_dist_run.py``): once killed with
SIGKILL while checkpoint-4 is written (torchrun then stops the other process), once resumed with
``resume_from_checkpoint=True``. The killed run is the uninterrupted reference up to that point: it trained steps
3 and 4 from the state of checkpoint-2 and recorded its losses and every trainable tensor at the end of step 4,
before the save. The resumed run must start from checkpoint-2 on both processes and reach the same losses and
tensors. ZeRO-2 (killed just before the rename) runs under ``pytest -m slow``; DDP and ZeRO-3 always run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from helpers.launching import ROOT, launch, tiny_base, torchrun
from helpers.paths import DIST_SCRIPTS
from reliability.torn_dist_run import KILL_STEP, MAX_STEPS

from numadapter.training.checkpoint_integrity import MANIFEST, checkpoint_problems

HERE = Path(__file__).resolve().parent
DEEPSPEED = ROOT / "recipes" / "accelerate" / "deepspeed"
ZERO3 = ["--deepspeed", str(DEEPSPEED / "zero3.json"), "--ds-set", '{"stage3_param_persistence_threshold": 0}']
CONFIGS = {  # name -> (script arguments, kill point: see torn_dist_run.py)
    "ddp": ([], "rng"),
    "zero3": (ZERO3, "deepspeed"),
    "zero2": (["--deepspeed", str(DEEPSPEED / "zero2.json")], "rename"),
}
MARKS = {"zero2": [pytest.mark.slow]}
PARAMS = [pytest.param(name, marks=[pytest.mark.distributed, *MARKS.get(name, [])]) for name in CONFIGS]
TIMEOUT_S = 420  # a launch takes 15-30 s here; the first DeepSpeed one may build DeepSpeed's shm op (1-3 min)


class Launches:
    """Each configuration's killed run, then its resumed run, launched once (lazily) into ``root/<name>``."""

    def __init__(self, root: Path) -> None:
        self.root, self.base = root, tiny_base(root)
        self.done: dict[tuple[str, str], Path] = {}

    def _launch(self, name: str, mode: list[str]) -> tuple[int, str]:
        if name != "ddp":
            pytest.importorskip("deepspeed", reason="DeepSpeed runs need: pip install 'numadapter[deepspeed]'")
        command = [*torchrun(2), str(HERE / "torn_dist_run.py"), "--base", str(self.base)]
        command += ["--out", str(self.root / name), *CONFIGS[name][0], *mode]
        return launch(command, TIMEOUT_S, paths=(DIST_SCRIPTS,))

    def killed(self, name: str) -> Path:
        if (name, "killed") not in self.done:
            returncode, output = self._launch(name, ["--kill", CONFIGS[name][1]])
            out = self.root / name
            marker = out / f"killed-rank{0 if CONFIGS[name][1] == 'rename' else 1}.txt"
            assert returncode != 0 and marker.is_file(), (returncode, output[-4000:])  # killed where it was meant to
            assert marker.read_text() == CONFIGS[name][1]
            self.done[name, "killed"] = out
        return self.done[name, "killed"]

    def resumed(self, name: str, prepare=None) -> Path:
        """The resumed run, after `prepare(run directory)` (called once, before it)."""
        if (name, "resumed") not in self.done:
            out = self.killed(name)
            if prepare is not None:
                prepare(out / "run")
            returncode, output = self._launch(name, ["--resume"])
            assert returncode == 0, output[-6000:]
            self.done[name, "resumed"] = out
        return self.done[name, "resumed"]


@pytest.fixture(scope="module")
def launches(tmp_path_factory) -> Launches:
    return Launches(tmp_path_factory.mktemp("torn-dist"))


def problems(checkpoint: Path, name: str) -> dict[int, list[str]]:
    """`checkpoint_problems` as each of the two processes of configuration `name` checks it."""
    deepspeed = name != "ddp"
    return {rank: checkpoint_problems(str(checkpoint), need_optimizer=not deepspeed, deepspeed=deepspeed, rank=rank)
            for rank in (0, 1)}  # fmt: skip


def record(out: Path, tag: str, rank: int) -> dict:
    return json.loads((out / f"{tag}-rank{rank}.json").read_text())


def staged(run: Path) -> list[Path]:
    return sorted(run.glob(f".checkpoint-{KILL_STEP}.partial-*"))


@pytest.mark.parametrize("name", PARAMS)
def test_a_process_killed_during_a_save_leaves_only_complete_checkpoints(launches, name):
    run = launches.killed(name) / "run"
    names = sorted(p.name for p in run.iterdir() if p.name.startswith(("checkpoint-", ".checkpoint-")))
    assert [n for n in names if n.startswith("checkpoint-")] == ["checkpoint-2"], names  # the torn one is hidden
    assert len(staged(run)) == 1, names
    partial, point = staged(run)[0], CONFIGS[name][1]
    # it really was torn where the kill point says (written by both processes into the same directory)
    if point == "rng":  # process 1 died before its RNG state; process 0 had written its own
        assert (partial / "rng_state_0.json").is_file() and not (partial / "rng_state_1.json").exists()
    elif point == "deepspeed":  # process 1 died before its optimizer partition; process 0 had written its own
        files = os.listdir(partial / f"global_step{KILL_STEP}")
        assert any("zero_pp_rank_0" in f and "optim" in f for f in files), files
        assert not any("zero_pp_rank_1" in f and "optim" in f for f in files), files
    else:  # killed just before the rename: complete, listed, and still hidden
        assert problems(partial, name) == {0: [], 1: []}
    assert problems(run / "checkpoint-2", name) == {0: [], 1: []}
    manifest = json.loads((run / "checkpoint-2" / MANIFEST).read_text())
    assert manifest["world_size"] == 2
    per_rank = ["rng_state_0.json", "rng_state_1.json"]
    if name != "ddp":
        per_rank += [f"global_step2/zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in (0, 1)]
    assert set(per_rank) <= set(manifest["files"]), sorted(manifest["files"])


def tear_visibly(run: Path) -> None:
    """Makes the hidden partial checkpoint-4 visible, as an in-place writer leaves it, with a trainer state: only
    process 1 can tell that it is incomplete (its optimizer partition is missing)."""
    (partial,) = staged(run)
    torn = run / f"checkpoint-{KILL_STEP}"
    partial.rename(torn)
    shutil.copy(run / "checkpoint-2" / "trainer_state.json", torn / "trainer_state.json")


PREPARE = {"zero3": tear_visibly}


@pytest.mark.parametrize("name", PARAMS)
def test_resumed_run_ends_like_the_uninterrupted_one(launches, name):
    from safetensors.torch import load_file

    out = launches.resumed(name, PREPARE.get(name))
    killed, resumed = record(out, "killed", 0), [record(out, "resumed", r) for r in (0, 1)]
    assert [r["start"] for r in resumed] == [2, 2]  # both processes resumed from checkpoint-2
    assert sorted(int(step) for step in killed["losses"]) == list(range(1, MAX_STEPS + 1))
    for step in range(3, MAX_STEPS + 1):  # trained again from checkpoint-2
        expected, got = killed["losses"][str(step)], resumed[0]["losses"][str(step)]
        assert abs(got - expected) <= 1e-6, (step, got, expected)
    reference = load_file(str(out / "killed-params.safetensors"))
    final = load_file(str(out / "resumed-params.safetensors"))
    assert sorted(final) == sorted(reference) and any("number_modules" in key for key in final)
    for key, value in reference.items():
        assert (final[key] - value).abs().max().item() <= 1e-6, key
    run = out / "run"
    assert problems(run / f"checkpoint-{KILL_STEP}", name) == {0: [], 1: []}  # saved again, whole
    if name in PREPARE:  # the torn checkpoint-4 was skipped by both processes, which said so alike
        warned = [r["warnings"] for r in resumed]
        assert warned[0] == warned[1] and len(warned[0]) == 1, warned
        torn, last = (re.escape(str(run / f"checkpoint-{step}")) for step in (KILL_STEP, 2))
        pattern = rf"skipping the incomplete checkpoint {torn} \(.*no optimizer partition of process 1.*\): "
        pattern += rf"resuming from {last}\."
        assert re.match(pattern, warned[0][0]), warned[0][0]
    else:
        assert resumed[0]["warnings"] == [] == resumed[1]["warnings"]
