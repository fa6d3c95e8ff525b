"""Shared, non-test modules of the test suite: tiny models and tokenizers, adapter and dataset cases, launchers.

Tests import them as ``from helpers.tiny import ...`` (``tests/`` is on ``pythonpath`` in ``pyproject.toml``). A
constant or builder that two test modules need lives here, never in a test module that another one imports.
"""
