"""The `numadapter` command line: --help and the offline quickstart tour."""

from __future__ import annotations

import pytest

from numadapter import cli


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    assert "quickstart" in capsys.readouterr().out


def test_quickstart_tour_is_offline_and_exact(tmp_path):
    lines: list[str] = []
    counts = cli.quickstart(out=str(tmp_path / "tok"), print_fn=lines.append)
    out = "\n".join(lines)
    # DEMO_TEXT has 9 numbers: 2024, 117, 12,345.67, 3, 1,250, 6.5, 6.02214076e23, the 30-digit one, 30
    assert counts["numbers"] == 9
    assert counts["fone"] < counts["raw"] < counts["digits"]
    assert "decode(encode(text)) == text: True" in out
    assert "fone_decode(features) = 123456789012345678901234567890  (exact)" in out
    assert "602214076000000000000000" in out  # 6.02214076e23 expanded exactly
    assert (tmp_path / "tok" / "tokenizer.json").exists()


def test_unknown_command_fails():
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["fly"])
    assert exit_info.value.code == 2
