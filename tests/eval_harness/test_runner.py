"""Tests of the evaluation runner: methods registry, CLI, encoding, prediction paths, the tiny preset end to end.

Expected values are written by hand (token layouts, digit strings, learning-rate factors) or computed by an
independent oracle (exact Decimal sums read back from the prompt text), never by the code under test.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from types import SimpleNamespace

import pytest
import torch

from eval_harness.arms import METHODS, NTL_KINDS, Method, get_method
from eval_harness.arms.encode import Codec, EncodedSet, _cat_ragged, number_places
from eval_harness.arms.models import Built
from eval_harness.arms.predict import fone_answers, predict, round_like
from eval_harness.cli import main
from eval_harness.presets import PRESETS, expand, get_preset
from eval_harness.runner import RunSpec, lr_factor
from eval_harness.tasks import get_task
from eval_harness.tasks.base import Example

TOK_CACHE: dict[str, object] = {}


def _tokenizer(tmp_path_factory, kind: str = "digits"):
    from numadapter.testing.toy import build_tokenizer

    if kind not in TOK_CACHE:
        TOK_CACHE[kind] = tmp_path_factory.mktemp(f"tok-{kind}")
    return build_tokenizer(kind, TOK_CACHE[kind])


def _fone_codec(tokenizer, int_digits: int = 4, frac_digits: int = 3, **settings):
    from numadapter.config import NumberAdapterConfig
    from numadapter.tokenization import NumberTokenizer

    config = NumberAdapterConfig(
        encoding="fone", fone_numbers="all", int_digits=int_digits, frac_digits=frac_digits, **settings
    )
    ntok = NumberTokenizer(tokenizer, config)
    return Codec(ntok.tokenizer, ntok, ntok, side=True, places=config.num_places), ntok, config


# -- registry and CLI ------------------------------------------------------------------------------------------------


def test_methods_registry_covers_the_issue_and_ntl_kinds_match_the_config():
    from numadapter.config import NTL_KINDS as CONFIG_KINDS
    from numadapter.ntl import KINDS

    assert NTL_KINDS is CONFIG_KINDS is KINDS  # one list, defined in numadapter.ntl.vocab
    expected = {"digits", "subword", "lora", "xval", "fone", "fone_ntl", "fone_feature", "digits_agg"}
    expected |= {"digits_agg_aux", "fone_context"}
    expected |= {f"digits_ntl_{k.replace('-', '_')}" for k in CONFIG_KINDS}
    assert set(METHODS) == expected
    assert get_method("fone").prediction == "fone_head"
    assert get_method("fone_context").adapter == {"encoding": "fone"}  # the library's default head, nothing pinned
    assert get_method("digits_ntl_was_cdf").adapter == {"encoding": "digits", "ntl_weight": 0.3, "ntl_kind": "was-cdf"}
    assert get_method("subword").tokenizer == "subword" and get_method("lora").regimes == ("adapter",)


def test_unknown_method_and_bad_method_fields_are_refused():
    with pytest.raises(ValueError, match="Unknown method 'nope'.*fone"):
        get_method("nope")
    with pytest.raises(ValueError, match="backend"):
        Method("x", "x", "torch")
    with pytest.raises(ValueError, match="plain method takes no adapter settings"):
        Method("x", "x", "plain", adapter={"encoding": "fone"})


def test_help_lists_tasks_methods_and_presets(capsys):
    for argv in (["--help"], ["run", "--help"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 0
        out = capsys.readouterr().out
        for name in list(METHODS) + list(PRESETS) + ["fone_decimal_add_6"]:
            assert name in out, (argv, name)
    assert "--device" in out and "--preset" in out


def test_cli_run_refuses_unknown_preset_method_and_cuda_without_gpu(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--preset", "huge", "--out", str(tmp_path)])
    assert exc.value.code == 2 and "Unknown preset 'huge'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--preset", "tiny", "--methods", "fone,nope", "--out", str(tmp_path)])
    assert "Unknown method 'nope'" in capsys.readouterr().err
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            main(["run", "--preset", "tiny", "--device", "cuda", "--out", str(tmp_path)])
        assert "CUDA is not available" in capsys.readouterr().err


def test_presets_expand_with_overrides_and_skip_adapter_tables_without_base():
    skipped: list[str] = []
    specs = expand(get_preset("cpu-small"), methods=["fone", "digits"], epochs=2, seed=3, skipped=skipped)
    assert {s.method for s in specs} == {"fone", "digits"}
    assert all(s.epochs == 2 and s.seed == 3 for s in specs)
    assert any(line.startswith("adapter:") for line in skipped)
    paper = expand(get_preset("paper"), experiments=["data_size"])
    assert {s.lr for s in paper if s.method == "xval"} == {1e-4}
    assert {s.lr for s in paper if s.method == "fone"} == {5e-3}
    assert max(s.train_size for s in paper) == 409_600 and {s.batch_size for s in paper} == {512}
    with pytest.raises(ValueError, match="no experiment 'nope'"):
        expand(get_preset("tiny"), experiments=["nope"])


def test_runspec_validation_names_the_value():
    base = dict(preset="p", experiment="e", task="fone_decimal_add_6", method="fone", train_size=8)
    with pytest.raises(ValueError, match="`epochs` must be a positive integer, got 0"):
        RunSpec(**base, epochs=0)
    with pytest.raises(ValueError, match="`model_size` must be one of .*got 9"):
        RunSpec(**base, model_size=9)
    with pytest.raises(ValueError, match="--base PATH"):
        RunSpec(**base, regime="adapter")
    with pytest.raises(ValueError, match="`schedule`"):
        RunSpec(**base, schedule="step")
    with pytest.raises(ValueError, match="`max_steps` 9 exceeds the 8 steps of 2 epoch"):  # 2 x ceil(8 / 2)
        RunSpec(**base, epochs=2, batch_size=2, max_steps=9)
    with pytest.raises(ValueError, match="needs validation examples.*--n-valid"):
        RunSpec(**base, eval_every_steps=5)


def test_max_steps_stop_mid_epoch_and_step_points_stay_out_of_the_training_time(tmp_path, monkeypatch):
    import time

    from eval_harness import runner

    def slow_validation(run, encoded, examples):  # a stand-in that takes 0.4 s and scores 1 / len(examples)
        time.sleep(0.4)
        return 1 / len(examples)

    monkeypatch.setattr(runner, "_valid_exact_match", slow_validation)
    specs = expand(
        get_preset("tiny"), methods=["fone", "digits"], train_sizes=[16], max_steps=3, batch_size=4, n_test=4,
        n_valid=5, eval_every_steps=2, threads=1,
    )  # fmt: skip
    assert [(s.epochs, s.max_steps, s.eval_every_steps) for s in specs] == [(1, 3, 2)] * 2  # 3 of 4 steps per epoch
    for result in runner.run_specs(specs, tmp_path, log=lambda line: None):
        timing, points = result["timing"], result["step_curve"]
        assert timing["optimizer_steps"] == 3 and len(timing["epoch_s"]) == 1
        assert [p["step"] for p in points] == [2, 3]  # every 2 steps, and the last
        assert [p["valid_exact_match"] for p in points] == [0.2, 0.2]
        assert all(p["loss"] > 0 for p in points)
        # two 0.4 s validations ran inside the epoch; neither counts as training time
        assert 0 < points[0]["train_s"] < points[1]["train_s"] <= timing["train_s"] < 0.4
        assert timing["train_examples_per_s"] == pytest.approx(12 / timing["train_s"])  # 3 steps of 4


def test_lr_factor_warmup_cosine_and_constant():
    assert lr_factor(0, 100, 10, "cosine") == pytest.approx(0.1)
    assert lr_factor(9, 100, 10, "cosine") == pytest.approx(1.0)
    assert lr_factor(10, 100, 10, "cosine") == pytest.approx(1.0)
    assert lr_factor(55, 100, 10, "cosine") == pytest.approx(0.5)  # half way through the decay: (1 + cos(pi/2)) / 2
    assert lr_factor(99, 100, 10, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi * 89 / 90)))
    assert lr_factor(99, 100, 10, "constant") == 1.0
    assert lr_factor(50, 100, 10, "wsd") == 1.0  # stable until the last 20% of the steps
    assert lr_factor(90, 100, 10, "wsd") == pytest.approx(0.5)  # (100 - 90) / 20
    assert lr_factor(99, 100, 10, "wsd") == pytest.approx(0.05)


def test_step_budget_gives_every_training_size_the_same_number_of_steps():
    from eval_harness.presets import Experiment

    table = Experiment("t", "t", "fone_decimal_add_6", ("fone",), (3200, 6400, 1000), steps=2500, batch_size=64)
    epochs = {s.train_size: s.epochs for s in table.specs("p")}
    assert epochs == {3200: 50, 6400: 25, 1000: 160}  # ceil(2500 * 64 / n)


# -- encoding --------------------------------------------------------------------------------------------------------


def test_cat_ragged_concatenates_rows_of_different_lengths():
    a = torch.tensor([[1, 2, 0], [3, 0, 0]])
    b = torch.tensor([[7, 0], [8, 9]])
    out = _cat_ragged([(a, torch.tensor([2, 1])), (b, torch.tensor([1, 2]))], fill=-1)
    assert out.tolist() == [[1, 2, 7], [3, 8, 9]]


def test_number_places_cover_every_number_of_the_examples():
    examples = [Example("571.870+787.889=", "1359.759", "1359.759"), Example("0.5+12=", "12.5", "12.5")]
    assert number_places(examples) == (4, 3)


def test_fone_codec_layout_is_prompt_then_one_num_then_eos(tmp_path_factory):
    tokenizer = _tokenizer(tmp_path_factory)
    codec, ntok, _ = _fone_codec(tokenizer)
    bos, eos, pad = tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
    num, plus, eq = ntok.num_token_id, tokenizer.convert_tokens_to_ids("+"), tokenizer.convert_tokens_to_ids("=")
    examples = [Example("1.5+2=", "3.5", "3.5"), Example("10+20.25=", "30.25", "30.25")]
    enc = codec.encode(examples)
    assert enc.input_ids.tolist() == [[bos, num, plus, num, eq, num, eos]] * 2
    assert enc.labels.tolist() == [[-100] * 5 + [num, eos]] * 2
    assert enc.prompt_lengths.tolist() == [5, 5]
    assert enc.numbers["num_digits"][0, 5].tolist() == [0, 0, 0, 3, 5, 0, 0]  # 3.5 with m = 4, n = 3
    assert enc.numbers["num_digits"][1, 3].tolist() == [0, 0, 2, 0, 2, 5, 0]  # 20.25
    assert enc.one_number_answers().tolist() == [True, True]
    plain = Codec(tokenizer, tokenizer, tokenizer, side=False).encode(examples)
    assert plain.one_number_answers().tolist() == [False, False]  # no [NUM] token: no head path
    prompt = enc.prompt_batch(torch.tensor([1, 0]), "cpu")
    assert prompt["input_ids"].tolist() == [[bos, num, plus, num, eq]] * 2  # the answer [NUM] is gone
    assert prompt["num_mask"].tolist() == [[0, 1, 0, 1, 0]] * 2
    assert pad != num


def test_head_batch_feeds_the_prompt_and_labels_its_last_position_with_the_answer(tmp_path_factory):
    tokenizer = _tokenizer(tmp_path_factory)
    codec, ntok, _ = _fone_codec(tokenizer)
    bos, pad = tokenizer.bos_token_id, tokenizer.pad_token_id
    num, plus, eq = ntok.num_token_id, tokenizer.convert_tokens_to_ids("+"), tokenizer.convert_tokens_to_ids("=")
    minus = tokenizer.convert_tokens_to_ids("-")
    # prompts of different lengths ("-" before 2 is text: the sign policy keeps it a token)
    examples = [Example("4.5+-2=", "2.5", "2.5"), Example("10+20.25=", "30.25", "30.25")]
    enc = codec.encode(examples)
    batch = enc.head_batch(torch.tensor([0, 1]), "cpu")
    assert batch["input_ids"].tolist() == [[bos, num, plus, minus, num, eq], [bos, num, plus, num, eq, pad]]
    assert batch["attention_mask"].tolist() == [[1] * 6, [1] * 5 + [0]]
    assert batch["shift_labels"].tolist() == [[-100] * 5 + [num], [-100] * 4 + [num, -100]]
    assert batch["labels_num_mask"].tolist() == [[0] * 5 + [1], [0] * 4 + [1, 0]]
    assert batch["labels_num_digits"][0, 5].tolist() == [0, 0, 0, 2, 5, 0, 0]  # 2.5 with m = 4, n = 3
    assert batch["labels_num_digits"][1, 4].tolist() == [0, 0, 3, 0, 2, 5, 0]  # 30.25
    assert int(batch["labels_num_digits"].count_nonzero()) == 2 + 3  # nothing else is labelled
    assert "labels" not in batch
    # an answer that is not one [NUM] ("-0.5": the sign stays a text token) cannot be trained at the head
    signed = codec.encode(examples + [Example("1.5+-2=", "-0.5", "-0.5")])
    with pytest.raises(ValueError, match=r"one \[NUM\] followed by eos; row 2 is not \(3 answer tokens\)"):
        signed.head_batch(torch.tensor([0, 2]), "cpu")
    prompt = enc.prompt_batch(torch.tensor([0, 1]), "cpu")
    for key in ("input_ids", "attention_mask", "num_mask", "num_digits", "num_sign"):
        assert torch.equal(batch[key], prompt[key])


def test_train_format_is_head_only_for_head_methods_with_one_num_answers(tmp_path_factory):
    from eval_harness.arms.predict import train_format

    tokenizer = _tokenizer(tmp_path_factory)
    codec, _, _ = _fone_codec(tokenizer, int_digits=3)
    one_num = codec.encode([Example("1.5+2=", "3.5", "3.5")])
    too_wide = codec.encode([Example("1.5+2=", "3.5", "3.5"), Example("999.5+25=", "1024.5", "1024.5")])
    assert train_format(get_method("fone"), one_num) == "head"
    assert train_format(get_method("xval"), one_num) == "head"
    assert train_format(get_method("fone"), one_num, "sequence") == "sequence"
    assert train_format(get_method("fone"), too_wide) == "sequence"  # "1024.5" stays text: not one [NUM]
    assert train_format(get_method("digits"), one_num) == "sequence"  # no head: teacher-forced digits
    with pytest.raises(ValueError, match=r"`train_format` must be one of \['auto', 'sequence'\], got 'head'"):
        train_format(get_method("fone"), one_num, "head")
    with pytest.raises(ValueError, match="`train_format` must be one of"):
        RunSpec(preset="x", experiment="x", task="fone_decimal_add_6", method="fone", train_size=4, train_format="x")


def test_train_format_override_reaches_every_run(capsys):
    preset = get_preset("cpu-small")
    assert {s.train_format for s in expand(preset, experiments=["data_size"])} == {"auto"}
    specs = expand(preset, experiments=["data_size"], train_format="sequence")
    assert specs and {s.train_format for s in specs} == {"sequence"}
    assert main(["run", "--preset", "tiny", "--train-format", "sequence", "--dry-run"]) == 0
    assert "data_size/fone-n16-m1-s0  lr=0.001 epochs=1 device=cpu train_format=sequence" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["run", "--preset", "tiny", "--train-format", "head", "--dry-run"])


def test_digit_codec_labels_the_answer_digits_and_eos_only(tmp_path_factory):
    tokenizer = _tokenizer(tmp_path_factory)
    codec = Codec(tokenizer, tokenizer, tokenizer, side=False)
    enc = codec.encode([Example("12+3=", "15", "15"), Example("1+2=", "3", "3")])
    tid = tokenizer.convert_tokens_to_ids
    bos, eos, pad = tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
    assert enc.input_ids.tolist() == [
        [bos, tid("1"), tid("2"), tid("+"), tid("3"), tid("="), tid("1"), tid("5"), eos],
        [bos, tid("1"), tid("+"), tid("2"), tid("="), tid("3"), eos, pad, pad],
    ]
    assert enc.labels.tolist() == [
        [-100] * 6 + [tid("1"), tid("5"), eos],
        [-100] * 5 + [tid("3"), eos, -100, -100],
    ]
    assert enc.lengths.tolist() == [9, 7] and enc.prompt_lengths.tolist() == [6, 5]


def test_subword_tokenizer_has_every_digit_group_as_one_token(tmp_path):
    from eval_harness.arms.models import scratch_tokenizer

    tok = scratch_tokenizer("subword", tmp_path / "sub")
    assert tok.tokenize("571.870") == ["571", ".", "870"]
    assert tok.tokenize("1359.759") == ["135", "9", ".", "759"]  # Llama 3 groups digit runs left to right
    assert tok.tokenize("007") == ["007"]


# -- prediction paths ------------------------------------------------------------------------------------------------


def test_fone_answers_read_the_digit_head_at_the_given_position():
    logits = torch.randn(2, 5, 7, 10)  # (B, T, P, 10): noise everywhere but the read positions
    for row, (position, digits) in enumerate([(4, [1, 3, 5, 9, 7, 5, 9]), (2, [0, 0, 0, 7, 0, 0, 5])]):
        logits[row, position] = -5.0
        logits[row, position, torch.arange(7), torch.tensor(digits)] = 5.0
    out = fone_answers(logits, torch.tensor([4, 2]), int_digits=4, frac_digits=3)
    assert out == ["1359.759", "7.005"]
    sign = torch.zeros(2, 5, 2)
    sign[1, 2, 1] = 3.0  # row 1 predicts a minus
    assert fone_answers(logits, torch.tensor([4, 2]), 4, 3, sign_logits=sign) == ["1359.759", "-7.005"]


def test_round_like_rounds_half_up_to_the_targets_decimals():
    assert round_like(1359.7594999, "1359.759") == "1359.759"
    assert round_like(2.0005, "1.000") == "2.001"
    assert round_like(41.96, "42") == "42"
    assert round_like(-0.0004, "0.000") == "0"


def _exact_sum(prompt: str) -> str:
    a, b = prompt.rstrip("=").split("+")
    return str((Decimal(a) + Decimal(b)).normalize())


class _OracleFoNE(torch.nn.Module):
    """Answers 'a+b=' exactly from the prompt's number tensors: one-hot digit logits of a + b at EVERY position
    whose next input token is not a [NUM] operand, so only the last prompt position reads a full sum."""

    def __init__(self, int_digits: int, frac_digits: int) -> None:
        super().__init__()
        self.m, self.n = int_digits, frac_digits
        self.calls = 0

    def forward(self, input_ids, attention_mask, num_mask, num_digits, **kwargs):
        self.calls += 1
        places = torch.tensor([10.0 ** (self.m - 1 - j) for j in range(self.m + self.n)], dtype=torch.float64)
        values = (num_digits.double() * places).sum(-1) * num_mask  # (B, T)
        running = values.cumsum(1)  # sum of the operands seen so far
        units = torch.round(running * 10**self.n).long()  # (B, T) exact integers
        digits = torch.stack([(units // 10 ** (self.m + self.n - 1 - j)) % 10 for j in range(self.m + self.n)], -1)
        logits = torch.nn.functional.one_hot(digits, 10).float()  # (B, T, P, 10)
        return SimpleNamespace(number_logits=logits, number_sign_logits=None)


@pytest.mark.parametrize(("method", "read"), [("fone", "argmax per digit place"), ("fone_feature", "carry-aware")])
def test_fone_head_prediction_path_is_exact_with_an_oracle_model(tmp_path_factory, method, read):
    tokenizer = _tokenizer(tmp_path_factory)
    settings = {k: v for k, v in get_method(method).adapter_settings("scratch").items() if k != "encoding"}
    codec, ntok, config = _fone_codec(tokenizer, **settings)
    examples = get_task("fone_decimal_add_6").generate("test", 37, seed=0)
    enc = codec.encode(examples)
    model = _OracleFoNE(config.int_digits, config.frac_digits)
    built = Built(model, codec, ntok.tokenizer, ntok, config)
    preds = predict(get_method(method), built, enc, [e.target for e in examples], batch_size=10, device="cpu",
                    max_new_tokens=4)  # fmt: skip
    assert preds.texts == [_exact_sum(e.prompt) for e in examples]
    assert model.calls == 4  # one forward per batch of prompts, no decoding steps
    assert "digit head" in preds.path and read in preds.path


def test_head_path_falls_back_to_generation_loudly_when_an_answer_is_not_one_num(tmp_path_factory, monkeypatch):
    from eval_harness.arms import predict as P

    tokenizer = _tokenizer(tmp_path_factory)
    codec, ntok, config = _fone_codec(tokenizer, int_digits=3)  # 3 integer places: "1024.5" stays text
    examples = [Example("1.5+2.25=", "3.75", "3.75"), Example("999.5+25=", "1024.5", "1024.5")]
    enc = codec.encode(examples)
    assert enc.one_number_answers().tolist() == [True, False]
    generated = []
    monkeypatch.setattr(
        P, "generate_answers", lambda model, ntok, prompts, *a, **k: generated.extend(prompts) or ["0"] * 2
    )
    built = Built(_OracleFoNE(config.int_digits, config.frac_digits), codec, ntok.tokenizer, ntok, config)
    with pytest.warns(UserWarning, match=r"1 of 2 are not, first row 1: '1024.5'"):
        preds = predict(get_method("fone"), built, enc, ["3.75", "1024.5"], batch_size=2, device="cpu",
                        max_new_tokens=4)  # fmt: skip
    assert generated == ["1.5+2.25=", "999.5+25="] and built.model.calls == 0
    assert preds.path.startswith("numadapter.generation.generate") and "1 of 2 are not" in preds.path


class _OracleGenerator(torch.nn.Module):
    """A stand-in for a causal LM's ``generate``: reads the (left-padded) prompt ids, writes the exact sum's tokens,
    then eos, then garbage that must be cut off by the caller."""

    def __init__(self, tokenizer) -> None:
        super().__init__()
        self.tokenizer = tokenizer

    def generate(self, input_ids, attention_mask, max_new_tokens, eos_token_id, pad_token_id, **kwargs):
        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            assert mask[-1] == 1, "prompts must be left-padded"
            prompt = self.tokenizer.decode([i for i, m in zip(ids, mask) if m], skip_special_tokens=True)
            answer = self.tokenizer(_exact_sum(prompt), add_special_tokens=False)["input_ids"]
            new = (answer + [eos_token_id] + [pad_token_id] * max_new_tokens)[:max_new_tokens]
            rows.append(ids + new)
        return torch.tensor(rows)


def test_generate_prediction_path_left_pads_and_cuts_the_prompt(tmp_path_factory):
    tokenizer = _tokenizer(tmp_path_factory)
    codec = Codec(tokenizer, tokenizer, tokenizer, side=False)
    examples = [Example("1.5+2.25=", "3.75", "3.75"), Example("999.999+0.001=", "1000", "1000")]
    examples += list(get_task("fone_decimal_add_6").generate("test", 5, seed=1))
    enc = codec.encode(examples)
    built = Built(_OracleGenerator(tokenizer), codec, tokenizer)
    preds = predict(get_method("digits"), built, enc, [e.target for e in examples], batch_size=3, device="cpu",
                    max_new_tokens=12)  # fmt: skip
    assert preds.texts == [_exact_sum(e.prompt) for e in examples]


# -- end to end ------------------------------------------------------------------------------------------------------


def test_tiny_preset_writes_json_markdown_and_png(tmp_path, capsys):
    out = tmp_path / "results"
    assert main(["run", "--preset", "tiny", "--out", str(out), "--threads", "1", "--seed", "5"]) == 0
    printed = capsys.readouterr().out
    assert "report:" in printed
    files = sorted((out / "data_size").glob("*.json"))
    assert [f.name for f in files] == [
        "digits-n16-m1-s5.json", "digits-n32-m1-s5.json", "fone-n16-m1-s5.json", "fone-n32-m1-s5.json",
    ]  # fmt: skip
    result = json.loads(files[2].read_text())
    assert result["seed"] == 5 and result["config"]["seed"] == 5 and result["config"]["method"] == "fone"
    assert result["config"]["train_size"] == 16 and result["config"]["epochs"] == 1
    assert set(result["metrics"]) == {"exact_match", "mae", "r2", "mape", "cer"}
    assert result["metrics"]["exact_match"]["n_total"] == 8
    assert result["data"]["tokens_per_number"] == 1.0 and result["data"]["number_places"] == [4, 3]
    # FoNE trained on the prompts alone ("bos [NUM] + [NUM] =", 5 tokens), digit-wise on prompt + answer + eos
    assert result["data"]["train_format"] == "head" and result["data"]["seq_len_mean"] == 5.0
    digits = json.loads(files[0].read_text())
    assert digits["data"]["train_format"] == "sequence" and digits["data"]["seq_len_mean"] > 15
    assert digits["data"]["tokens_max_number"] == 8  # e.g. "1xxx.xxx": 7 digits and the point
    assert result["timing"]["lockstep_with"] == ["fone", "digits"]
    assert len(result["timing"]["epoch_s"]) == 1 and result["timing"]["test_s"] > 0
    assert result["model"]["params"]["total"] > 0 and result["environment"]["torch_threads"] == 1
    em = result["metrics"]["exact_match"]
    assert len(result["errors"]) == round(em["n_total"] * (1 - em["value"]))  # every wrong one (fewer than 50)
    report = (out / "report.md").read_text()
    assert "| method | train size |" in report and "| fone | 16 |" in report and "| digits | 32 |" in report
    png = out / "data_size_accuracy_vs_train_size.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "data_size_accuracy_vs_train_size.png" in report


def test_errors_keep_the_first_wrong_predictions_in_test_order():
    from eval_harness.arms.predict import Predictions
    from eval_harness.records import errors

    examples = [Example(prompt=f"{i}+1=", target=str(i + 1), answer=str(i + 1)) for i in range(6)]
    texts = ["1", "3", "3.0", "x", "5", "7"]  # wrong: 1 ("3" for 2), 3 ("x" for 4), 5 ("7" for 6); "3.0" == 3
    wrong = errors(examples, Predictions(texts, texts, "test"))
    assert [e["prompt"] for e in wrong] == ["1+1=", "3+1=", "5+1="]
    assert wrong[1] == {"prompt": "3+1=", "target": "4", "prediction": "x"}
    assert [e["prompt"] for e in errors(examples, Predictions(texts, texts, "test"), limit=2)] == ["1+1=", "3+1="]


def test_adapter_regime_runs_lora_and_fone_on_a_saved_base(tmp_path):
    from helpers import tiny

    from eval_harness.report import build_report
    from eval_harness.runner import run_specs
    from numadapter.testing.toy import build_tokenizer

    base = tmp_path / "base"
    tok = build_tokenizer("digits", base)
    tiny.build_model("llama", base, vocab_size=len(tok), tie=True, hidden_size=32, layers=1)
    specs = expand(
        get_preset("cpu-small"), experiments=["adapter"], methods=["lora", "fone", "digits"], base=str(base),
        train_sizes=[16], epochs=1, n_test=4, batch_size=8, threads=1,
    )  # fmt: skip
    assert [s.method for s in specs] == ["lora", "fone"]  # digits is a scratch baseline
    results = run_specs(specs, tmp_path / "out", log=lambda line: None)
    lora, fone = results
    assert lora["model"]["params"]["trainable"] < lora["model"]["params"]["total"]  # base frozen
    assert fone["model"]["number_config"]["fone_projection"] == "linear"  # numadapter's default on a pretrained base
    assert fone["prediction_path"].startswith("FoNE digit head")
    assert "LoRA on base" in build_report(tmp_path / "out").read_text()


def test_method_outside_its_regime_is_refused(tmp_path):
    from eval_harness.arms.models import build

    with pytest.raises(ValueError, match="method 'lora' runs in the adapter regime.*digits, subword"):
        build(get_method("lora"), "scratch", workdir=tmp_path, seed=0, places=(4, 3))


def test_report_without_results_says_what_to_do(tmp_path):
    from eval_harness.report import build_report

    with pytest.raises(ValueError, match="no result files.*python -m eval_harness run"):
        build_report(tmp_path)


def test_encoded_set_batch_trims_to_the_longest_row():
    enc = EncodedSet(
        input_ids=torch.tensor([[1, 2, 3, 0], [1, 2, 0, 0]]),
        attention_mask=torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]]),
        labels=torch.tensor([[-100, 2, 3, -100], [-100, 2, -100, -100]]),
        prompt_lengths=torch.tensor([1, 1]),
        lengths=torch.tensor([3, 2]),
    )
    assert enc.batch(torch.tensor([1]), "cpu")["input_ids"].tolist() == [[1, 2]]
    assert enc.batch(torch.tensor([0, 1]), "cpu")["labels"].shape == (2, 3)
