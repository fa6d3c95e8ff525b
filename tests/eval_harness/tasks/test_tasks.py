"""Evaluation tasks: formats, exact answers, disjoint splits, reproducibility, JSONL loading, and the CLI.

Expected answers are recomputed here independently of the generators (Fractions, Python's own parser for the
xVal expressions, per-template formulas for FERMAT) or worked out by hand in comments.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
from fractions import Fraction

import numpy as np
import pytest

from eval_harness.cli import main
from eval_harness.tasks import TASKS, Example, get_task, load_jsonl_task
from eval_harness.tasks.fermat import VIEWS, FermatTask
from eval_harness.tasks.fone import FoneArithmeticTask
from eval_harness.tasks.sampling import KeyedPermutation, unrank_pairs, unrank_triple
from eval_harness.tasks.xval import XvalExpressionTask, tree_shapes

SMALL = 300  # examples per split in the generic checks

# ----------------------------------------------------------------------------------------------------------
# Hand-computed pins: (task, split, index, prompt, target) for seed 0.
# ----------------------------------------------------------------------------------------------------------
PINS = [
    # 504.645 + 722.777: 504 + 722 = 1226, .645 + .777 = 1.422 -> 1227.422
    ("fone_decimal_add_6", "test", 0, "504.645+722.777=", "1227.422"),
    # 188475 + 394485 = 582960
    ("fone_int_add_6", "test", 0, "188475+394485=", "582960"),
    # 65075 - 948 = 64127
    ("fone_int_sub_5", "test", 0, "65075-948=", "64127"),
    # 250 * 721 = 721 * 1000 / 4 = 180250
    ("fone_int_mul_3", "test", 0, "250*721=", "180250"),
    # 4400 * 8620 = 44 * 862 * 1000 = 37928 * 1000
    ("fone_int_mul_4", "test", 1, "4400*8620=", "37928000"),
    # 1.5*91 - 2*306 + 0.5*349 - 10 = 136.5 - 612 + 174.5 - 10 = -311 -> 0
    ("fone_classify_d10", "test", 0, "[91, 306, 349]=", "0"),
    # 1.5*154 - 2*377 + 0.5*685 + 190 = 231 - 754 + 342.5 + 190 = 9.5 -> 1
    ("fone_classify_dneg190", "test", 1, "[154, 377, 685]=", "1"),
    # 84.45 - 8.32 = 76.13
    ("xval_expr_2", "test", 1, "84.45-8.32=", "76.13"),
    # 94.16 * 44.76 = 4143.04 + 71.5616 = 4214.6016; + 23.73 = 4238.3316
    ("xval_expr_3", "test", 1, "23.73+(94.16*44.76)=", "4238.3316"),
    # 11.61 + 24.39 = 36; + 22.80 = 58.8 (canonical: no trailing zero)
    ("xval_expr_3", "test", 0, "(11.61+24.39)+22.80=", "58.8"),
    # 144 * 8 = 1152
    ("ntl_mul", "test", 0, "144*8=", "1152"),
    # 622 - 388 = 234
    ("ntl_qa", "test", 1, "Subtract 388 from 622.", "234"),
    # 150.5 / 7 = 21.5
    ("fermat_1dp", "test", 1, "7 friends share a bill of 150.5 dollars equally. How many dollars does each friend "
     "pay?", "21.5"),
    # 5339 + 8746 = 14085 (the quick start's format: spaces around "+", the answer after a space)
    ("quickstart_add", "test", 0, "5339 + 8746 =", "14085"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "split", "index", "prompt", "target"), PINS)
def test_seeded_examples_match_hand_computation(name, split, index, prompt, target):
    example = get_task(name).generate(split, index + 1, seed=0)[index]
    assert (example.prompt, example.target) == (prompt, target)


# ----------------------------------------------------------------------------------------------------------
# Independent answer checks for every task.
# ----------------------------------------------------------------------------------------------------------
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def _eval_expression(text: str) -> Fraction:
    """Evaluate "a+b*..." with Python's own parser, exactly (Fractions), independent of the generator."""

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](walk(node.left), walk(node.right))
        assert isinstance(node, ast.Constant)
        return Fraction(ast.get_source_segment(text, node))

    return walk(ast.parse(text, mode="eval").body)


