"""``llama_index_bridge.UMGRetriever`` and ``ParentPromotionPostprocessor`` over real Chroma and embeddings.

One small UMG-RAG index (six demo documents) is shared by the retriever tests. The
postprocessor runs on hand-made nodes, behind a plain ``VectorStoreIndex`` over a
``ChromaVectorStore`` (whose docstore stays empty, which LlamaIndex's own
``AutoMergingRetriever`` needs), inside a query engine, and behind the UMG retriever.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import chromadb
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import (
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.vector_stores.chroma import ChromaVectorStore
from pydantic import ValidationError

from core.strategies.umg import UMGRAG
from core.text import split_sentences
from llama_index_bridge import ParentPromotionPostprocessor, StrategyRetriever, UMGRetriever
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
}


def sig(nodes: Sequence[NodeWithScore]) -> list[tuple[str, str, float | None]]:
    return [(n.node.node_id, n.node.get_content(), n.score) for n in nodes]


def spans(nodes: Sequence[NodeWithScore]) -> list[tuple[str, int, int]]:
    return [
        (n.node.metadata["doc_id"], n.node.metadata["start_index"], n.node.metadata["end_index"])
        for n in nodes
    ]


def overlapping(items: Sequence[tuple[str, int, int]]) -> bool:
    return any(
        a[0] == b[0] and a[1] < b[2] and b[1] < a[2] for i, a in enumerate(items) for b in items[i + 1 :]
    )


@pytest.fixture(scope="module")
def small_docs(li_demo_docs: list[Document]) -> list[Document]:
    docs = [d for d in li_demo_docs if d.id_ in SMALL_IDS]
    assert len(docs) == len(SMALL_IDS)
    return docs


@pytest.fixture(scope="module")
def texts(small_docs: list[Document]) -> dict[str, str]:
    return {d.id_: d.text for d in small_docs}


@pytest.fixture(scope="module")
def umg_retriever(small_docs: list[Document], li_embed_model: Any) -> UMGRetriever:
    """Six demo documents; shared, never modified."""
    return UMGRetriever.from_defaults(
        documents=small_docs,
        embed_model=li_embed_model,
        collection_name=f"umg-{uuid.uuid4().hex[:12]}",
        similarity_top_k=4,
        show_progress=False,
    )


# ====================================================================== the retriever


def test_is_a_llama_index_retriever(umg_retriever: UMGRetriever, li_embed_model: Any) -> None:
    assert isinstance(umg_retriever, BaseRetriever)
    assert isinstance(umg_retriever, StrategyRetriever)
    assert isinstance(umg_retriever.strategy, UMGRAG)
    assert (umg_retriever.k, umg_retriever.parent_promotion) == (4, False)
    assert umg_retriever.strategy.report.counts["documents"] == len(SMALL_IDS)
    before = len(li_embed_model.queries)
    umg_retriever.retrieve(QueryBundle(query_str=QUERY))
    assert li_embed_model.queries[before:] == [QUERY]


def test_retrieve_returns_scored_nodes_with_provenance(
    umg_retriever: UMGRetriever, texts: dict[str, str]
) -> None:
    nodes = umg_retriever.retrieve(QUERY)
    assert len(nodes) == 4
    direct = umg_retriever.strategy.retrieve(QUERY, k=4)
    assert [n.node.node_id for n in nodes] == [r.id for r in direct]
    scores = [n.score for n in nodes]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    for n in nodes:
        node = n.node
        assert isinstance(node, TextNode)
        m = node.metadata
        assert set(m) >= RESULT_KEYS, RESULT_KEYS - set(m)
        assert m["strategy"] == "umg"
        assert n.score == pytest.approx(m["score"])
        assert node.ref_doc_id == m["doc_id"]
        assert texts[m["doc_id"]][m["start_index"] : m["end_index"]] == node.text
        llm_view = node.get_content(metadata_mode=MetadataMode.LLM)
        for hidden in ("confidences", "expert_scores", "granularities"):
            assert hidden not in llm_view
        assert f"title: {m['title']}" in llm_view
        json.dumps(m)


def test_parent_promotion_is_forwarded(umg_retriever: UMGRetriever) -> None:
    strategy = umg_retriever.strategy
    umgp = UMGRetriever(strategy, k=3, parent_promotion=True)
    for q in QUERIES:
        nodes = umgp.retrieve(q)
        expected = strategy.retrieve(q, k=3, parent_promotion=True)
        assert [n.node.node_id for n in nodes] == [r.id for r in expected]
        assert {n.node.metadata["strategy"] for n in nodes} == {"umgp"}
        assert not overlapping(spans(nodes))
    moved = UMGRetriever(strategy, k=3, search_kwargs={"parent_promotion": True})
    assert (moved.parent_promotion, moved.search_kwargs) == (True, {})
    assert sig(moved.retrieve(QUERY)) == sig(umgp.retrieve(QUERY))
    assert UMGRetriever(strategy).parent_promotion is strategy.config.parent_promotion  # None: the index's
    with pytest.raises(ValueError, match="parent_promotion is given twice"):
        UMGRetriever(strategy, parent_promotion=False, search_kwargs={"parent_promotion": True})
    with pytest.raises(TypeError, match="parent_promotion must be a bool"):
        UMGRetriever(strategy, parent_promotion="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"must be a core\.strategies\.umg\.UMGRAG"):
        UMGRetriever(FakeStrategy())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="search_kwargs may not contain"):
        UMGRetriever(strategy, search_kwargs={"k": 3})
    with pytest.raises(
        ValueError, match=r"UMGRAG.retrieve does not take: fetch_k; it takes parent_promotion"
    ):
        UMGRetriever(strategy, search_kwargs={"fetch_k": 20})  # VectorIndexRetriever's, not ours
    with pytest.raises(ValueError, match="query is empty"):
        umgp.retrieve("  ")


async def test_aretrieve_and_concurrency_match_retrieve(umg_retriever: UMGRetriever) -> None:
    umgp = UMGRetriever(umg_retriever.strategy, parent_promotion=True)
    serial = {(q, p): sig((umgp if p else umg_retriever).retrieve(q)) for q in QUERIES for p in (False, True)}
    keys = list(serial) * 2
    results = await asyncio.gather(*((umgp if p else umg_retriever).aretrieve(q) for q, p in keys))
    for key, got in zip(keys, results, strict=True):
        assert sig(got) == serial[key]


def test_query_engine_with_mock_llm(umg_retriever: UMGRetriever) -> None:
    umgp = UMGRetriever(umg_retriever.strategy, k=3, parent_promotion=True)
    for retriever in (umg_retriever, umgp):
        response = RetrieverQueryEngine.from_args(retriever, llm=MockLLM()).query(QUERY)
        expected = retriever.retrieve(QUERY)
        assert [n.node.node_id for n in response.source_nodes] == [n.node.node_id for n in expected]
        answer = str(response)  # MockLLM answers with its prompt
        assert QUERY in answer
        for n in expected:
            assert n.node.get_content()[:80] in answer
        assert "confidences" not in answer
        assert "expert_scores" not in answer


def test_persist_and_from_persist_dir(
    tmp_path: Path, small_docs: list[Document], make_embed_model: Any
) -> None:
    building = make_embed_model()
    built = UMGRetriever.from_defaults(
        documents=small_docs[:3],
        embed_model=building,
        persist_dir=tmp_path,
        similarity_top_k=3,
        parent_promotion=True,
        granularities=(2, 8),
        show_progress=False,
    )
    assert built.parent_promotion is True
    loading = make_embed_model()
    loaded = UMGRetriever.from_persist_dir(tmp_path, embed_model=loading, similarity_top_k=3)
    assert loaded.parent_promotion is True  # the default saved with the index
    assert loaded.strategy.config.granularities == (2, 8)
    for q in QUERIES:
        got, expected = loaded.retrieve(q), built.retrieve(q)
        assert sig(got) == sig(expected)
        assert [n.node.metadata for n in got] == [n.node.metadata for n in expected]
    unit_texts = set(built.strategy.store.get(include_embeddings=False).texts)
    assert not unit_texts & set(loading.embedded_texts)  # loading re-embeds nothing
    assert loading.queries == QUERIES
    again = UMGRetriever.from_defaults(persist_dir=tmp_path, embed_model=loading, similarity_top_k=2)
    assert again.k == 2
    assert again.parent_promotion is True  # loading keeps the default saved with the index
    built.persist(tmp_path / "copy")
    copy = UMGRetriever.from_persist_dir(
        tmp_path / "copy", embed_model=loading, store=built.strategy.store, similarity_top_k=3
    )
    assert sig(copy.retrieve(QUERY)) == sig(built.retrieve(QUERY))
    with pytest.raises(ValueError, match="pass documents="):
        UMGRetriever.from_defaults()


def test_insert_and_delete_ref_doc(
    small_docs: list[Document], li_embed_model: Any, collection_name: str
) -> None:
    r = UMGRetriever.from_defaults(
        documents=small_docs[:2],
        embed_model=li_embed_model,
        collection_name=collection_name,
        show_progress=False,
    )
    units = r.strategy.num_units
    new = Document(
        text="Zephyrine Quill was a glassblower who opened the Quillworks studio in Pellmire in 1921. "
        "The Quillworks made lenses for lighthouses along the Bay of Corvane.",
        id_="zephyrine-quill",
    )
    assert r.insert([new]) == ["zephyrine-quill"]
    added = r.strategy.num_units - units
    assert added > 0
    assert r.retrieve("Who opened the Quillworks studio?")[0].node.ref_doc_id == "zephyrine-quill"
    assert r.delete_ref_doc("zephyrine-quill") == added
    assert r.strategy.num_units == units


# ====================================================================== the postprocessor: unit level

TEXT = " ".join(f"Sentence {i} talks about topic {i}." for i in range(12))
SENTS = split_sentences(TEXT)


def leaf(
    first: int, last: int, score: float | None = None, nid: str | None = None, **meta: Any
) -> NodeWithScore:
    """A node over sentences [first, last) of TEXT, located by start/end_char_idx and ref_doc_id."""
    start, end = SENTS[first][0], SENTS[last - 1][1]
    node = TextNode(
        text=TEXT[start:end],
        id_=nid or f"n{first}-{last}",
        start_char_idx=start,
        end_char_idx=end,
        metadata={"title": "T", **meta},
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="t")},
        excluded_llm_metadata_keys=["title"],
    )
    return NodeWithScore(node=node, score=score)


def test_postprocessor_promotes_and_deduplicates() -> None:
    pp = ParentPromotionPostprocessor(texts={"t": TEXT}, parent_size=4)  # windows (0,4) (2,6) ... (8,12)
    nodes = [
        leaf(5, 6, 0.9),
        leaf(4, 5, 0.8),
        leaf(11, 12, 0.5),
        NodeWithScore(node=TextNode(text="x"), score=0.1),
    ]
    before = [n.model_copy(deep=True) for n in nodes]
    out = pp.postprocess_nodes(nodes)
    assert [n.node.node_id for n in out][:3] == ["t::s2-6", "t::s8-12", nodes[3].node.node_id]
    assert [n.score for n in out] == [0.9, 0.5, 0.1]
    assert [n.node.model_dump() for n in nodes] == [n.node.model_dump() for n in before]  # inputs untouched
    node = out[0].node
    assert isinstance(node, TextNode)
    assert node.text == TEXT[SENTS[2][0] : SENTS[5][1]]
    assert (node.start_char_idx, node.end_char_idx) == (SENTS[2][0], SENTS[5][1])
    assert node.ref_doc_id == "t"
    assert set(node.relationships) == {NodeRelationship.SOURCE}
    m = node.metadata
    assert m["promoted"] is True
    assert m["merged_ids"] == ["n5-6", "n4-5"]
    assert (m["start_index"], m["end_index"], m["sent_start"], m["sent_end"]) == (
        SENTS[2][0],
        SENTS[5][1],
        2,
        6,
    )
    assert m["title"] == "T"
    llm_view = node.get_content(metadata_mode=MetadataMode.LLM)
    assert llm_view == node.text  # title was excluded already; promotion keys are excluded too
    assert "merged_ids" not in node.get_content(metadata_mode=MetadataMode.EMBED)
    passthrough = out[2].node
    assert passthrough.get_content() == "x"
    assert passthrough.metadata == {"promoted": False, "merged_ids": [nodes[3].node.node_id]}


def test_postprocessor_ranks_unscored_nodes_and_reads_metadata_offsets() -> None:
    pp = ParentPromotionPostprocessor(texts={"t": TEXT}, parent_size=2, stride=2, doc_id_key="src")
    a = leaf(0, 1, None)
    start, end = SENTS[7]
    b = NodeWithScore(
        node=TextNode(
            text=TEXT[start:end], id_="meta", metadata={"src": "t", "start_index": start, "end_index": end}
        ),
        score=None,
    )
    out = pp.postprocess_nodes([b, a])  # no scores: rank order
    assert [n.node.node_id for n in out] == ["t::s6-8", "t::s0-2"]
    assert [n.score for n in out] == [None, None]
    assert out[0].node.ref_doc_id == "t"  # a SOURCE relationship is added for metadata-located nodes
    union = ParentPromotionPostprocessor(texts={"t": TEXT}, parent_size=4, mode="union")
    out = union.postprocess_nodes([leaf(4, 5, 0.5), leaf(7, 8, 0.7)])
    assert [n.node.node_id for n in out] == ["t::s2-8"]
    assert out[0].node.metadata["merged_ids"] == ["n7-8", "n4-5"]
    assert out[0].score == 0.7


def test_postprocessor_constructors_and_validation(small_docs: list[Document], texts: dict[str, str]) -> None:
    pp = ParentPromotionPostprocessor.from_documents(small_docs, parent_size=6)
    assert pp.texts == texts
    assert pp.class_name() == "ParentPromotionPostprocessor"
    assert isinstance(pp, BaseNodePostprocessor)
    keyed = ParentPromotionPostprocessor.from_documents([Document(text="A. B.", metadata={"doc_id": "k"})])
    assert keyed.texts == {"k": "A. B."}
    with pytest.raises(ValueError, match="two different documents have the id 'x'"):
        ParentPromotionPostprocessor.from_documents(
            [Document(text="A.", id_="x"), Document(text="B.", id_="x")]
        )
    for bad in ({"parent_size": 0}, {"fine_max_sentences": -1}, {"mode": "merge"}, {"stride": 0}):
        with pytest.raises(ValidationError):
            ParentPromotionPostprocessor(**bad)
    with pytest.raises(ValidationError, match="stride must be <= parent_size"):
        ParentPromotionPostprocessor(parent_size=2, stride=3)
    with pytest.raises(TypeError, match="from_umg expects a UMGRAG"):
        ParentPromotionPostprocessor.from_umg(object())


async def test_postprocessor_async() -> None:
    pp = ParentPromotionPostprocessor(texts={"t": TEXT}, parent_size=4)
    nodes = [leaf(5, 6, 0.9), leaf(11, 12, 0.5)]
    got = await pp.apostprocess_nodes(nodes, query_str="q")
    assert sig(got) == sig(pp.postprocess_nodes(nodes))


# ====================================================================== behind a VectorStoreIndex over Chroma


@pytest.fixture(scope="module")
def chroma_index(small_docs: list[Document], li_embed_model: Any) -> VectorStoreIndex:
    """LlamaIndex's own pipeline: sentence-level nodes in a ChromaVectorStore."""
    collection = chromadb.EphemeralClient().get_or_create_collection(f"li-umg-{uuid.uuid4().hex[:12]}")
    return VectorStoreIndex.from_documents(
        small_docs,
        storage_context=StorageContext.from_defaults(
            vector_store=ChromaVectorStore(chroma_collection=collection)
        ),
        embed_model=li_embed_model,
        transformations=[SentenceSplitter(chunk_size=40, chunk_overlap=0)],
    )


