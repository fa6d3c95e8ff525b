"""The quick start's task: 3-4 digit integer addition written ``"1234 + 567 ="`` -> ``" 1801"`` (`numadapter
quickstart`, `numadapter.data.arithmetic.addition_examples`), as a harness task, so that the methods can be compared
on it (preset ``pretrained``, `eval_harness.presets`).

Each operand first draws its digit count uniformly from [3, 4], then a value with exactly that many digits (as the
quick start draws them), so short and long operands are equally common; both operand orders occur. The answer
follows a space (``sep=" "``), as the quick start's completion does. An unordered operand pair belongs to exactly one
of train / valid / test (`sampling.hash_split`: 85% / 5% / 10% of the pairs), so held-out problems are unseen;
sampling is with replacement inside a split (about 98 million ordered pairs: repeats are rare). The examples are
not the quick start's own list (it draws from one generator for all of them), only the same distribution.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .base import Example, Task
from .sampling import derive_key, sample_disjoint


@dataclass(frozen=True, eq=False)
class QuickstartAdditionTask(Task):
    """``a + b =`` -> ``" a+b"`` with operands of `min_digits` to `max_digits` digits.

    Args:
        name: registry name.
        min_digits, max_digits: operand digit counts (1 <= min_digits <= max_digits).
        n_train, n_valid, n_test: default split sizes (train: the quick start's 8,000; valid: its 200 held-out).
    """

    name: str = "quickstart_add"
    min_digits: int = 3
    max_digits: int = 4
    n_train: int = 8000
    n_valid: int = 200
    n_test: int = 1000
    description: str = "3-4 digit integer addition 'a + b =' -> ' a+b', the quick start's task (numadapter quickstart)"
    metrics: tuple[str, ...] = ("exact_match", "mae")
    source: str = "numadapter quick start (numadapter.data.arithmetic.addition_examples)"

    def __post_init__(self) -> None:
        if not 1 <= self.min_digits <= self.max_digits:
            raise ValueError(
                f"need 1 <= min_digits <= max_digits, got min_digits={self.min_digits}, max_digits={self.max_digits}."
            )

    def _operand(self, rng: random.Random) -> int:
        digits = rng.randint(self.min_digits, self.max_digits)
        return rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10**digits - 1)

    def _draw(self, rng: random.Random) -> tuple[str, Example]:
        a, b = self._operand(rng), self._operand(rng)
        total = str(a + b)
        example = Example(
            prompt=f"{a} + {b} =",
            target=total,
            answer=total,
            metadata={"task": self.name, "op": "+", "operands": [str(a), str(b)]},
            sep=" ",
        )
        return f"+|{min(a, b)}|{max(a, b)}", example

    def _generate(self, split: str, n: int, seed: int) -> list[Example]:
        rng = random.Random(f"quickstart_add|{self.name}|{seed}|{split}")
        return sample_disjoint(self._draw, split, n, rng, derive_key("quickstart_add", self.name, seed))


def quickstart_tasks() -> list[Task]:
    """The quick start's addition task."""
    return [QuickstartAdditionTask()]