def _fraction(text: str) -> Fraction:
    return Fraction(text)


FERMAT_FORMULAS = {  # template id -> answer from the slot values (see fermat.TEMPLATES)
    0: lambda s: s["a"] + s["b"],
    1: lambda s: s["a"] - s["b"],
    2: lambda s: s["a"] * s["n"],
    3: lambda s: s["a"] / s["n"],
    4: lambda s: s["a"] + s["b"] + s["c"],
    5: lambda s: s["a"] - s["b"] + s["c"],
    6: lambda s: s["a"] * s["b"],
    7: lambda s: s["a"] * s["n"] + s["b"],
    8: lambda s: (s["a"] + s["b"]) / 2,
    9: lambda s: s["a"] - s["b"],
    10: lambda s: s["a"] + s["b"],
    11: lambda s: s["a"] / s["n"],
}


def _reference_answer(example: Example) -> Fraction:
    md = example.metadata
    task = md["task"]
    if task.startswith("fone_classify"):
        x, y, z = (Fraction(v) for v in md["operands"])
        d = 10 if task.endswith("d10") else -190
        return Fraction(int(Fraction(3, 2) * x - 2 * y + Fraction(1, 2) * z - d > 0))
    if task.startswith(("fone_", "xval_", "ntl_mul", "quickstart_add")):
        return _eval_expression(example.prompt.rstrip("="))
    if task == "ntl_qa":
        a_text, b_text = md["operands"]
        assert re.search(rf"(?<![0-9-]){re.escape(a_text)}(?![0-9])", example.prompt), example.prompt
        assert re.search(rf"(?<![0-9-])\(?{re.escape(b_text)}\)?(?![0-9])", example.prompt), example.prompt
        a, b = Fraction(a_text), Fraction(b_text)
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else None}[md["op"]]
    if task.startswith("fermat_"):
        slots = {k: Fraction(v) for k, v in md["slots"].items()}
        return FERMAT_FORMULAS[md["template"]](slots)
    raise AssertionError(task)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_targets_equal_an_independent_computation(name):
    task = TASKS[name]
    for split in task.splits:
        for example in task.generate(split, 60, seed=3):
            assert Fraction(example.answer) == _reference_answer(example), example
            assert Fraction(example.target) == Fraction(example.answer)
            json.dumps(example.to_dict())  # JSON-serialisable


# ----------------------------------------------------------------------------------------------------------
# Reproducibility, prefix stability, disjoint splits.
# ----------------------------------------------------------------------------------------------------------
def _key(example: Example) -> str:
    """The problem identity used for disjointness: the operands (unordered where the op commutes)."""
    md = example.metadata
    if md["task"].startswith("fermat_"):
        return f"{md['template']}|{sorted(md['slots'].items())}"
    operands = md["operands"]
    op = md.get("op") or ("*" if md["task"] == "ntl_mul" else "")
    if op in ("+", "*") or md["task"].startswith("fone_classify"):
        operands = sorted(operands, key=Fraction)
    return f"{op}|{'|'.join(operands)}|{md.get('ops', '')}|{example.prompt if md['task'].startswith('xval') else ''}"


@pytest.mark.parametrize("name", sorted(TASKS))
def test_seed_reproducible_and_prefix_stable(name):
    task = TASKS[name]
    first = task.generate("train", 50, seed=7)
    assert [e.to_dict() for e in first] == [e.to_dict() for e in task.generate("train", 50, seed=7)]
    assert [e.prompt for e in task.generate("train", 20, seed=7)] == [e.prompt for e in first[:20]]
    assert [e.prompt for e in task.generate("train", 50, seed=8)] != [e.prompt for e in first]


@pytest.mark.parametrize("name", sorted(TASKS))
def test_splits_are_disjoint(name):
    task = TASKS[name]
    keys = {split: {_key(e) for e in task.generate(split, SMALL, seed=1)} for split in ("train", "valid", "test")}
    assert not keys["train"] & keys["valid"]
    assert not keys["train"] & keys["test"]
    assert not keys["valid"] & keys["test"]


