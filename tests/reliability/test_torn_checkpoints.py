"""Torn checkpoints (issue 16, item 3): atomic checkpoint writing, and resuming that skips or refuses an incomplete
checkpoint. A subprocess is killed with SIGKILL at chosen points of a save; resuming then matches an uninterrupted
run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from helpers.paths import ROOT, TESTS
from reliability.torn_run import KILL_STEP, MAX_STEPS, losses, trainer

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def paths(store):
    store.tokenizer("digits")
    return store._tokenizers["digits"], store.base_path("llama", False)


POINTS = ("optimizer", "rename")


@pytest.fixture(scope="module")
def launched(paths, tmp_path_factory) -> Iterator[dict[str, tuple[str, subprocess.Popen]]]:
    """Point -> (run directory, process) of a run that kills itself with SIGKILL at that point of writing
    checkpoint-4; started at once, so they run while the reference run trains."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS), HERE]), HF_HUB_OFFLINE="1")
    runs = {}
    for point in POINTS:
        out = str(tmp_path_factory.mktemp(f"killed-{point}") / "out")
        command = [sys.executable, os.path.join(HERE, "torn_run.py"), *paths, out, point]
        pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        runs[point] = (out, subprocess.Popen(command, **pipes))
    yield runs
    for _, process in runs.values():
        if process.poll() is None:
            process.kill()


@pytest.fixture(scope="module")
def reference(paths, launched, tmp_path_factory):
    """``(losses, run_dir)`` of an uninterrupted run (checkpoints at steps 2 and 4)."""
    out = str(tmp_path_factory.mktemp("reference") / "out")
    run = trainer(*paths, out)
    run.train()
    return losses(run), out


@pytest.fixture(scope="module")
def killed(launched) -> dict[str, str]:
    """Point -> run directory, once each killed run has ended (by SIGKILL, checked)."""
    for point, (_, process) in launched.items():
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == -signal.SIGKILL, (point, process.returncode, stdout[-2000:], stderr[-3000:])
    return {point: out for point, (out, _) in launched.items()}


@pytest.mark.parametrize("point", POINTS)
def test_killed_during_a_save_resumes_like_an_uninterrupted_run(paths, reference, killed, point):
    out = killed[point]
    names = sorted(os.listdir(out))
    assert "checkpoint-2" in names and f"checkpoint-{KILL_STEP}" not in names, names  # the torn one is hidden
    assert [n for n in names if n.startswith(f".checkpoint-{KILL_STEP}.partial-")], names
    os.makedirs(os.path.join(out, ".checkpoint-notes"))  # another hidden directory: not a staging one, kept
    run = trainer(*paths, out)
    run.train(resume_from_checkpoint=True)
    resumed, (expected, _) = losses(run), reference
    assert sorted(resumed) == list(range(1, MAX_STEPS + 1))
    for step in range(3, MAX_STEPS + 1):  # trained again from checkpoint-2
        assert abs(resumed[step] - expected[step]) <= 1e-6, (step, resumed[step], expected[step])
    assert os.path.isfile(os.path.join(out, f"checkpoint-{KILL_STEP}", "trainer_state.json"))
    assert not [n for n in os.listdir(out) if ".partial-" in n]  # the killed save's staging directory is gone
    assert os.path.isdir(os.path.join(out, ".checkpoint-notes"))


def torn_copy(reference, tmp_path, damage) -> str:
    """A copy of the reference run whose checkpoint-4 is torn in place (as a plain Trainer leaves it)."""
    out = str(tmp_path / "out")
    shutil.copytree(reference[1], out)
    damage(os.path.join(out, f"checkpoint-{KILL_STEP}"))
    return out


def truncate(path: str) -> None:
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])


DAMAGES = {
    "no-trainer-state": (lambda d: os.remove(os.path.join(d, "trainer_state.json")), "trainer_state.json is missing"),
    "no-optimizer": (lambda d: [os.remove(os.path.join(d, n)) for n in os.listdir(d) if n.startswith("optimizer")],
                     "no optimizer state"),
    "truncated-adapter": (lambda d: truncate(os.path.join(d, "adapter_model.safetensors")),
                          "adapter_model.safetensors is damaged"),
    "truncated-json": (lambda d: truncate(os.path.join(d, "scheduler.json")), "scheduler.json is not valid JSON"),
    # only the file list (numadapter_checkpoint.json) tells that these are gone
    "no-rng-state": (lambda d: [os.remove(os.path.join(d, n)) for n in os.listdir(d) if n.startswith("rng_state")],
                     "rng_state.json is missing \\(listed in numadapter_checkpoint.json\\)"),
}  # fmt: skip


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_resume_true_skips_a_torn_checkpoint_and_says_so(paths, reference, tmp_path, damage):
    action, problem = DAMAGES[damage]
    out = torn_copy(reference, tmp_path, action)
    run = trainer(*paths, out)
    with pytest.warns(
        UserWarning,
        match=rf"skipping the incomplete checkpoint .*checkpoint-4 \({problem}.*resuming from .*checkpoint-2",
    ):
        run.train(resume_from_checkpoint=True)
    resumed, expected = losses(run), reference[0]
    assert abs(resumed[MAX_STEPS] - expected[MAX_STEPS]) <= 1e-6


