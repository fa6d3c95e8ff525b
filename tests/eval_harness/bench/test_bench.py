"""The table-token benchmark (corpus, hand-counted tokens), the from-scratch throughput benchmark and the run-all
command (``python -m eval_harness.bench``). No timing assertions: timed numbers are only checked to be positive."""

import json
import os
import subprocess
import sys

import pytest
from helpers.paths import ROOT

from eval_harness.bench import all as bench_all
from eval_harness.bench import dataset_size
from eval_harness.bench.table_tokens import build_encoders, count_tokens, make_tables
from eval_harness.bench.train_throughput import run as run_throughput
from numadapter.numbers import find_numbers

# Hand-written: numbers 2019, -12.5, 2020, 1,234.
TABLE = "| Year | Sales |\n|---|---|\n| 2019 | -12.5 |\n| 2020 | 1,234 |"
# Tokens of each number written alone, counted by hand:
# digits : 2019 -> 2 0 1 9 (4); -12.5 -> - 1 2 . 5 (5); 2020 (4); 1,234 -> 1 , 2 3 4 (5)         = 18
# subword: Llama 3 cuts digit runs left to right into groups of <= 3: 2019 -> 201 9 (2); -12.5 -> - 12 . 5 (4);
#          2020 -> 202 0 (2); 1,234 -> 1 , 234 (3)                                                  = 11
# fone   : one [NUM] each; sign_policy="text" keeps "-" as a token before it: 1 + 2 + 1 + 1          = 5
HAND_NUMBER_TOKENS = {"digits": 18, "subword": 11, "fone": 5}


@pytest.fixture(scope="module")
def encoders(tmp_path_factory):
    return build_encoders(str(tmp_path_factory.mktemp("tok")), "text", (8, 4))


def test_table_corpus_is_seeded_and_every_data_cell_is_one_number():
    tables = make_tables(30, seed=3)
    assert tables == make_tables(30, seed=3)
    assert tables != make_tables(30, seed=4)
    cells = 0
    for table in tables:
        header, separator, *rows = table.split("\n")
        assert find_numbers(header) == []  # column names are words
        assert set(separator) == {"|", "-"}
        assert 3 <= len(rows) <= 8
        width = header.count("|") - 1
        assert 3 <= width <= 6
        for row in rows:
            assert row.startswith("| ") and row.endswith(" |")
            row_cells = row[2:-2].split(" | ")
            assert len(row_cells) == width
            for cell in row_cells:
                spans = find_numbers(cell)
                assert [s.text for s in spans] == [cell], cell
                cells += 1
        assert len(find_numbers(table)) == width * len(rows)  # no number spans two cells
    assert cells > 30 * 3 * 3 - 1


def test_table_corpus_rejects_bad_size():
    with pytest.raises(ValueError, match="`n_tables` must be a positive integer, got 0"):
        make_tables(0)


def test_hand_counted_number_tokens(encoders):
    counts = count_tokens([TABLE], encoders)
    assert counts["numbers"] == [4]
    assert {s: v[0] for s, v in counts["number"].items()} == HAND_NUMBER_TOKENS
    # The digits base tokenizes the text between numbers the same with and without [NUM], so the whole tables
    # differ by exactly the difference of the number tokens (18 - 5).
    assert counts["table"]["digits"][0] - counts["table"]["fone"][0] == 18 - 5


def test_sign_as_feature_makes_every_number_one_token(tmp_path):
    counts = count_tokens([TABLE], build_encoders(str(tmp_path), "feature", (8, 4)))
    assert counts["number"]["fone"] == [4]


def test_out_of_range_numbers_are_an_error_not_a_silent_count(tmp_path):
    narrow = build_encoders(str(tmp_path), "text", (3, 1))  # 2019, 2020 and 1,234 need 4 integer places
    with pytest.raises(
        ValueError, match=r"Table 0: NumberTokenizer produced 1 \[NUM\] tokens for 4 numbers.*int_digits=3"
    ):
        count_tokens([TABLE], narrow)


def test_train_throughput_tiny_run_gives_positive_numbers():
    result = run_throughput(model_size=1, batch_size=4, steps=2, repeats=1, warmup=1)
    assert set(result["methods"]) == {"fone", "digits", "subword", "fone_ids_only", "fone_sequence"}
    for row in result["methods"].values():
        assert row["step_s"] > 0 and row["examples_per_s"] > 0 and row["tokens_per_s"] > 0
        assert row["epoch_s_estimate"] > 0
    # FoNE is fed as the runner feeds it: the prompt alone, bos [NUM] + [NUM] = (5 tokens; not timed, exact)
    fone = result["methods"]["fone"]
    assert fone["train_format"] == "head" and fone["seq_len_mean"] == 5.0
    # ... and timed in the same rotation fed bos [NUM] + [NUM] = [NUM] eos, as the baselines are fed
    assert result["methods"]["fone_sequence"]["seq_len_mean"] == 7.0
    assert result["methods"]["digits"]["train_format"] == "sequence"
    assert result["methods"]["digits"]["seq_len_mean"] > result["methods"]["subword"]["seq_len_mean"] > 7.0
    assert set(result["epoch_time_ratio"]) == {
        "digits/fone", "subword/fone", "fone_ids_only/fone", "fone_sequence/fone"
    }  # fmt: skip
    assert all(value > 0 for value in result["epoch_time_ratio"].values())
    assert result["ratio"] == result["epoch_time_ratio"]["digits/fone"]
    # the ceiling: the FoNE run's own Llama on the same 5-token ids, without number work
    assert result["methods"]["fone_ids_only"]["seq_len_mean"] == 5.0 and result["ceiling"] > 0
    assert result["sequence_ratio"] > 0
    sequence = run_throughput(model_size=1, batch_size=4, steps=1, repeats=1, warmup=0, train_format="sequence")
    assert sequence["methods"]["fone"]["seq_len_mean"] == 7.0 and sequence["sequence_ratio"] is None
    assert "fone_sequence" not in sequence["methods"]
    plain = run_throughput(methods=["digits", "subword"], reference="digits", model_size=1, batch_size=4, steps=1,
                           repeats=1, warmup=0)  # fmt: skip
    assert plain["ceiling"] is None and set(plain["methods"]) == {"digits", "subword"}