def test_fermat_splits_disjoint_across_views_and_mixed_training():
    train_texts = {e.prompt for e in get_task("fermat_mixed").generate("train", 4000, seed=0)}
    for view in VIEWS:
        test_texts = {e.prompt for e in get_task(f"fermat_{view}").generate("test", seed=0)}
        assert len(test_texts) > 1000
        assert not train_texts & test_texts


def test_tiny_space_is_partitioned_exactly():
    # 1-digit multiplication: pairs a <= b of 0..9 -> 10 * 11 / 2 = 55 problems; valid 5 + test 10 + train 40.
    task = FoneArithmeticTask("tiny_mul", "mul", 1, 0, n_train=40, n_valid=5, n_test=10)
    assert task.capacity("train") == 40
    pairs = []
    for split in ("train", "valid", "test"):
        pairs += [tuple(int(v) for v in e.metadata["operands"]) for e in task.generate(split, task.capacity(split))]
    assert sorted(pairs) == sorted((a, b) for b in range(10) for a in range(b + 1))
    with pytest.raises(
        ValueError,
        match=r"holds at most 40 examples, got n=41. Ask for n <= 40, or build the task with larger n_valid",
    ):
        task.generate("train", 41)


def test_task_construction_is_validated():
    with pytest.raises(ValueError, match=r"valid \+ test sizes \(50 \+ 10\) exceed the 55 distinct problems"):
        FoneArithmeticTask("tiny", "mul", 1, 0, n_train=1, n_valid=50, n_test=10)
    with pytest.raises(ValueError, match=r"more than the 2\*\*64 a `KeyedPermutation` indexes; use fewer digits"):
        FoneArithmeticTask("huge", "add", 10, 0, n_train=1, n_valid=1, n_test=1)  # 10^10 * (10^10 + 1) / 2 > 2^64
    with pytest.raises(ValueError, match=r"`op` must be one of \['add', 'mul', 'sub'\], got 'div'"):
        FoneArithmeticTask("div", "div", 3, 0, n_train=1, n_valid=1, n_test=1)


def test_fone_mul3_uses_the_near_exhaustive_pair_space_without_repeats():
    task = get_task("fone_int_mul_3")
    assert task.space_size == 500_500 and task.capacity("train") == 360_500  # 1000 * 1001 / 2 - 40k - 100k
    test = task.generate("test", seed=0)
    assert len({e.prompt for e in test}) == 100_000


# ----------------------------------------------------------------------------------------------------------
# Formats, operand order and digit bounds.
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "op", "digits", "frac"),
    [
        ("fone_decimal_add_6", "+", 6, 3),
        ("fone_int_add_6", "+", 6, 0),
        ("fone_int_sub_5", "-", 5, 0),
        ("fone_int_mul_3", "*", 3, 0),
        ("fone_int_mul_4", "*", 4, 0),
    ],
)
def test_fone_format_order_and_digit_bounds(name, op, digits, frac):
    operand = r"(0|[1-9][0-9]*)" + (rf"\.[0-9]{{{frac}}}" if frac else "")
    pattern = re.compile(rf"{operand}{re.escape(op)}{operand}=")
    examples = get_task(name).generate("train", 2000, seed=0)
    seen = set()
    for e in examples:
        assert pattern.fullmatch(e.prompt), e.prompt
        a, b = (Fraction(v) for v in e.metadata["operands"])
        assert 0 <= a < 10 ** (digits - frac) and 0 <= b < 10 ** (digits - frac)
        assert (a >= b) if op == "-" else (a <= b)
        if frac:
            assert re.fullmatch(rf"[0-9]+\.[0-9]{{{frac}}}", e.target)
        seen.add((a, b))
    assert len(seen) == len(examples)  # no duplicates within a split
    lengths = {len(v.split(".")[0]) for e in examples for v in e.metadata["operands"]}
    assert max(lengths) == digits - frac  # "up to x digits": the full length occurs


def test_fone_classification_sorted_in_range_and_both_labels():
    examples = get_task("fone_classify_d10").generate("test", 2000, seed=0)
    labels = set()
    for e in examples:
        assert re.fullmatch(r"\[[0-9]+, [0-9]+, [0-9]+\]=", e.prompt)
        x, y, z = (int(v) for v in e.metadata["operands"])
        assert 0 <= x <= y <= z <= 1000
        labels.add(e.target)
    assert labels == {"0", "1"}


