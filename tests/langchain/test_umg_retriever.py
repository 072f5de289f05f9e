"""``langchain_bridge.UMGRetriever`` and ``ParentPromotionCompressor`` over real Chroma and embeddings.

One small UMG-RAG index (six demo documents) is shared by the retriever tests and LangChain's
standard suite (UMG and UMGP). The compressor runs on hand-made documents, behind a plain
langchain-chroma retriever over sentence-level chunks (``ContextualCompressionRetriever``),
and behind the UMG retriever itself.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import chromadb
import pytest
from langchain_chroma import Chroma
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from langchain_text_splitters import RecursiveCharacterTextSplitter
from pydantic import ValidationError

from core.strategies.umg import UMGRAG
from core.text import split_sentences
from langchain_bridge import ParentPromotionCompressor, StrategyRetriever, UMGRetriever
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
QUERIES = [
    QUERY,
    "Which comet did Ilse Varga discover?",
    "Who taught at the Corvane Conservatory?",
    "Anton Falk",
]
RESULT_KEYS = {
    "doc_id",
    "sent_start",
    "sent_end",
    "start_index",
    "end_index",
    "granularity",
    "granularities",
    "expert_scores",
    "confidences",
    "promoted",
    "strategy",
    "score",
    "id",
}
NEW_DOC = Document(
    page_content="Zephyrine Quill was a glassblower who opened the Quillworks studio in Pellmire in 1921. "
    "The Quillworks made lenses for lighthouses along the Bay of Corvane.",
    id="zephyrine-quill",
)


def sig(docs: Sequence[Document]) -> list[tuple[str | None, str, float]]:
    return [(d.id, d.page_content, round(float(d.metadata.get("score", 0.0)), 6)) for d in docs]


def overlapping(docs: Sequence[Document]) -> bool:
    spans = [(d.metadata["doc_id"], d.metadata["start_index"], d.metadata["end_index"]) for d in docs]
    return any(
        a[0] == b[0] and a[1] < b[2] and b[1] < a[2] for i, a in enumerate(spans) for b in spans[i + 1 :]
    )


@pytest.fixture(scope="module")
def small_docs(lc_demo_docs: list[Document]) -> list[Document]:
    docs = [d for d in lc_demo_docs if d.id in SMALL_IDS]
    assert len(docs) == len(SMALL_IDS)
    return docs


@pytest.fixture(scope="module")
def texts(small_docs: list[Document]) -> dict[str, str]:
    return {str(d.id): d.page_content for d in small_docs}


@pytest.fixture(scope="module")
def umg_retriever(small_docs: list[Document], lc_embeddings: Any) -> UMGRetriever:
    """Six demo documents; shared, never modified."""
    return UMGRetriever.from_documents(
        small_docs,
        embedding=lc_embeddings,
        collection_name=f"umg-{uuid.uuid4().hex[:12]}",
        k=4,
        show_progress=False,
    )


# ====================================================================== LangChain standard suite


class TestUMGRetrieverStandard(RetrieversIntegrationTests):
    built: ClassVar[UMGRAG | None] = None
    promote: ClassVar[bool] = False

    @pytest.fixture(autouse=True)
    def _index(self, umg_retriever: UMGRetriever) -> Iterator[None]:
        type(self).built = umg_retriever.strategy
        yield
        type(self).built = None

    @property
    def retriever_constructor(self) -> type[UMGRetriever]:
        return UMGRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        assert self.built is not None
        return {"strategy": self.built, "k": 2, "parent_promotion": self.promote}

    @property
    def retriever_query_example(self) -> str:
        return QUERY

    def test_example_query_returns_at_least_three_results(self) -> None:
        assert self.built is not None
        docs = UMGRetriever(strategy=self.built, parent_promotion=self.promote).invoke(QUERY, k=10)
        assert len(docs) >= 3
        assert len({d.id for d in docs}) == len(docs)
        assert {d.metadata["strategy"] for d in docs} == {"umgp" if self.promote else "umg"}


class TestUMGPRetrieverStandard(TestUMGRetrieverStandard):
    """The same suite with parent promotion (UMGP-RAG)."""

    promote: ClassVar[bool] = True


# ====================================================================== the retriever


def test_is_a_langchain_retriever(umg_retriever: UMGRetriever, lc_embeddings: Any) -> None:
    assert isinstance(umg_retriever, BaseRetriever)
    assert isinstance(umg_retriever, StrategyRetriever)
    assert isinstance(umg_retriever.strategy, UMGRAG)
    assert (umg_retriever.k, umg_retriever.parent_promotion) == (4, False)
    assert umg_retriever.strategy.report.counts["documents"] == len(SMALL_IDS)
    assert "all-MiniLM-L6-v2" in umg_retriever.strategy.embedder.name
    before = lc_embeddings.query_calls
    umg_retriever.invoke(QUERY)
    assert lc_embeddings.query_calls == before + 1  # the given embeddings embed the query


def test_invoke_returns_passages_with_provenance(umg_retriever: UMGRetriever, texts: dict[str, str]) -> None:
    docs = umg_retriever.invoke(QUERY)
    assert len(docs) == 4
    direct = umg_retriever.strategy.retrieve(QUERY, k=4, parent_promotion=False)
    assert [d.id for d in docs] == [r.id for r in direct]
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    for d in docs:
        m = d.metadata
        assert set(m) >= RESULT_KEYS, RESULT_KEYS - set(m)
        assert m["strategy"] == "umg"
        assert m["id"] == d.id
        assert texts[m["doc_id"]][m["start_index"] : m["end_index"]] == d.page_content
        assert all(0.0 <= c <= 1.0 for c in m["confidences"].values())
    assert docs[0].metadata["doc_id"] in {"marrowick-observatory", "tomas-brel", "ilse-varga"}


def test_parent_promotion_is_forwarded_and_overridable(umg_retriever: UMGRetriever) -> None:
    strategy = umg_retriever.strategy
    umgp = UMGRetriever(strategy=strategy, k=3, parent_promotion=True)
    for q in QUERIES:
        expected = strategy.retrieve(q, k=3, parent_promotion=True)
        got = umgp.invoke(q)
        assert [d.id for d in got] == [r.id for r in expected]
        assert {d.metadata["strategy"] for d in got} == {"umgp"}
        assert not overlapping(got)
        assert {d.metadata["strategy"] for d in umgp.invoke(q, parent_promotion=False)} == {"umg"}
        assert {d.metadata["strategy"] for d in umg_retriever.invoke(q, parent_promotion=True)} == {"umgp"}
        assert sig(umg_retriever.invoke(q, k=3, parent_promotion=True)) == sig(got)
        assert sig(umgp.invoke(q, parent_promotion=None)) == sig(got)  # None keeps the field
    moved = UMGRetriever(strategy=strategy, search_kwargs={"parent_promotion": True, "k": 3})
    assert (moved.parent_promotion, moved.k, moved.search_kwargs) == (True, 3, {})
    assert sig(moved.invoke(QUERY)) == sig(umgp.invoke(QUERY))


def test_bad_constructor_arguments(umg_retriever: UMGRetriever) -> None:
    strategy = umg_retriever.strategy
    with pytest.raises(ValidationError, match="parent_promotion is given twice"):
        UMGRetriever(strategy=strategy, parent_promotion=False, search_kwargs={"parent_promotion": True})
    with pytest.raises(ValidationError, match="parent_promotion must be a bool"):
        UMGRetriever(strategy=strategy, parent_promotion="yes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"must be a core\.strategies\.umg\.UMGRAG"):
        UMGRetriever(strategy=FakeStrategy())
    with pytest.raises(ValidationError, match="k must be >= 1"):
        UMGRetriever(strategy=strategy, k=0)
    with pytest.raises(
        ValidationError, match=r"UMGRAG.retrieve does not take: depth; it takes parent_promotion"
    ):
        UMGRetriever(strategy=strategy, search_kwargs={"depth": 2})  # refused before the first query
    with pytest.raises(TypeError, match="unknown retrieve option"):
        umg_retriever.invoke(QUERY, depth=2)
    with pytest.raises(ValueError, match="query is empty"):
        umg_retriever.invoke("   ")


async def test_ainvoke_and_concurrency_match_invoke(umg_retriever: UMGRetriever) -> None:
    serial = {
        (q, p): sig(umg_retriever.invoke(q, parent_promotion=p)) for q in QUERIES for p in (False, True)
    }
    keys = list(serial) * 2
    results = await asyncio.gather(*(umg_retriever.ainvoke(q, parent_promotion=p) for q, p in keys))
    for key, got in zip(keys, results, strict=True):
        assert sig(got) == serial[key]


def test_save_load_round_trip_embeds_nothing(
    tmp_path: Path, small_docs: list[Document], make_embeddings: Any
) -> None:
    building = make_embeddings()
    built = UMGRetriever.from_documents(
        small_docs[:3],
        embedding=building,
        persist_directory=tmp_path,
        k=3,
        parent_promotion=True,
        granularities=(2, 8),
        show_progress=False,
    )
    assert built.parent_promotion is True
    assert built.strategy.config.granularities == (2, 8)
    assert building.document_calls >= 1
    loading = make_embeddings()
    loaded = UMGRetriever.load(tmp_path, embedding=loading, k=3)
    assert loaded.parent_promotion is True  # the default saved with the index
    assert UMGRetriever.load(tmp_path, embedding=loading, parent_promotion=False).parent_promotion is False
    for q in QUERIES:
        got, expected = loaded.invoke(q), built.invoke(q)
        assert sig(got) == sig(expected)
        assert [d.metadata for d in got] == [d.metadata for d in expected]
    # loading re-embeds nothing: the only texts embedded are the one-text dimension probes
    unit_texts = set(built.strategy.store.get(include_embeddings=False).texts)
    assert len(loading.embedded_texts) == loading.document_calls <= 2
    assert not unit_texts & set(loading.embedded_texts)
    assert loading.queries == QUERIES
    built.save(tmp_path / "copy")
    copy = UMGRetriever.load(tmp_path / "copy", embedding=loading, store=built.strategy.store, k=3)
    assert sig(copy.invoke(QUERY)) == sig(built.invoke(QUERY))
    with pytest.raises(FileNotFoundError):
        UMGRetriever.load(tmp_path / "missing", embedding=loading)


def test_add_and_delete_documents(
    small_docs: list[Document], lc_embeddings: Any, collection_name: str
) -> None:
    r = UMGRetriever.from_documents(
        small_docs[:2], embedding=lc_embeddings, collection_name=collection_name, show_progress=False
    )
    units = r.strategy.num_units
    assert r.add_documents([NEW_DOC]) == ["zephyrine-quill"]
    added = r.strategy.num_units - units
    assert added > 0
    assert r.invoke("Who opened the Quillworks studio?")[0].metadata["doc_id"] == "zephyrine-quill"
    assert r.delete_documents(["zephyrine-quill"]) == added
    assert r.strategy.num_units == units
    assert "zephyrine-quill" not in {d.metadata["doc_id"] for d in r.invoke("Quillworks studio", k=20)}


# ====================================================================== the compressor: unit level

TEXT = " ".join(f"Sentence {i} talks about topic {i}." for i in range(12))
SENTS = split_sentences(TEXT)


def chunk(
    first: int, last: int, *, score: float | None = None, cid: str | None = None, **meta: Any
) -> Document:
    start, end = SENTS[first][0], SENTS[last - 1][1]
    metadata: dict[str, Any] = {"doc_id": "t", "start_index": start, **meta}
    if score is not None:
        metadata["score"] = score
    return Document(page_content=TEXT[start:end], metadata=metadata, id=cid or f"t-{first}-{last}")


def test_compressor_promotes_and_deduplicates() -> None:
    comp = ParentPromotionCompressor(texts={"t": TEXT}, parent_size=4)  # windows (0,4) (2,6) ... (8,12)
    docs = [chunk(5, 6), chunk(4, 5), chunk(11, 12), Document(page_content="elsewhere", id="x")]
    before = [d.model_copy(deep=True) for d in docs]
    out = comp.compress_documents(docs, "query")
    assert docs == before  # inputs untouched
    # rank scores; sentences 5 and 4 both lie in (2,6) and (4,8): the earlier window wins
    assert [d.id for d in out] == ["t::s2-6", "t::s8-12", "x"]
    first = out[0]
    assert first.page_content == TEXT[SENTS[2][0] : SENTS[5][1]]
    assert first.metadata["promoted"] is True
    assert first.metadata["merged_ids"] == ["t-5-6", "t-4-5"]
    assert (first.metadata["start_index"], first.metadata["end_index"]) == (SENTS[2][0], SENTS[5][1])
    assert (first.metadata["sent_start"], first.metadata["sent_end"]) == (2, 6)
    assert out[2].metadata == {"promoted": False, "merged_ids": ["x"]}
    assert out[2].page_content == "elsewhere"


def test_compressor_orders_by_score_when_every_document_has_one() -> None:
    comp = ParentPromotionCompressor(texts={"t": TEXT}, parent_size=2, stride=2)
    docs = [chunk(0, 1, score=0.1), chunk(5, 6, score=0.9), chunk(8, 9, score=0.5)]
    assert [d.id for d in comp.compress_documents(docs, "q")] == ["t::s4-6", "t::s8-10", "t::s0-2"]
    docs[1].metadata.pop("score")  # one document without a score: rank order for all
    assert [d.id for d in comp.compress_documents(docs, "q")] == ["t::s0-2", "t::s4-6", "t::s8-10"]


def test_compressor_keys_end_offsets_and_union_mode() -> None:
    comp = ParentPromotionCompressor(
        texts={"t": TEXT}, parent_size=4, mode="union", doc_id_key="src", start_key="pos", end_key="stop"
    )
    a, b = SENTS[4], SENTS[7]
    docs = [
        Document(page_content=TEXT[a[0] : a[1]], metadata={"src": "t", "pos": a[0], "stop": a[1]}, id="a"),
        Document(page_content=TEXT[b[0] : b[1]], metadata={"src": "t", "pos": b[0], "stop": b[1]}, id="b"),
        Document(page_content="no offsets", metadata={"src": "t"}, id="c"),
    ]
    out = comp.compress_documents(docs, "q")
    # sentence 4 -> (2,6), sentence 7 -> (4,8): one union passage over sentences 2..7
    assert [d.id for d in out] == ["t::s2-8", "c"]
    assert (out[0].metadata["pos"], out[0].metadata["stop"]) == (SENTS[2][0], SENTS[7][1])
    assert out[0].page_content == TEXT[SENTS[2][0] : SENTS[7][1]]
    assert out[0].metadata["merged_ids"] == ["a", "b"]


def test_compressor_keeps_coarse_documents() -> None:
    comp = ParentPromotionCompressor(texts={"t": TEXT}, parent_size=4, fine_max_sentences=2)
    out = comp.compress_documents([chunk(0, 3, cid="coarse"), chunk(1, 2, cid="inside")], "q")
    assert [(d.id, d.metadata["promoted"], d.metadata["merged_ids"]) for d in out] == [
        ("coarse", False, ["coarse", "inside"])
    ]


def test_compressor_constructors_and_validation(small_docs: list[Document]) -> None:
    comp = ParentPromotionCompressor.from_documents(small_docs, parent_size=6)
    assert comp.texts == {d.id: d.page_content for d in small_docs}
    assert comp.parent_size == 6
    by_key = ParentPromotionCompressor.from_documents(
        [Document(page_content="A. B.", metadata={"source": "s1"})], doc_id_key="source"
    )
    assert by_key.texts == {"s1": "A. B."}
    with pytest.raises(ValueError, match="document 0 has no id"):
        ParentPromotionCompressor.from_documents([Document(page_content="A.")])
    with pytest.raises(ValueError, match="two different documents have the id 'x'"):
        ParentPromotionCompressor.from_documents(
            [Document(page_content="A.", id="x"), Document(page_content="B.", id="x")]
        )
    for bad in ({"parent_size": 0}, {"fine_max_sentences": -1}, {"mode": "merge"}, {"parent_size": "8"}):
        with pytest.raises(ValidationError):
            ParentPromotionCompressor(**bad)
    with pytest.raises(ValidationError, match="stride must be <= parent_size"):
        ParentPromotionCompressor(parent_size=2, stride=3)
    with pytest.raises(TypeError, match="from_umg expects a UMGRAG"):
        ParentPromotionCompressor.from_umg(object())


async def test_compressor_async() -> None:
    comp = ParentPromotionCompressor(texts={"t": TEXT}, parent_size=4)
    docs = [chunk(5, 6), chunk(11, 12)]
    assert await comp.acompress_documents(docs, "q") == comp.compress_documents(docs, "q")


# ====================================================================== the compressor behind retrievers


@pytest.fixture(scope="module")
def source_docs(small_docs: list[Document]) -> list[Document]:
    """Source documents as an app would have them: the id in metadata["doc_id"]."""
    return [
        Document(page_content=d.page_content, metadata={**d.metadata, "doc_id": d.id}) for d in small_docs
    ]


@pytest.fixture(scope="module")
def sentence_store(source_docs: list[Document], lc_embeddings: Any) -> Chroma:
    """A plain langchain-chroma store of sentence-level chunks (text splitter, add_start_index)."""
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=130, chunk_overlap=0, separators=[". ", " "], keep_separator="end", add_start_index=True
    )
    chunks = splitter.split_documents(source_docs)
    vs = Chroma(
        collection_name=f"sent-{uuid.uuid4().hex[:12]}",
        embedding_function=lc_embeddings,
        client=chromadb.EphemeralClient(),
    )
    vs.add_documents(chunks)
    return vs


def test_contextual_compression_over_a_plain_chroma_retriever(
    sentence_store: Chroma, source_docs: list[Document], texts: dict[str, str]
) -> None:
    base = sentence_store.as_retriever(search_kwargs={"k": 8})
    compressor = ParentPromotionCompressor.from_documents(source_docs, parent_size=4)
    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=base)
    promoted_seen = 0
    for q in QUERIES:
        hits = base.invoke(q)
        assert len(hits) == 8
        for h in hits:  # the splitter's chunks: sentence-level, located by start_index
            assert texts[h.metadata["doc_id"]][h.metadata["start_index"] :].startswith(h.page_content)
            assert len(split_sentences(h.page_content)) <= 3
        out = retriever.invoke(q)
        assert 1 <= len(out) <= 8
        assert not overlapping(out)
        assert sorted(i for d in out for i in d.metadata["merged_ids"]) == sorted(str(h.id) for h in hits)
        for d in out:
            m = d.metadata
            text = texts[m["doc_id"]]
            assert text[m["start_index"] : m["end_index"]] == d.page_content
            sents = split_sentences(text)
            assert (sents[m["sent_start"]][0], sents[m["sent_end"] - 1][1]) == (
                m["start_index"],
                m["end_index"],
            )
            assert m["sent_end"] - m["sent_start"] == min(4, len(sents))
            promoted_seen += m["promoted"]
            best = next(h for h in hits if h.id == m["merged_ids"][0])
            start = best.metadata["start_index"]
            assert m["start_index"] <= start < start + len(best.page_content) <= m["end_index"]
        assert out[0].metadata["merged_ids"][0] == hits[0].id  # rank order: the best hit leads
    assert promoted_seen >= len(QUERIES)


def test_compressor_over_umg_results_is_umgp(umg_retriever: UMGRetriever, texts: dict[str, str]) -> None:
    strategy = umg_retriever.strategy
    compressor = ParentPromotionCompressor.from_umg(strategy)
    assert compressor.texts == texts  # rebuilt from the index's units
    assert ParentPromotionCompressor.from_umg(umg_retriever).texts == texts
    pool = UMGRetriever(strategy=strategy, k=strategy.config.promotion_pool * 3)
    wrapped = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=pool)
    for q in QUERIES:
        got = wrapped.invoke(q)[:3]
        expected = strategy.retrieve(q, k=3, parent_promotion=True)
        assert [d.id for d in got] == [r.id for r in expected]
        assert [d.page_content for d in got] == [r.text for r in expected]
        assert [d.metadata["promoted"] for d in got] == [r.metadata["promoted"] for r in expected]