def test_dataset_size_stores_one_entry_per_number(capsys):
    result = dataset_size.main(["--examples", "64", "--methods", "fone"])
    (run,) = result["runs"]
    # "a+b=" + " c": bos [NUM] + [NUM] = [NUM] eos, 7 tokens and 3 numbers; 6-digit decimals: 4 + 3 places
    assert (run["tokens"], run["numbers"], run["places"]) == (7 * 64, 3 * 64, 7)
    dense, sparse = run["dense"]["columns"], run["sparse"]["columns"]
    assert dense["num_digits"] >= run["tokens"] * 7 * 8  # int64 per place per token
    assert sparse["number_digits"] <= run["numbers"] * 7 + 4 * 65  # int8 per place per number, plus offsets
    assert run["ratio_arrow"] == run["dense"]["arrow_bytes"] / run["sparse"]["arrow_bytes"] > 1
    assert "fone" in capsys.readouterr().out


def test_train_throughput_rejects_bad_options():
    with pytest.raises(ValueError, match="`reference` 'xval' must be one of the methods"):
        run_throughput(methods=["fone", "digits"], reference="xval")
    with pytest.raises(ValueError, match="clock='thread' needs device='cpu' and threads=1"):
        run_throughput(clock="thread", threads=2, device="cpu")


def test_headlines_compare_with_targets():
    slow = {"ratio_to_lora": {"numadapter": 1.05}, "flops_ratio_to_lora": {"numadapter": 1.02}}
    fast = {"ratio_to_lora": {"numadapter": 1.01}, "flops_ratio_to_lora": {"numadapter": 1.02}}
    assert bench_all.headlines("train_step", slow)[0]["met"] is False  # 1.05 > 1.03
    assert bench_all.headlines("train_step", fast)[0]["met"] is True
    throughput = {"setup": {"reference": "fone"}, "epoch_time_ratio": {"digits/fone": 3.9, "subword/fone": 2.0},
                  "methods": {"fone": {"train_format": "sequence"}}}  # fmt: skip
    rows = bench_all.headlines("train_throughput", throughput)
    assert [(r["value"], r["op"], r["met"]) for r in rows] == [(3.9, ">=", False), (2.0, None, None)]
    head = dict(throughput, epoch_time_ratio={"digits/fone": 4.7}, methods={"fone": {"train_format": "head"}},
                sequence_ratio=3.4)  # fmt: skip
    rows = bench_all.headlines("train_throughput", head)
    assert [(r["value"], r["op"], r["met"]) for r in rows] == [(4.7, ">=", True), (3.4, None, None)]
    assert "prompts alone" in rows[0]["note"] and "fone_sequence" in rows[1]["metric"]


def test_bench_options_are_validated():
    with pytest.raises(ValueError, match=r"unknown benchmark\(s\) \['nope'\]; choose from table_tokens"):
        bench_all.parse_only("table_tokens,nope")
    assert bench_all.parse_only("train_step,table_tokens") == ["table_tokens", "train_step"]
    with pytest.raises(ValueError, match="needs --threads 1, got threads=None"):
        bench_all.run_all("unused", clock="thread")


def test_run_all_command_writes_json_and_markdown(tmp_path):
    out = tmp_path / "bench"
    command = [sys.executable, "-m", "eval_harness.bench", "--quick", "--only", "table_tokens,tokenizer_speed",
               "--out", str(out)]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[1/2] table_tokens" in done.stdout and "[2/2] tokenizer_speed" in done.stdout
    report = json.loads((out / "bench.json").read_text())
    assert list(report["benchmarks"]) == ["table_tokens", "tokenizer_speed"]
    assert report["failed"] == []
    assert report["options"]["quick"] is True
    for key in ("cpu_count", "torch", "torch_threads", "device", "date"):
        assert key in report["machine"]
    rows = {(r["benchmark"], r["metric"]): r for r in report["summary"]}
    speed = rows[("tokenizer_speed", "throughput, NumberTokenizer / raw")]
    assert speed["value"] == report["benchmarks"]["tokenizer_speed"]["result"]["ratio"] > 0
    assert (speed["op"], speed["target"], speed["met"]) == (">=", 0.5, speed["value"] >= 0.5)
    table = rows[("table_tokens", "tokens per table, digits / fone")]
    assert table["value"] > 1 and table["met"] is None
    markdown = (out / "bench.md").read_text()
    assert "| benchmark | measured ratio | target | met? |" in markdown
    assert f"| tokenizer_speed: throughput, NumberTokenizer / raw | {speed['value']:.3f} | >= 0.5 |" in markdown
    assert (
        f"| table_tokens: tokens per table, digits / fone | {table['value']:.3f} | reference only | n/a |" in markdown
    )
