"""Launching 2-process jobs with torchrun from the tests (`tests/numadapter/integrations/test_distributed.py`,
`tests/reliability/test_torn_dist_checkpoints.py`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from helpers.paths import ROOT


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def torchrun(nproc: int = 2) -> list[str]:
    """The start of a ``torch.distributed.run`` command line on this machine, on a free port."""
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_addr",
            "127.0.0.1", "--master_port", str(free_port())]  # fmt: skip


def launch(command: list[str], timeout: float, paths: tuple[str | os.PathLike, ...] = ()) -> tuple[int, str]:
    """Runs `command` from the repository root with one thread per process and the repository (and `paths`) on
    PYTHONPATH; returns ``(exit code, stdout + stderr)``.

    Raises:
        AssertionError: it ran over `timeout` seconds (its whole process group is killed first).
    """
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *map(str, paths), env.get("PYTHONPATH", "")])
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    # a session of its own, so that a timeout stops torchrun's workers too
    proc = subprocess.Popen(command, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        raise AssertionError(f"{' '.join(command)} ran over {timeout} s:\n{output[-4000:]}") from None
    return proc.returncode, output


def failure(command: list[str], returncode: int, output: str) -> AssertionError:
    """An error for a launch that failed: its exceptions and native aborts, once each, then the last lines."""
    lines = output.splitlines()
    # a worker killed by SIGABRT prints no Python "Error:"
    markers = ("Error:", "terminate called", "what():", "Fatal Python error", "Aborted")
    errors = list(dict.fromkeys(line for line in lines if any(m in line for m in markers)))[:10]
    tail = "\n".join(lines[-40:])
    return AssertionError(
        f"{' '.join(command)} failed with exit code {returncode}:\n" + "\n".join(errors) + f"\n...\n{tail}"
    )


def tiny_base(root: Path) -> Path:
    """``root/base`` holding ``tok/`` (the digits tokenizer) and ``model/`` (a 2-layer untied Llama, hidden size 32),
    as the scripts in ``tests/dist_scripts`` read them."""
    from helpers import tiny
    from numadapter.testing import toy

    base = root / "base"
    tokenizer = toy.build_tokenizer("digits", base / "tok")
    tiny.build_model("llama", base / "model", len(tokenizer), tie=False, hidden_size=32, layers=2, heads=4)
    return base