def test_from_vector_store_persists_with_persist_dir_and_reopens_over_the_store(
    chroma_index: VectorStoreIndex, li_embed_model: Any, tmp_path: Path
) -> None:
    store = chroma_index.vector_store
    built = UMGRetriever.from_vector_store(
        store, embed_model=li_embed_model, persist_dir=tmp_path / "umg", show_progress=False
    )
    reopened = UMGRetriever.from_persist_dir(tmp_path / "umg", embed_model=li_embed_model, store=store)
    assert reopened.strategy.sync() == (0, 0, 0)  # it follows the store it was built over
    assert sig(reopened.retrieve(QUERIES[0])) == sig(built.retrieve(QUERIES[0]))
    built.strategy.close()
    reopened.strategy.close()


def test_postprocessor_behind_a_chroma_vector_store_index(
    chroma_index: VectorStoreIndex, small_docs: list[Document], texts: dict[str, str]
) -> None:
    assert len(chroma_index.storage_context.docstore.docs) == 0  # nothing for AutoMergingRetriever
    base = chroma_index.as_retriever(similarity_top_k=8)
    pp = ParentPromotionPostprocessor.from_documents(small_docs, parent_size=4)
    promoted_seen = 0
    for q in QUERIES:
        hits = base.retrieve(q)
        assert len(hits) == 8
        for h in hits:  # nodes read back from Chroma keep their source and offsets
            node = h.node
            assert isinstance(node, TextNode)
            assert node.ref_doc_id in texts
            assert node.start_char_idx is not None
            assert node.end_char_idx is not None
            assert texts[node.ref_doc_id][node.start_char_idx : node.end_char_idx] == node.text
        out = pp.postprocess_nodes(hits, query_str=q)
        assert 1 <= len(out) <= 8
        located = [
            (n.node.ref_doc_id or "", n.node.metadata["start_index"], n.node.metadata["end_index"])
            for n in out
        ]
        assert not overlapping(located)
        assert sorted(i for n in out for i in n.node.metadata["merged_ids"]) == sorted(
            h.node.node_id for h in hits
        )
        assert [n.score for n in out] == sorted((n.score for n in out), reverse=True)  # type: ignore[type-var]
        assert out[0].node.metadata["merged_ids"][0] == hits[0].node.node_id
        for n in out:
            node = n.node
            assert isinstance(node, TextNode)
            doc = texts[node.ref_doc_id or ""]
            assert doc[node.start_char_idx : node.end_char_idx] == node.text
            sents = split_sentences(doc)
            m = node.metadata
            assert (sents[m["sent_start"]][0], sents[m["sent_end"] - 1][1]) == (
                m["start_index"],
                m["end_index"],
            )
            promoted_seen += m["promoted"]
    assert promoted_seen >= len(QUERIES)


