"""Shared fixtures of the reliability tests (issue 16, item 3): one store of tiny tokenizers and bases per session,
and a saved FoNE adapter that the tests copy and damage."""

from __future__ import annotations

import shutil

import pytest
from helpers.adapter_cases import Case, Store, build


@pytest.fixture(scope="session")
def store(tmp_path_factory) -> Store:
    return Store(str(tmp_path_factory.mktemp("reliability")))


@pytest.fixture(scope="session")
def fone_adapter(store, tmp_path_factory):
    """``(case, path, config)``: an untouched llama FoNE adapter directory (copy it before editing)."""
    case = Case("llama", "fone", tie=False)
    model, _, config = build(store, case)
    path = str(tmp_path_factory.mktemp("fone-adapter") / "adapter")
    model.save_pretrained(path)
    return case, path, config


@pytest.fixture
def adapter_copy(fone_adapter, tmp_path):
    """A fresh copy of the saved FoNE adapter directory, free to edit."""
    _, path, _ = fone_adapter
    target = str(tmp_path / "adapter")
    shutil.copytree(path, target)
    return target
