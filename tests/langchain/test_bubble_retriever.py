"""``langchain_bridge.BubbleRetriever`` over real Chroma, MiniLM and spaCy: the standard suite and more.

One small BubbleRAG index (six demo documents) is shared by LangChain's standard retriever suite
and the tests below; the one-line swap builds the graph from an app's own langchain-chroma store.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import chromadb
import networkx as nx
import pytest
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import ValidationError

from langchain_bridge import BubbleRetriever
from tests.fake_strategy import FakeStrategy

SMALL_IDS = (
    "marrowick-observatory",
    "ilse-varga",
    "tomas-brel",
    "anton-falk",
    "comet-varga",
    "corvane-conservatory",
)
QUERY = "Who built the telescope at Ilse Varga's observatory in Marrowick?"
QUERIES = [QUERY, "Which comet did Ilse Varga discover?", "Who taught Tomas Brel?", "Anton Falk"]


@pytest.fixture(scope="module")
def small_docs(lc_demo_docs: list[Document]) -> list[Document]:
    docs = [d for d in lc_demo_docs if d.id in SMALL_IDS]
    assert len(docs) == len(SMALL_IDS)
    return docs


@pytest.fixture(scope="module")
def retriever(
    small_docs: list[Document], lc_embeddings: Any, tmp_path_factory: pytest.TempPathFactory
) -> BubbleRetriever:
    return BubbleRetriever.from_documents(
        small_docs,
        embedding=lc_embeddings,
        persist_directory=tmp_path_factory.mktemp("bubble"),
        k=3,
        show_progress=False,
    )


class TestBubbleRetrieverStandard(RetrieversIntegrationTests):
    built: ClassVar[BubbleRetriever | None] = None

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _build_index(cls, lc_demo_docs: list[Document]) -> Iterator[None]:
        docs = [d for d in lc_demo_docs if d.id in SMALL_IDS]
        cls.built = BubbleRetriever.from_documents(
            docs, collection_name=f"std-{uuid.uuid4().hex[:12]}", k=2, show_progress=False
        )
        yield
        cls.built = None

    @property
    def retriever_constructor(self) -> type[BubbleRetriever]:
        return BubbleRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        assert self.built is not None
        return {"strategy": self.built.strategy, "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return QUERY

    def test_example_query_is_answered_from_evidence(self) -> None:
        assert self.built is not None
        docs = self.built.invoke(QUERY, k=10)
        assert len(docs) > 3
        assert len({d.id for d in docs}) == len(docs)
        assert docs[0].metadata["found_by"] == "evidence"
        assert docs[0].metadata["evidence_triples"]


def test_invoke_returns_chunks_with_provenance(retriever: BubbleRetriever) -> None:
    docs = retriever.invoke(QUERY)
    assert len(docs) == 3
    meta = docs[0].metadata
    assert meta["strategy"] == "bubble"
    assert {"doc_id", "score", "cosine", "evidence", "found_by", "ceg_rank", "evidence_triples"} <= set(meta)
    assert {d.metadata["doc_id"] for d in docs} & {"marrowick-observatory", "ilse-varga"}


def test_include_triples_field_and_per_call(retriever: BubbleRetriever) -> None:
    plain = retriever.invoke(QUERY)
    with_triples = retriever.invoke(QUERY, include_triples=True)
    assert len(with_triples) == len(plain) + 1
    assert with_triples[-1].metadata["type"] == "evidence_graph"
    field = BubbleRetriever(strategy=retriever.strategy, k=3, include_triples=True)
    assert field.invoke(QUERY)[-1].metadata["type"] == "evidence_graph"


async def test_concurrent_ainvoke_matches_serial(retriever: BubbleRetriever) -> None:
    serial = [[d.id for d in retriever.invoke(q)] for q in QUERIES]
    results = await asyncio.gather(*(retriever.ainvoke(q) for q in QUERIES * 5))
    assert [[d.id for d in r] for r in results] == serial * 5


def test_save_load_and_networkx_export(
    retriever: BubbleRetriever, lc_embeddings: Any, tmp_path: Path
) -> None:
    retriever.save(tmp_path / "copy")
    loaded = BubbleRetriever.load(
        tmp_path / "copy", embedding=lc_embeddings, k=3, store=retriever.strategy.store
    )
    assert [d.id for d in loaded.invoke(QUERY)] == [d.id for d in retriever.invoke(QUERY)]
    g = loaded.to_networkx()
    assert g.number_of_edges() == retriever.strategy.kg.num_edges


def test_add_and_delete_documents(small_docs: list[Document], lc_embeddings: Any) -> None:
    r = BubbleRetriever.from_documents(small_docs[:2], embedding=lc_embeddings, k=2, show_progress=False)
    new = Document(
        page_content="Zephyrine Quill opened the Quillworks studio in Pellmire in 1921.", id="zephyrine-quill"
    )
    assert r.add_documents([new]) == ["zephyrine-quill"]
    assert r.invoke("Who opened the Quillworks studio?")[0].metadata["doc_id"] == "zephyrine-quill"
    assert r.delete_documents(["zephyrine-quill"]) == 1
    assert all(d.metadata["doc_id"] != "zephyrine-quill" for d in r.invoke("Quillworks studio", k=5))
    with pytest.raises(TypeError, match="wrap it in a list"):
        r.delete_documents("zephyrine-quill")


def test_bad_input(retriever: BubbleRetriever) -> None:
    with pytest.raises(ValueError, match="empty"):
        retriever.invoke("   ")
    with pytest.raises(TypeError, match="unknown retrieve option"):
        retriever.invoke(QUERY, depth=3)
    with pytest.raises(ValidationError, match="BubbleRAG"):
        BubbleRetriever(strategy=FakeStrategy(), k=2)
    assert retriever.invoke(QUERY), "still usable"


# --------------------------------------------------------------------------- the one-line swap
@pytest.fixture(scope="module")
def swap_embeddings(make_embeddings: Any) -> Any:
    return make_embeddings()


@pytest.fixture(scope="module")
def swap_store(small_docs: list[Document], swap_embeddings: Any) -> Chroma:
    vs = Chroma(
        collection_name=f"app-{uuid.uuid4().hex[:12]}",
        embedding_function=swap_embeddings,
        client=chromadb.EphemeralClient(),
    )
    vs.add_documents([Document(page_content=d.page_content, metadata={"source": d.id}) for d in small_docs])
    return vs


def test_one_line_swap_from_vectorstore(
    swap_store: Chroma, swap_embeddings: Any, small_docs: list[Document]
) -> None:
    before = Counter(swap_embeddings.embedded_texts)
    swapped = BubbleRetriever.from_vectorstore(swap_store, k=3, show_progress=False)
    after = Counter(swap_embeddings.embedded_texts)
    assert all(after[d.page_content] == before[d.page_content] == 1 for d in small_docs), (
        "chunks not re-embedded"
    )
    assert swapped.strategy.report.counts["documents"] == len(small_docs)
    docs = swapped.invoke(QUERY)
    assert docs[0].metadata["source"] in SMALL_IDS
    assert docs[0].metadata["doc_id"] == docs[0].metadata["source"]
    with pytest.raises(TypeError, match=r"langchain_chroma\.Chroma"):
        BubbleRetriever.from_vectorstore(object())


def test_from_networkx(lc_embeddings: Any) -> None:
    g = nx.MultiDiGraph()
    g.add_edge("Ilse Varga", "Marrowick Observatory", label="founded")
    g.add_edge("Tomas Brel", "Ilse Varga", label="student of")
    g.add_edge("Tomas Brel", "Halden Institute", label="directed")
    r = BubbleRetriever.from_networkx(g, embedding=lc_embeddings, k=2, show_progress=False)
    docs = r.invoke("Which institute did the student of Ilse Varga direct?")
    assert docs[0].metadata["type"] == "evidence_graph"
    assert "Halden Institute" in " ".join(d.page_content for d in docs)
