"""The task API every evaluation task implements: `Example` and `Task`.

A task turns ``(split, n, seed)`` into a list of `Example`s. A runner consumes them as

    prompt  -> what the model sees,
    target  -> the answer text it must produce (training label / reference for metrics),
    answer  -> the exact answer value as canonical number text ("579.12"; used by numeric metrics),
    text()  -> ``prompt + sep + target``: the full training sequence for a causal LM,

and chooses its metrics from ``task.metrics`` (names of functions in `eval_harness.metrics`).

Contract of `Task.generate` (tested for every registered task):
- deterministic: the same ``(split, n, seed)`` gives the same examples on every machine and Python version
  (no use of the salted built-in ``hash``);
- prefix-stable: ``generate(split, n)`` is the first ``n`` examples of ``generate(split, m)`` for ``m >= n``,
  so data-size sweeps (FoNE Fig. 2a) train on nested subsets;
- disjoint: for one seed, no problem (e.g. an unordered operand pair) occurs in two of the splits
  "train", "valid", "test". Disjointness holds per seed: use one seed for all splits of one experiment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any


def canonical_number(value: Decimal | int) -> str:
    """Canonical exact text of a number: no exponent, no leading/trailing zeros, "-0" -> "0".

    Args:
        value: an exact `Decimal` or `int`.

    Returns:
        e.g. ``Decimal("579.120") -> "579.12"``, ``Decimal("1E+3") -> "1000"``, ``Decimal("-0.0") -> "0"``.
    """
    d = Decimal(value)
    if d == 0:
        return "0"
    text = format(d.normalize(), "f")
    return text


@dataclass(frozen=True)
class Example:
    """One evaluation/training example.

    Attributes:
        prompt: the text the model is given, e.g. ``"123.456+7.891="``.
        target: the answer text the model should produce, in the task's format, e.g. ``"131.347"``.
        answer: the exact answer value as canonical number text (`canonical_number`), e.g. ``"131.347"``;
            equal to `target` for non-numeric answers.
        metadata: JSON-serialisable facts about the example (operands as exact strings, op, view, ids, ...).
        sep: the text between prompt and target in `text()` (``""`` for ``"a+b="`` formats, ``" "`` after
            a question).
    """

    prompt: str
    target: str
    answer: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    sep: str = ""

    def text(self) -> str:
        """The full training sequence ``prompt + sep + target`` (no special tokens)."""
        return self.prompt + self.sep + self.target

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable record with keys prompt, target, answer, sep, metadata."""
        return {
            "prompt": self.prompt,
            "target": self.target,
            "answer": self.answer,
            "sep": self.sep,
            "metadata": dict(self.metadata),
        }


class Task:
    """Base class of all tasks. Subclasses set the attributes and implement `_generate`.

    Attributes:
        name: registry name, e.g. ``"fone_int_add_6"``.
        description: one line for ``python -m eval_harness tasks``.
        splits: split name -> default number of examples (the paper's sizes where the paper gives them): by default
            ``n_train``, ``n_valid``, ``n_test`` and, where the task has ``n_extrapolation``, ``test_extrapolation``.
        metrics: names of the metrics in `eval_harness.metrics` the source paper reports for this task.
        source: paper and section the task follows.
    """

    # How to get a larger split, appended to the capacity error (a plain class attribute, not a field).
    _capacity_hint = ""

    # Annotations only (no class-level values), so dataclass subclasses can declare them as fields.
    name: str
    description: str
    metrics: tuple[str, ...]
    source: str
    n_train: int
    n_valid: int
    n_test: int

    @property
    def splits(self) -> Mapping[str, int]:
        """Split name -> default number of examples, from the task's size fields (the generated tasks all have
        them; a task with other splits, such as `JsonlTask`, overrides this)."""
        sizes = {"train": self.n_train, "valid": self.n_valid, "test": self.n_test}
        if hasattr(self, "n_extrapolation"):
            sizes["test_extrapolation"] = self.n_extrapolation
        return sizes

    def capacity(self, split: str) -> int | None:
        """The most examples `split` can hold without repeating a problem, or None when unbounded.

        Tasks that sample with replacement (word problems) return None.
        """
        return None

    def generate(self, split: str, n: int | None = None, seed: int = 0) -> list[Example]:
        """Generate the first `n` examples of `split`.

        Args:
            split: one of ``self.splits`` (e.g. "train", "valid", "test").
            n: number of examples; None means the task's default size for the split (``self.splits[split]``).
            seed: non-negative int; fixes the whole train/valid/test partition and the order within each split.

        Returns:
            A list of `n` `Example`s.

        Raises:
            ValueError: unknown split, negative `n`, `n` above the split's capacity, or a bad seed.
        """
        if split not in self.splits:
            raise ValueError(
                f"Task {self.name!r} has no split {split!r}; valid splits: {sorted(self.splits)}. "
                f"Pass one of them as `split` (CLI: --split)."
            )
        if n is None:
            n = self.splits[split]
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"`n` must be an int or None, got {n!r} of type {type(n).__name__}.")
        if n < 0:
            raise ValueError(f"`n` must be >= 0, got {n}. Ask for 0 or more examples (CLI: --n).")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"`seed` must be a non-negative int, got {seed!r}. Pass e.g. seed=0 (CLI: --seed).")
        cap = self.capacity(split)
        if cap is not None and n > cap:
            raise ValueError(
                f"Split {split!r} of task {self.name!r} holds at most {cap} examples, got n={n}. "
                f"Ask for n <= {cap}{self._capacity_hint}."
            )
        return self._generate(split, n, seed)

    def _generate(self, split: str, n: int, seed: int) -> list[Example]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, splits={dict(self.splits)})"