def test_postprocessor_in_a_query_engine_over_chroma(
    chroma_index: VectorStoreIndex, small_docs: list[Document]
) -> None:
    pp = ParentPromotionPostprocessor.from_documents(small_docs, parent_size=4)
    base = chroma_index.as_retriever(similarity_top_k=6)
    engine = RetrieverQueryEngine.from_args(base, llm=MockLLM(), node_postprocessors=[pp])
    response = engine.query(QUERY)
    expected = pp.postprocess_nodes(base.retrieve(QUERY))
    assert [n.node.node_id for n in response.source_nodes] == [n.node.node_id for n in expected]
    answer = str(response)
    for n in expected:
        assert n.node.get_content()[:80] in answer
    assert "merged_ids" not in answer


def test_postprocessor_over_umg_nodes_is_umgp(umg_retriever: UMGRetriever, texts: dict[str, str]) -> None:
    strategy = umg_retriever.strategy
    pp = ParentPromotionPostprocessor.from_umg(umg_retriever)
    assert pp.texts == texts
    pool = UMGRetriever(strategy, k=strategy.config.promotion_pool * 3)
    for q in QUERIES:
        got = pp.postprocess_nodes(pool.retrieve(q))[:3]
        expected = strategy.retrieve(q, k=3, parent_promotion=True)
        assert [n.node.node_id for n in got] == [r.id for r in expected]
        assert [n.node.get_content() for n in got] == [r.text for r in expected]
        assert [n.score for n in got] == pytest.approx([r.score for r in expected], rel=1e-6)