def test_xval_operands_shapes_and_format():
    assert [len(tree_shapes(k)) for k in range(1, 6)] == [1, 1, 2, 5, 14]  # Catalan numbers
    for k in (2, 3, 4):
        examples = get_task(f"xval_expr_{k}").generate("test", 500, seed=0)
        shapes = set()
        for e in examples:
            numbers = re.findall(r"[0-9]+\.[0-9]+", e.prompt)
            assert len(numbers) == k and all(re.fullmatch(r"[0-9]{1,2}\.[0-9]{2}", v) for v in numbers)
            assert e.prompt.endswith("=") and e.prompt.count("(") == k - 2
            shapes.add(re.sub(r"[0-9.]+", "x", e.prompt))
        assert len({re.sub(r"[-+*]", "o", s) for s in shapes}) == len(tree_shapes(k))
    with pytest.raises(ValueError, match=r"`operands` must be in \[1, 4\].*got 5"):
        XvalExpressionTask("too_big", 5)


def test_ntl_multiplication_interpolation_and_extrapolation_digits():
    task = get_task("ntl_mul")
    digits = set()
    for e in task.generate("train", 2000, seed=0) + task.generate("test", 500, seed=0):
        a, b = (int(v) for v in e.metadata["operands"])
        assert 1 <= a < 10**5 and 1 <= b < 10**5
        digits.add((len(str(a)), len(str(b))))
    assert digits == {(k, m) for k in range(1, 6) for m in range(1, 6)}
    six_first = six_second = 0
    for e in task.generate("test_extrapolation", 500, seed=0):
        a, b = e.metadata["operands"]
        assert max(len(a), len(b)) == 6 and min(len(a), len(b)) >= 1
        six_first += len(a) == 6
        six_second += len(b) == 6
    assert six_first and six_second  # the 6-digit factor appears on both sides


def test_quickstart_addition_draws_3_and_4_digit_operands_equally_in_the_quick_start_format():
    examples = get_task("quickstart_add").generate("train", 2000, seed=0)
    lengths = [len(x) for e in examples for x in e.metadata["operands"]]
    assert set(lengths) == {3, 4} and abs(lengths.count(3) - lengths.count(4)) < 200  # 4,000 operands, ~50% each
    for e in examples:
        a, b = e.metadata["operands"]
        assert (e.prompt, e.sep, e.text()) == (f"{a} + {b} =", " ", f"{a} + {b} = {int(a) + int(b)}")
    assert {int(e.metadata["operands"][0]) < int(e.metadata["operands"][1]) for e in examples} == {True, False}


def test_ntl_qa_templates_and_extrapolation_magnitudes():
    task = get_task("ntl_qa")
    train = task.generate("train", 3000, seed=0)
    for op in "+-*/":
        templates = {e.metadata["template"] for e in train if e.metadata["op"] == op}
        assert len(templates) >= 5, op
    assert any(e.prompt == f"What is {e.metadata['operands'][0]} plus {e.metadata['operands'][1]}?" for e in train)
    assert any(re.fullmatch(r"Calculate -?[0-9]+ - \(-[0-9]+\)\.", e.prompt) for e in train)  # negative in parens
    for e in train:
        a, b = (abs(int(v)) for v in e.metadata["operands"])
        if e.metadata["op"] == "/":
            assert 1 <= b <= 99 and abs(int(e.answer)) <= 999  # dividend = quotient * divisor
        else:
            assert a <= 999 and b <= 999
        assert e.sep == " " and e.text() == f"{e.prompt} {e.target}"
    for e in task.generate("test_extrapolation", 300, seed=0):
        a, b = (abs(int(v)) for v in e.metadata["operands"])
        quotient = abs(int(e.answer)) if e.metadata["op"] == "/" else 0
        assert max(a, b) >= 1000 or quotient >= 1000


def _mask(prompt: str) -> str:
    return re.sub(r"[0-9]+(\.[0-9]+)?", "#", prompt)


