"""The one-line swap to UMG / UMGP over an existing langchain-chroma app, with the standard suite.

The app split the demo corpus with a LangChain splitter (``add_start_index=True``, so chunks
overlap and carry their offsets) into a langchain-chroma store; ``UMGRetriever.from_vectorstore``
rebuilds each document from its chunks, builds the sentence windows beside the app's collection
and answers in one line.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import chromadb
import pytest
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_bridge import UMGRetriever

QUERY = "Who built the telescope at Ilse Varga's observatory in Marrowick?"


def _app_store(docs: list[Document], embeddings: Any) -> Chroma:
    splitter = RecursiveCharacterTextSplitter(chunk_size=300, chunk_overlap=60, add_start_index=True)
    vs = Chroma(
        collection_name=f"app-{uuid.uuid4().hex[:12]}",
        embedding_function=embeddings,
        client=chromadb.EphemeralClient(),
    )
    chunks = splitter.split_documents(
        [
            Document(page_content=d.page_content, metadata={"source": d.id, "title": d.metadata["title"]})
            for d in docs
        ]
    )
    assert len(chunks) > len(docs)  # some documents are split, so order and overlap matter
    vs.add_documents(chunks)
    return vs


@pytest.fixture(scope="module")
def app_embeddings(make_embeddings: Any) -> Any:
    return make_embeddings()


@pytest.fixture(scope="module")
def app_store(lc_demo_docs: list[Document], app_embeddings: Any) -> Chroma:
    return _app_store(lc_demo_docs, app_embeddings)


@pytest.fixture(scope="module")
def swapped(app_store: Chroma) -> UMGRetriever:
    return UMGRetriever.from_vectorstore(app_store, k=4, parent_promotion=True, show_progress=False)


def test_swap_rebuilds_documents_and_keeps_the_app_store(
    swapped: UMGRetriever, app_store: Chroma, lc_demo_docs: list[Document]
) -> None:
    before = app_store._collection.count()
    assert swapped.strategy.report.counts["documents"] == len(lc_demo_docs)
    assert swapped.parent_promotion is True
    # The windows live beside the app's collection, which is only read.
    assert swapped.strategy.store.name == f"{app_store._collection.name}_umg"
    assert app_store._collection.count() == before
    # Overlaps were removed: every window is a passage of its original document (the splitter
    # strips the whitespace between chunks, which comes back as one space).
    units = swapped.strategy.store.get(include_embeddings=False)
    originals = {d.id: " ".join(d.page_content.split()) for d in lc_demo_docs}
    for text, meta in zip(units.texts, units.metadatas, strict=True):
        assert " ".join(text.split()) in originals[meta["doc_id"]]
    assert units.metadatas[0]["title"]  # document metadata every chunk agreed on is kept


def test_swap_answers_with_umgp_provenance(swapped: UMGRetriever, app_store: Chroma) -> None:
    docs = swapped.invoke(QUERY)
    assert len(docs) == 4
    assert {d.metadata["strategy"] for d in docs} == {"umgp"}
    assert docs[0].metadata["doc_id"] in {"marrowick-observatory", "ilse-varga", "tomas-brel"}
    for d in docs:
        assert d.metadata["confidences"]
        assert d.metadata["expert_scores"]
    assert {d.metadata["strategy"] for d in swapped.invoke(QUERY, parent_promotion=False)} == {"umg"}


def test_swap_errors(app_store: Chroma) -> None:
    with pytest.raises(TypeError, match=r"langchain_chroma\.Chroma"):
        UMGRetriever.from_vectorstore(object())
    with pytest.raises(ValueError, match="no embedding function"):
        UMGRetriever.from_vectorstore(Chroma(collection_name=f"e-{uuid.uuid4().hex[:8]}"))
    with pytest.raises(ValueError, match="uses no LLM"):
        UMGRetriever.from_vectorstore(app_store, llm=object(), show_progress=False)


class TestUMGSwapStandard(RetrieversIntegrationTests):
    """LangChain's standard retriever suite over ``UMGRetriever.from_vectorstore``."""

    built: ClassVar[UMGRetriever | None] = None

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _build_index(cls, lc_demo_docs: list[Document], make_embeddings: Any) -> Iterator[None]:
        store = _app_store(lc_demo_docs[:8], make_embeddings())
        cls.built = UMGRetriever.from_vectorstore(store, k=2, parent_promotion=True, show_progress=False)
        yield
        cls.built = None

    @property
    def retriever_constructor(self) -> type[UMGRetriever]:
        return UMGRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        assert self.built is not None
        return {"strategy": self.built.strategy, "k": 2, "parent_promotion": True}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


def test_swapping_again_rebuilds_the_windows(lc_demo_docs: list[Document], make_embeddings: Any) -> None:
    """An app that swaps at every start rebuilds UMG's windows instead of failing."""
    app_store = _app_store(lc_demo_docs[:6], make_embeddings())
    first = UMGRetriever.from_vectorstore(app_store, k=3, show_progress=False, granularities=(2, 8))
    expected = [d.id for d in first.invoke(QUERY)]
    again = UMGRetriever.from_vectorstore(app_store, k=3, show_progress=False, granularities=(2, 8))
    assert again.strategy.store.name == first.strategy.store.name
    assert again.strategy.store.count() == again.strategy.num_units  # replaced, not doubled
    assert [d.id for d in again.invoke(QUERY)] == expected
    occupied = again.strategy.store  # an explicit units store must be empty
    with pytest.raises(ValueError, match="already holds units"):
        UMGRetriever.from_vectorstore(app_store, units_store=occupied, show_progress=False)
