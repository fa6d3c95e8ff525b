"""The README's Python blocks run as written, in the order a reader runs them, and give the results their comments
show."""

from __future__ import annotations

import re

import pytest
import torch
from helpers.paths import ROOT

from numadapter.generation import generate as numadapter_generate

README = ROOT / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_api_block_runs_and_matches_its_comments():
    block = _python_blocks()[0]
    namespace: dict = {}
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
    assert "<|im_start|>user\nWhat is 12 + 30?<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")
    # numbers in: the conversation keeps 12 and 30 in digits, their values at their last tokens (the head's context)
    assert inputs["number_texts"] == [[]] and ntok.num_token_id not in inputs["input_ids"][0].tolist()
    rows = inputs["num_mask"][0].nonzero().flatten()
    assert inputs["num_mask"][0, rows].tolist() == [2, 2] and inputs["num_values"][0, rows].tolist() == [12.0, 30.0]
    plain = ntok(text, add_special_tokens=False, return_tensors="pt")  # the template's text encoded directly
    again = model.generate(**plain, max_new_tokens=4)
    assert torch.equal(again, reply)
    start = inputs["input_ids"].shape[1]
    shown = ntok.batch_decode(reply[:, start:])
    assert str(shown) in capsys.readouterr().out and ntok.config.num_token not in shown[0]
    written = numadapter_generate(
        model, ntok, [text], max_new_tokens=4, return_dict=True
    )  # every number of the completion, [NUM] or digits
    assert written.completions == shown and written.numbers[0], (
        f"the chat model wrote no number: {shown}"
    )  # numbers out
    heads = [n for n, c in zip(written.numbers[0], written.confidences[0]) if c is not None]
    assert reply[0, start:].tolist().count(ntok.num_token_id) == len(heads)


def test_ntl_block_trains_a_plain_sft_trainer_and_logs_both_losses():
    adapter, ntl_block = _python_blocks()[1], next(b for b in _python_blocks() if "ntl_loss_func" in b)
    assert "SFTTrainer(" in ntl_block and "NumberLossCallback" in ntl_block
    namespace: dict = {}
    exec(compile(adapter, str(README), "exec"), namespace)
    exec(compile(ntl_block, str(README), "exec"), namespace)
    trainer = namespace["trainer"]
    assert not hasattr(trainer.model, "peft_config")  # a plain transformers model, no adapter
    logged = [entry for entry in trainer.state.log_history if "ntl_loss" in entry]
    assert len(logged) == 2, trainer.state.log_history  # logging_steps=1, max_steps=2
    for entry in logged:
        assert entry["ce_loss"] > 0 and entry["ntl_loss"] > 0
        assert entry["loss"] == pytest.approx(entry["ce_loss"] + 0.3 * entry["ntl_loss"], rel=1e-3)


# what a lab notebook says and a user's guide does not: which session, how loaded the machine was, who else ran on it
LAB_NOTES = re.compile(r"\bsession \d|load average|\bat load \d|\bload \d+(?:\.\d+)?-\d|other (?:jobs?|agents)", re.I)


def test_readme_is_a_short_guide_and_the_docs_carry_no_lab_notes():
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move detail to docs/guide.md or docs/results.md"
    for path in [README, ROOT / "docs" / "guide.md", ROOT / "docs" / "results.md"]:
        found = [m.group(0) for m in LAB_NOTES.finditer(path.read_text())]
        assert not found, f"{path.name}: {found}; say which machine measured a figure ('2-core CPU'), no more"
