"""LangChain's standard retriever suite against a real ``BridgeRetriever.from_documents`` index.

The index is built once for the class: a handful of demo documents in an in-memory Chroma, with the
default embedder (all-MiniLM-L6-v2, ``embedding=None``) and the default spaCy entity extractor.
The suite then constructs ``BridgeRetriever(strategy=<that index>, k=...)`` as often as it likes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_bridge import BridgeRetriever

#: A small corpus: the observatory story plus a few distractors (about a dozen chunks).
SMALL_CORPUS_IDS = (
    "marrowick-observatory",
    "ilse-varga",
    "tomas-brel",
    "anton-falk",
    "comet-varga",
    "corvane-conservatory",
)
QUERY = "Who built the telescope at Ilse Varga's observatory in Marrowick?"


class TestBridgeRetrieverStandard(RetrieversIntegrationTests):
    built: ClassVar[BridgeRetriever | None] = None

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _build_index(cls, lc_demo_docs: list[Document]) -> Iterator[None]:
        docs = [d for d in lc_demo_docs if d.id in SMALL_CORPUS_IDS]
        assert len(docs) == len(SMALL_CORPUS_IDS)
        cls.built = BridgeRetriever.from_documents(
            docs,
            embedding=None,
            collection_name=f"std-{uuid.uuid4().hex[:12]}",
            k=2,
            show_progress=False,
        )
        yield
        cls.built = None

    @property
    def retriever_constructor(self) -> type[BridgeRetriever]:
        return BridgeRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        assert self.built is not None
        return {"strategy": self.built.strategy, "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return QUERY

    # Not part of the standard suite: the preconditions it silently relies on.

    def test_uses_the_default_embedder(self) -> None:
        assert self.built is not None
        assert self.built.strategy.embedder.name == "sentence-transformers:all-MiniLM-L6-v2"
        assert self.built.strategy.embedder.dimension == 384

    def test_example_query_has_more_than_three_results(self) -> None:
        assert self.built is not None
        docs = self.built.invoke(QUERY, k=10)
        assert len(docs) > 3
        assert len({d.id for d in docs}) == len(docs)
        # The query names entities of the corpus, so the bridge (not the dense fallback) answers it.
        assert docs[0].metadata["matched_entities"]
        assert docs[0].metadata["fallback"] is None
