"""The README's Python API block runs as written and gives the results its comments show."""

from __future__ import annotations

import re

import torch
from helpers.paths import ROOT

from numadapter.generation import numbers_of
from numadapter.testing.toy import build_tokenizer

README = ROOT / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_api_block_runs_and_matches_its_comments(tmp_path):
    block = _python_blocks()[0]
    namespace = {"tokenizer": build_tokenizer("llama3", tmp_path / "tok")}
    exec(compile(block, str(README), "exec"), namespace)
    assert [(s.text, str(s.exact)) for s in namespace["spans"]] == [
        ("1,234.50", "1234.5"),
        ("2024", "2024"),
        ("01", "1"),
        ("05", "5"),
        ("6.02e23", "602" + "0" * 21),
        ("-3", "-3"),
    ]
    assert tuple(namespace["batch"]["num_digits"].shape)[::2] == (2, 12)
    ntok = namespace["ntok"]
    assert ntok.decode(ntok("Total: 007 items, 1,234.50 EUR")) == "Total: 007 items, 1,234.50 EUR"
    numadapter = namespace["numadapter"]
    assert numadapter.fone_decode(namespace["feats"], int_digits=30, frac_digits=2) == [
        "4.17",
        "123456789012345678901234567890",
    ]


def test_adapter_block_runs_end_to_end(capsys):
    block = _python_blocks()[1]
    assert "numadapter.get_peft_model" in block and "NumberSFTTrainer" in block
    namespace: dict = {}
    exec(compile(block, str(README), "exec"), namespace)
    out = namespace["out"]
    assert out.loss.isfinite() and out.number_loss > 0
    assert torch.allclose(out.loss, out.lm_loss + out.number_loss)  # number_loss_weight = 1
    text = capsys.readouterr().out
    assert "trainable params" in text and "12 + 30 =" in text
    numadapter, reloaded, ntok = namespace["numadapter"], namespace["reloaded"], namespace["ntok"]
    expected = numadapter.generate(reloaded, ntok, ["12 + 30 ="], max_new_tokens=4, return_dict=True)
    assert namespace["output"][0, -len(expected.token_ids[0]) :].tolist() == expected.token_ids[0]
    assert ntok.batch_decode(namespace["output"]) == expected.texts
    assert str(expected.texts) in text  # what the block prints


def test_quick_start_has_exactly_the_two_commands_ci_runs():
    quick = README.read_text().split("## Quick start", 1)[1].split("##", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", quick, flags=re.S)[0].strip().splitlines()
    assert len(commands) == 2
    ci = (README.parent / ".ci" / "run").read_text()
    test_command = commands[1].split("#")[0].strip()
    assert test_command in ci


def test_chat_block_trains_on_messages_and_generates_numbers(capsys):
    adapter, chat_block = _python_blocks()[1], next(b for b in _python_blocks() if "apply_chat_template" in b)
    assert "messages" in chat_block and "NumberSFTTrainer" in chat_block and "model.generate" in chat_block
    namespace: dict = {}
    exec(compile(adapter, str(README), "exec"), namespace)
    exec(compile(chat_block, str(README), "exec"), namespace)
    ntok, model, inputs, reply = namespace["ntok"], namespace["model"], namespace["inputs"], namespace["reply"]
    text = ntok.apply_chat_template(namespace["chat"], tokenize=False, add_generation_prompt=True)
    assert text == "user: What is 12 + 30?\nassistant:"
    assert inputs["number_texts"] == [["12", "30"]]  # numbers in: two [NUM] in the encoded conversation
    assert inputs["input_ids"][0].tolist().count(ntok.num_token_id) == 2
    plain = ntok(text, add_special_tokens=False, return_tensors="pt")  # the template's text encoded directly
    again = model.generate(**plain, max_new_tokens=4)
    assert torch.equal(again, reply)
    generated = numbers_of(reply).numbers[0]
    assert generated, f"the chat model wrote no number: {ntok.batch_decode(reply)}"  # numbers out
    start = inputs["input_ids"].shape[1]
    new = reply[0, start:].tolist()
    assert new.count(ntok.num_token_id) == len(generated)
    shown = ntok.batch_decode(reply[:, start:])
    pieces = [ntok.tokenizer.decode([t]) for t in new]
    by_hand = "".join(str(generated.pop(0)) if t == ntok.num_token_id else p for t, p in zip(new, pieces))
    assert shown == [by_hand] and ntok.config.num_token not in shown[0]
    assert str(shown) in capsys.readouterr().out
