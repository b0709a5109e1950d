"""Shared fixtures: the tiny random model (same tokenizer as SmolLM2) is cheap enough to build per test module."""

from __future__ import annotations

import pytest

from comprl.llm import HFEngine, load_model


@pytest.fixture(scope="module")
def tiny():
    """(model, tokenizer) of the tiny random Llama; module-scoped because trainer tests modify weights."""
    return load_model("tiny-random", seed=0)


@pytest.fixture(scope="module")
def tiny_engine(tiny):
    model, tokenizer = tiny
    return HFEngine(model, tokenizer)
