"""Fixtures of the reliability tests: every strategy of :data:`tests.reliability.cases.STRATEGIES`.

``real_strategy`` is each strategy built once per session with the real all-MiniLM-L6-v2
model over part of the demo corpus (shared: tests must not modify it). ``wiring_build``
builds a small index with the fake embedder, for tests that only check wiring (crash
safety, corruption, bad input) and may modify what they build.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from core.embed import SentenceTransformerEmbedder
from core.store import ChunkStore
from core.types import Document
from tests.core.conftest import unique_name
from tests.reliability.cases import (
    STRATEGIES,
    StrategyCase,
    shared_real_embedder,
    synthetic_documents,
    wiring_embedder,
)

RealStrategy = tuple[StrategyCase, Any]


@pytest.fixture(scope="session", params=STRATEGIES, ids=str)
def real_strategy(
    request: pytest.FixtureRequest, st_embedder: SentenceTransformerEmbedder, demo_docs_list: list[Document]
) -> RealStrategy:
    """``(case, strategy)``: the strategy over the demo corpus, real model, in-memory Chroma."""
    case: StrategyCase = request.param
    strategy = case.build(
        demo_docs_list[: case.corpus_size],
        embedder=shared_real_embedder(st_embedder),
        store=ChunkStore.ephemeral(unique_name(f"rel-{case.name}")),
    )
    return case, strategy


@pytest.fixture(scope="session")
def demo_docs_list() -> list[Document]:
    from core.data import load_demo_corpus

    return load_demo_corpus()


@pytest.fixture(params=STRATEGIES, ids=str)
def case(request: pytest.FixtureRequest) -> StrategyCase:
    """Each strategy's table entry."""
    param: StrategyCase = request.param
    return param


@pytest.fixture
def wiring_build(case: StrategyCase) -> Callable[..., Any]:
    """Builds ``case``'s strategy over ``n`` synthetic documents with the fake embedder.

    Keyword arguments go to the build (``persist_directory=...``, settings); the store is a
    fresh in-memory collection unless one is given.
    """

    def build(n: int = 12, **kwargs: Any) -> Any:
        kwargs.setdefault("embedder", wiring_embedder())
        if "persist_directory" not in kwargs:
            kwargs.setdefault("store", ChunkStore.ephemeral(unique_name(f"wire-{case.name}")))
        return case.build(synthetic_documents(n), **case.wiring_kwargs(), **kwargs)

    return build
