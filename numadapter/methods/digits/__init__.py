"""``encoding="digits"``: numbers as digit tokens, optionally after an [AGG] aggregate (`DigitsMethod`)."""

from numadapter.methods.digits.method import DigitsMethod

METHOD = DigitsMethod()

__all__ = ["METHOD", "DigitsMethod"]
