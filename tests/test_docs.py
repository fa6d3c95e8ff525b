"""Every pointer to the design notes resolves inside the repository.

Docstrings and comments cite the notes as ``docs/DESIGN.md, "Section name"`` (or ``docs/papers.md, "FoNE"``). This
checks, in the code, the tests, the recipes and the README, that each cited file exists under ``docs/`` and that each
cited section is a heading of it (a leading "12. " of a numbered heading is ignored), that nothing points outside
the repository (the project's old ``shared`` folder) or at a bare design file name without ``docs/``, and that the
notes' own links between each other resolve the same way. Every test path they name (``tests/...``, as in
``pytest tests/numadapter/tokenization/test_lossless.py``) exists, so a moved test cannot leave a stale pointer.
The guide's Python block (a custom decode loop on the model's own forward) runs and gives what its comment says.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from helpers.adapter_cases import Store
from helpers.generation_cases import build, encourage_numbers
from helpers.paths import ROOT

from numadapter.generation import generate

DOCS = ROOT / "docs"
SCANNED = ("numadapter", "eval_harness", "tests", "recipes", "scripts")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".txt", ".toml", ".sh"}
# docs/<file>.md, optionally followed by `, "Section"` (the section may wrap onto the next line of a docstring)
POINTER = re.compile(r'docs/(?P<file>[\w./-]+?\.md)(?:,\s*"(?P<section>[^"]+)")?')
# inside docs/: [text](other.md), "Section"
LINK = re.compile(r'\]\((?P<file>[\w./-]+?\.md)\)(?:,\s*"(?P<section>[^"]+)")?')
OUTSIDE = re.compile(r"\.\./shared|shared/papers|(?<![\w/])(?:DESIGN|STYLE)\.md")
THIS = Path(__file__).resolve()
# a repository path under tests/; one followed by a placeholder (`tests/numadapter/test_<module>.py`) or a glob is
# a pattern, not a path
TEST_PATH = re.compile(r"(?<![\w/.-])tests/[\w./-]*(?![\w./<*{-])")


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder in SCANNED:
        files += [
            p
            for p in sorted((ROOT / folder).rglob("*"))
            if p.is_file() and p.suffix in SUFFIXES and "fixtures" not in p.parts
        ]
    return [path for path in files if path != THIS]  # this file holds examples of broken pointers


def headings(path: Path) -> set[str]:
    """The headings of a markdown file (outside code fences), normalised: no number prefix, one space, lower case."""
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6}\s+(.*)", line)):
            found.add(normalise(re.sub(r"^\d+\.\s+", "", match.group(1))))
    return found


def normalise(text: str) -> str:
    return " ".join(text.split()).lower()


def where(path: Path, text: str, offset: int) -> str:
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return f"{name}:{text.count(chr(10), 0, offset) + 1}"


def pointer_problems(path: Path, pattern: re.Pattern = POINTER, base: Path = DOCS) -> list[str]:
    """One line per pointer in `path` whose file is not under `base` or whose section is not a heading of it."""
    text = path.read_text(encoding="utf-8")
    problems = []
    for match in pattern.finditer(text):
        target, section = base / match.group("file"), match.group("section")
        if not target.is_file():
            problems.append(f"{where(path, text, match.start())}: {match.group(0)!r} names no file under {base}")
        elif section and normalise(re.sub(r"^\d+\.\s+", "", section)) not in headings(target):
            problems.append(f"{where(path, text, match.start())}: no heading {section!r} in {target}")
    return problems


def test_docs_exist_with_the_sections_the_code_cites():
    assert (DOCS / "DESIGN.md").is_file() and (DOCS / "papers.md").is_file()
    assert {"side tensors travel with input_ids", "safe to load", "data flow"} <= headings(DOCS / "DESIGN.md")
    assert {"fone", "xval", "digit aggregation", "number token loss"} <= headings(DOCS / "papers.md")


def test_every_docs_pointer_resolves():
    files = scanned_files()
    cited = [path for path in files if POINTER.search(path.read_text(encoding="utf-8"))]
    assert len(cited) >= 20, "the code cites the design notes in many places; did the scan lose them?"
    problems = [problem for path in files for problem in pointer_problems(path)]
    assert not problems, "\n".join(problems)


def test_the_notes_link_to_each_other_correctly():
    problems = [problem for path in sorted(DOCS.glob("*.md")) for problem in pointer_problems(path, LINK, DOCS)]
    assert not problems, "\n".join(problems)


def test_nothing_points_outside_the_repository():
    problems = []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8")
        problems += [f"{where(path, text, m.start())}: {m.group(0)!r}" for m in OUTSIDE.finditer(text)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('see docs/DESIGN.md, "Safe to load"', True),
        ('see docs/DESIGN.md, "12. Safe to load"', True),  # the number prefix of a heading is ignored
        ('see docs/DESIGN.md, "Side tensors travel\n    with input_ids"', True),  # wrapped in a docstring
        ('see docs/DESIGN.md, "A section that is not there"', False),
        ("see docs/NOPE.md", False),
        ("run `pytest -m slow tests/reliability/test_torn_dist_checkpoints.py`.", True),
        ("built with tests/helpers/tiny.py, under tests/fixtures/.", True),
        ("a test of a module goes to `tests/numadapter/test_<module>.py`", True),  # a pattern, not a path
        ("see tests/test_generation.py", False),  # moved to tests/numadapter/generation/test_generate.py
        ("from `tests/tiny.py`", False),
    ],
)
def test_the_checker_itself(tmp_path, text, ok):
    """`pointer_problems` for ``docs/`` pointers, `missing_test_paths` for ``tests/`` paths."""
    probe = tmp_path / "probe.py"
    probe.write_text(text, encoding="utf-8")
    problems = missing_test_paths(probe) if "tests/" in text else pointer_problems(probe)
    assert (problems == []) is ok, problems


@pytest.mark.parametrize(
    "text", ["see ../shared/DESIGN.md", "see DESIGN.md point 3", "STYLE.md says", "shared/papers/x"]
)
def test_outside_pointers_are_caught(text):
    assert OUTSIDE.search(text)


def missing_test_paths(path: Path) -> list[str]:
    """One line per ``tests/...`` path named in `path` that does not exist in the repository."""
    text = path.read_text(encoding="utf-8")
    problems = []
    for match in TEST_PATH.finditer(text):
        named = match.group(0).rstrip(".")
        if not (ROOT / named).exists():
            problems.append(f"{where(path, text, match.start())}: {named!r} does not exist")
    return problems


def test_every_named_test_path_exists():
    files = scanned_files() + sorted(DOCS.glob("*.md")) + [ROOT / ".ci" / "run", ROOT / "pyproject.toml"]
    named = [path for path in files if TEST_PATH.search(path.read_text(encoding="utf-8"))]
    assert len(named) >= 20, "the code and docs name test files in many places; did the scan lose them?"
    problems = [problem for path in files for problem in missing_test_paths(path)]
    assert not problems, "\n".join(problems)


def test_the_guides_decode_loop_runs_and_generates_what_generate_does(tmp_path, capsys):
    """The guide's custom loop (cached public forward, the head's numbers fed back) on a tiny FoNE Llama that
    generates [NUM] at cached steps: the same tokens and numbers as numadapter.generate. Before the forward kept the
    numbers behind its cache, the context head read only the fed [NUM] at those steps and wrote other numbers."""
    (block,) = re.findall(r"```python\n(.*?)```", (DOCS / "guide.md").read_text(), flags=re.S)
    model, ntok = build(Store(tmp_path), "llama", "fone")
    assert model.peft_config["default"].fone_head_input == "context"
    prompt = "What is 7 + 8 ="
    encourage_numbers(model, ntok, [prompt], want=2)
    expected = generate(model, ntok, prompt, max_new_tokens=6, eos_token_id=[], return_dict=True)
    namespace: dict = {"model": model, "ntok": ntok}
    with torch.no_grad():
        exec(compile(block, str(DOCS / "guide.md"), "exec"), namespace)
    assert namespace["ids"] == expected.token_ids[0]
    assert namespace["numbers"] == [str(number) for number in expected.numbers[0]]
    assert expected.token_ids[0][1:].count(ntok.num_token_id) >= 1  # a number written at a cached step
    assert f"{namespace['ids']} {namespace['numbers']}" in capsys.readouterr().out
