"""Generated arithmetic tasks: ``"a + b ="`` -> ``" c"`` prompt/completion pairs with exact integer answers.

The quick start trains on `addition_examples` (``numadapter quickstart``), recipes name them as data
(``data.source: addition``), and eval_harness's study and probes draw the same rows for the same seed.
"""

from __future__ import annotations

import random

__all__ = ["addition_examples", "arithmetic_examples"]


def _operand(rng: random.Random, min_digits: int, max_digits: int) -> int:
    digits = rng.randint(min_digits, max_digits)
    return rng.randrange(10 ** (digits - 1), 10**digits)


def addition_examples(
    n: int, min_digits: int = 3, max_digits: int = 4, seed: int = 0, exclude: set[str] | None = None
) -> list[dict[str, str]]:
    """`n` prompt/completion pairs ``{"prompt": "1234 + 567 =", "completion": " 1801"}`` (seeded, exact integers).

    `arithmetic_examples` with ``operator="+"``; see there for the arguments.
    """
    return arithmetic_examples(n, "+", min_digits, max_digits, seed, exclude)


def arithmetic_examples(
    n: int,
    operator: str = "+",
    min_digits: int = 3,
    max_digits: int = 4,
    seed: int = 0,
    exclude: set[str] | None = None,
) -> list[dict[str, str]]:
    """`n` prompt/completion pairs ``"a + b ="`` -> ``" a+b"`` or ``"a - b ="`` -> ``" a-b"`` (seeded, exact).

    Each operand first draws its digit count uniformly from [min_digits, max_digits], then a value with exactly that
    many digits, so short and long operands are equally common. For ``"-"`` the larger operand comes first, so the
    answer is never negative. Both operators draw the same operands for the same seed.

    Args:
        n: number of examples.
        operator: ``"+"`` or ``"-"``.
        min_digits, max_digits: operand digit counts (1 <= min_digits <= max_digits).
        seed: seed of the generator.
        exclude: prompts to skip (e.g. the training prompts, for a disjoint held-out set).

    Returns:
        The examples, in generation order.
    """
    if not 1 <= min_digits <= max_digits:
        raise ValueError(f"need 1 <= min_digits <= max_digits, got min_digits={min_digits}, max_digits={max_digits}.")
    if n < 0:
        raise ValueError(f"`n` must be >= 0, got {n}.")
    if operator not in ("+", "-"):
        raise ValueError(f"`operator` must be '+' or '-', got {operator!r}.")
    rng = random.Random(seed)
    rows: list[dict[str, str]] = []
    while len(rows) < n:
        a, b = _operand(rng, min_digits, max_digits), _operand(rng, min_digits, max_digits)
        if operator == "-":
            a, b = max(a, b), min(a, b)
        prompt = f"{a} {operator} {b} ="
        if exclude is not None and prompt in exclude:
            continue
        rows.append({"prompt": prompt, "completion": f" {a + b if operator == '+' else a - b}"})
    return rows