def test_fermat_views_share_problem_ids_and_differ_only_in_numbers():
    views = {view: get_task(f"fermat_{view}").generate("test", 200, seed=0) for view in VIEWS}
    formats = {
        "int": lambda v: re.fullmatch(r"[0-9]+", v) and 0 <= int(v) <= 1000,
        "1dp": lambda v: re.fullmatch(r"[0-9]+\.[0-9]", v) and v[-1] != "0",
        "2dp": lambda v: re.fullmatch(r"[0-9]+\.[0-9]{2}", v) and v[-1] != "0",
        "1000plus": lambda v: re.fullmatch(r"[0-9]+", v) and 1000 <= int(v) <= 100000,
    }
    reference = views["int"]
    for view, examples in views.items():
        assert [e.metadata["problem_id"] for e in examples] == list(range(200))
        assert [e.metadata["template"] for e in examples] == [e.metadata["template"] for e in reference]
        assert [_mask(e.prompt) for e in examples] == [_mask(e.prompt) for e in reference]
        for e in examples:
            for slot, text in e.metadata["slots"].items():
                if slot == "n":
                    assert 2 <= int(text) <= 12
                else:
                    assert formats[view](text), (view, text)
                assert text in e.prompt
    assert len({e.metadata["template"] for e in reference}) == len(FERMAT_FORMULAS)
    mixed = get_task("fermat_mixed").generate("test", 8, seed=0)
    assert [e.metadata["view"] for e in mixed] == list(VIEWS) * 2
    with pytest.raises(ValueError, match="`view` must be one of"):
        FermatTask("bad", "3dp")


# ----------------------------------------------------------------------------------------------------------
# Sampling helpers.
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [1, 2, 3, 17, 1000, 4097])
def test_keyed_permutation_is_a_bijection(size):
    perm = KeyedPermutation(size, key=12345)
    image = perm.range(0, size)
    assert sorted(image.tolist()) == list(range(size))
    if size >= 17:
        assert image.tolist() != list(range(size))