def test_resume_from_a_torn_checkpoint_path_names_the_last_complete_one(paths, reference, tmp_path):
    out = torn_copy(reference, tmp_path, DAMAGES["no-trainer-state"][0])
    run = trainer(*paths, out)
    torn = os.path.join(out, "checkpoint-4")
    with pytest.raises(ValueError, match=rf"the checkpoint {torn} is incomplete .* trainer_state.json is missing"):
        run.train(resume_from_checkpoint=torn)
    with pytest.raises(ValueError, match=r"Resume from the last complete checkpoint \(.*checkpoint-2\)"):
        run.train(resume_from_checkpoint=torn)


def test_no_complete_checkpoint_is_refused(paths, reference, tmp_path):
    out = torn_copy(reference, tmp_path, DAMAGES["no-trainer-state"][0])
    shutil.rmtree(os.path.join(out, "checkpoint-2"))
    run = trainer(*paths, out)
    with pytest.raises(ValueError, match=r"no complete checkpoint in .*checkpoint-4 are incomplete"):
        run.train(resume_from_checkpoint=True)


def test_rotation_and_best_checkpoint_work_with_atomic_saves(paths, tmp_path):
    import json

    out = str(tmp_path / "out")
    run = trainer(*paths, out)
    run.args.eval_strategy, run.args.eval_steps, run.args.save_total_limit = "steps", 2, 1
    run.args.load_best_model_at_end, run.args.metric_for_best_model = True, "eval_loss"
    run.eval_dataset = run.train_dataset
    run.train()
    best = run.state.best_model_checkpoint
    assert best == os.path.join(out, f"checkpoint-{run.state.best_global_step}") and os.path.isdir(best)
    kept = {n for n in os.listdir(out) if n.startswith(("checkpoint-", ".checkpoint-"))}
    assert kept == {f"checkpoint-{MAX_STEPS}", os.path.basename(best)}  # limit 1, the best one protected
    saved = json.load(open(os.path.join(out, f"checkpoint-{MAX_STEPS}", "trainer_state.json")))
    assert saved["best_model_checkpoint"] == best


def test_deepspeed_part_of_a_checkpoint_is_checked(tmp_path):
    """DeepSpeed's files (written by every process): `latest`, the tag directory, each process's optimizer partition
    and whole torch.save archives."""
    import torch

    from numadapter.training.checkpoint_integrity import deepspeed_problems

    tag = tmp_path / "global_step4"
    tag.mkdir()
    torch.save({"module": torch.zeros(64)}, tag / "mp_rank_00_model_states.pt")
    torch.save({"state": torch.zeros(64)}, tag / "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    assert deepspeed_problems(str(tmp_path), required=True) == [
        "DeepSpeed's `latest` file is missing (DeepSpeed writes it after every process's state)"
    ]
    (tmp_path / "latest").write_text("global_step6")
    assert deepspeed_problems(str(tmp_path), required=True) == [
        "DeepSpeed's `latest` names global_step6/, which is missing"
    ]
    (tmp_path / "latest").write_text("global_step4")
    assert deepspeed_problems(str(tmp_path), required=True, rank=0) == []
    assert deepspeed_problems(str(tmp_path), required=True, rank=1) == [
        "global_step4/ holds no optimizer partition of process 1 (zero_pp_rank_1_*optim_states)"
    ]
    truncate(str(tag / "mp_rank_00_model_states.pt"))
    assert deepspeed_problems(str(tmp_path), required=True, rank=0) == [
        "global_step4/mp_rank_00_model_states.pt is damaged: it is a truncated torch.save archive"
    ]
    empty = tmp_path / "plain"
    empty.mkdir()
    assert deepspeed_problems(str(empty), required=False) == []  # not a DeepSpeed checkpoint, none asked for
