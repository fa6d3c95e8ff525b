"""Hypothesis strategies shared by the data tests (`tests/numadapter/data/`)."""

from __future__ import annotations

from hypothesis import strategies as st

WORDS = st.sampled_from(["aa", "bb", "total", "x", "paid"])
NUMBERS = st.one_of(
    st.integers(0, 99999).map(str),
    st.integers(1, 999).map(lambda n: f"-{n}"),
    st.tuples(st.integers(0, 999), st.integers(0, 99)).map(lambda p: f"{p[0]}.{p[1]:02d}"),
    st.integers(1000, 999999).map(lambda n: f"{n:,}"),
)
# random texts of words and numbers (signs, decimals, thousands separators)
TEXT = st.lists(st.one_of(WORDS, NUMBERS), min_size=1, max_size=10).map(" ".join)