def test_unranking_enumerates_each_pair_and_triple_once():
    a, b = unrank_pairs(np.arange(10 * 11 // 2), 10)
    assert sorted(zip(a.tolist(), b.tolist())) == sorted((x, y) for y in range(10) for x in range(y + 1))
    big_a, big_b = unrank_pairs(np.array([10**6 * (10**6 + 1) // 2 - 1, 0]), 10**6)  # last and first rank
    assert (big_a.tolist(), big_b.tolist()) == ([999_999, 0], [999_999, 0])
    triples = [unrank_triple(r, 7) for r in range(math.comb(9, 3))]
    assert sorted(triples) == sorted((x, y, z) for z in range(7) for y in range(z + 1) for x in range(y + 1))


# ----------------------------------------------------------------------------------------------------------
# Task API errors and the registry.
# ----------------------------------------------------------------------------------------------------------
def test_generate_rejects_bad_arguments():
    task = get_task("fone_int_add_6")
    with pytest.raises(ValueError, match=r"no split 'dev'; valid splits: \['test', 'train', 'valid'\]"):
        task.generate("dev", 1)
    with pytest.raises(ValueError, match=r"`n` must be >= 0, got -1"):
        task.generate("test", -1)
    with pytest.raises(TypeError, match=r"`n` must be an int or None, got 1.5"):
        task.generate("test", 1.5)
    with pytest.raises(ValueError, match=r"`seed` must be a non-negative int, got -3"):
        task.generate("test", 1, seed=-3)
    assert task.generate("test", 0) == []


def test_get_task_lists_valid_names():
    with pytest.raises(ValueError, match=r"Unknown task 'fone_add'.*fone_decimal_add_6.*xval_expr_4"):
        get_task("fone_add")
    assert get_task("ntl_mul") is TASKS["ntl_mul"]


def test_default_sizes_follow_the_papers():
    assert dict(get_task("fone_decimal_add_6").splits) == {"train": 720_000, "valid": 80_000, "test": 200_000}
    assert dict(get_task("fone_int_mul_3").splits) == {"train": 360_000, "valid": 40_000, "test": 100_000}
    assert dict(get_task("fone_classify_d10").splits) == {"train": 72_000, "valid": 8_000, "test": 20_000}
    assert dict(get_task("fermat_2dp").splits) == {"train": 200_000, "valid": 1_000, "test": 1_111}
    qa = dict(get_task("ntl_qa").splits)
    assert qa == {"train": 100_000, "valid": 3_000, "test": 10_000, "test_extrapolation": 10_000}


# ----------------------------------------------------------------------------------------------------------
# JSONL tasks.
# ----------------------------------------------------------------------------------------------------------
def test_load_jsonl_task_reads_records_exactly(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(
        '{"question": "What is 2.5 + 2.5?", "answer": 5.000, "source": "x", "weight": 0.1}\n'
        "\n"
        '{"question": "Capital of France?", "answer": "Paris"}\n'
    )
    task = load_jsonl_task(path, prompt_key="question", target_key="answer")
    assert task.name == "mine" and dict(task.splits) == {"test": 2}
    first, second = task.generate("test")
    assert (first.prompt, first.target, first.answer) == ("What is 2.5 + 2.5?", "5.000", "5")
    assert first.metadata["source"] == "x" and first.metadata["weight"] == "0.1" and first.metadata["line"] == 1
    assert (second.target, second.answer, second.metadata["line"]) == ("Paris", "Paris", 3)
    assert first.text() == "What is 2.5 + 2.5? 5.000"
    assert task.generate("test", 1) == [first]
    with pytest.raises(
        ValueError, match=r"holds at most 2 examples, got n=3. Ask for n <= 2 \(the number of records in its file\)"
    ):
        task.generate("test", 3)


def test_load_jsonl_task_with_one_file_per_split(tmp_path):
    (tmp_path / "tr.jsonl").write_text('{"prompt": "1+1=", "target": "2"}\n' * 3)
    (tmp_path / "te.jsonl").write_text('{"prompt": "2+2=", "target": "4"}\n')
    task = load_jsonl_task({"train": tmp_path / "tr.jsonl", "test": tmp_path / "te.jsonl"}, name="sums", sep="")
    assert dict(task.splits) == {"train": 3, "test": 1}
    assert task.generate("test")[0].text() == "2+2=4"


def test_load_jsonl_task_missing_key_names_key_line_and_keys_found(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "a", "target": "1"}\n{"prompt": "b", "label": "2"}\n')
    with pytest.raises(ValueError, match=r"line 2: missing key 'target'.*keys found: \['label', 'prompt'\]"):
        load_jsonl_task(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "a", "target": "1"}\n{"prompt": "b", "target": \n', r"line 2: not valid JSON"),
        ('["prompt", "target"]\n', r"line 1: expected a JSON object"),
        ('{"prompt": "a", "target": true}\n', r"line 1: key 'target' must be a string or a number, got bool"),
        ('{"prompt": null, "target": "1"}\n', r"line 1: key 'prompt' must be a string or a number, got NoneType"),
    ],
)
def test_load_jsonl_task_rejects_malformed_lines(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_jsonl_task(path)


def test_load_jsonl_task_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_jsonl_task(tmp_path / "nope.jsonl")


# ----------------------------------------------------------------------------------------------------------
# CLI (in-process).
# ----------------------------------------------------------------------------------------------------------
def test_cli_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "tasks" in out and "generate" in out


def test_cli_tasks_lists_names_sizes_and_descriptions(capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    for name, task in TASKS.items():
        assert name in out and task.description in out
    assert "train 720,000, valid 80,000, test 200,000" in out
    assert "test_extrapolation 10,000" in out


def test_cli_generate_prints_jsonl(capsys):
    assert main(["generate", "--task", "fone_int_sub_5", "--split", "test", "--n", "2", "--seed", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 2
    assert (records[0]["prompt"], records[0]["target"], records[0]["split"]) == ("65075-948=", "64127", "test")
    assert set(records[0]) == {"prompt", "target", "answer", "sep", "metadata", "split"}


def test_cli_generate_writes_file(tmp_path, capsys):
    out = tmp_path / "sub" / "ex.jsonl"
    assert main(["generate", "--task", "ntl_mul", "--split", "test_extrapolation", "--n", "5", "--out", str(out)]) == 0
    assert "wrote 5 examples" in capsys.readouterr().out
    records = [json.loads(line) for line in out.read_text().splitlines()]
    expected = get_task("ntl_mul").generate("test_extrapolation", 5, seed=0)
    assert [r["prompt"] for r in records] == [e.prompt for e in expected]


def test_cli_generate_bad_task_exits_with_message(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--task", "nope"])
    assert exc.value.code == 2
    assert "Unknown task 'nope'" in capsys.readouterr().err
