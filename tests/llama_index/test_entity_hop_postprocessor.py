"""llama_index_bridge.EntityHopPostprocessor after a VectorStoreIndex retriever (SimpleVectorStore)."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from llama_index_bridge import EntityHopPostprocessor

NODES = [
    TextNode(id_="song", text="By the Beautiful Sea is a song written by Harold Atteridge in 1914."),
    TextNode(id_="composer", text="Harold Atteridge was born in Lake Forest, Illinois, and wrote lyrics."),
    TextNode(id_="sea", text="The beautiful sea near Corvane is popular with swimmers in summer."),
    TextNode(id_="city", text="Lake Forest is a city on the shore of Lake Michigan."),
    TextNode(id_="bakery", text="A bakery in Marrowick sells rye bread every morning."),
]
QUESTION = "Where was the writer of By the Beautiful Sea born?"


def test_reaches_the_second_hop_after_the_default_vector_store(li_embed_model: Any) -> None:
    index = VectorStoreIndex(NODES, embed_model=li_embed_model)
    hop = EntityHopPostprocessor.from_defaults(NODES, embed_model=li_embed_model, top_n=3)
    seeds = index.as_retriever(similarity_top_k=1).retrieve(QUESTION)
    assert [n.node.node_id for n in seeds] == ["song"]
    out = hop.postprocess_nodes(seeds, query_str=QUESTION)
    ids = [n.node.metadata.get("doc_id", n.node.node_id) for n in out]
    assert "composer" in ids
    assert out[ids.index("composer")].node.metadata["found_by"] == "hop"
    assert out[ids.index("song")].node.metadata["found_by"] == "retriever"
    assert "found_by" not in seeds[0].node.metadata  # the retriever's node is left as it was
    assert len(out) <= 3
    engine_nodes = index.as_retriever(similarity_top_k=1).retrieve(QueryBundle(QUESTION))
    assert hop.postprocess_nodes(engine_nodes, query_bundle=QueryBundle(QUESTION))


def test_unknown_nodes_pass_and_a_query_is_required(li_embed_model: Any, tmp_path: Any) -> None:
    hop = EntityHopPostprocessor.from_defaults(
        NODES, embed_model=li_embed_model, top_n=2, persist_directory=tmp_path
    )
    stranger = NodeWithScore(node=TextNode(id_="x", text="Unrelated text from elsewhere."), score=0.9)
    out = hop.postprocess_nodes([stranger], query_str=QUESTION)
    assert [n.node.node_id for n in out] == ["x"]
    with pytest.raises(ValueError, match="needs the query"):
        hop.postprocess_nodes([stranger])
    reopened = EntityHopPostprocessor.from_persist_dir(
        tmp_path / "bridge", embed_model=li_embed_model, top_n=2, reuse_query_embedding=False
    )
    assert not reopened.reuse_query_embedding
    manager = CallbackManager([])
    traced = EntityHopPostprocessor.from_persist_dir(
        tmp_path / "bridge", embed_model=li_embed_model, callback_manager=manager
    )
    assert traced.callback_manager is manager
    with pytest.raises(TypeError, match="reuse_query_embeding"):
        EntityHopPostprocessor.from_persist_dir(tmp_path / "bridge", reuse_query_embeding=False)
    assert hop.reuse_query_embedding
    song = NodeWithScore(node=NODES[0], score=0.5)
    assert len(reopened.postprocess_nodes([song], query_str=QUESTION)) == 2


def test_the_query_bundles_embedding_is_reused(li_embed_model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    index = VectorStoreIndex(NODES, embed_model=li_embed_model)
    hop = EntityHopPostprocessor.from_defaults(NODES, embed_model=li_embed_model, top_n=3)
    embedder = hop._walk.index.embedder
    embed_query, calls = embedder.embed_query, []
    monkeypatch.setattr(embedder, "embed_query", lambda text: calls.append(text) or embed_query(text))
    bundle = QueryBundle(QUESTION)
    seeds = index.as_retriever(similarity_top_k=1).retrieve(bundle)
    assert bundle.embedding is not None  # the retriever embedded the query, as in a query engine
    reused = hop.postprocess_nodes(seeds, query_bundle=bundle)
    assert calls == []
    fresh = hop.postprocess_nodes(seeds, query_str=QUESTION)
    assert len(calls) == 1
    scaled = QueryBundle(QUESTION, embedding=[3.0 * x for x in bundle.embedding])  # not unit length
    for out in (reused, hop.postprocess_nodes(seeds, query_bundle=scaled)):
        assert [n.node.node_id for n in out] == [n.node.node_id for n in fresh]
        assert [n.score for n in out] == pytest.approx([n.score for n in fresh])
    assert len(calls) == 1
    hop.postprocess_nodes(seeds, query_bundle=QueryBundle(QUESTION, embedding=[0.5] * 7))  # another model
    assert len(calls) == 2
    hop.reuse_query_embedding = False
    hop.postprocess_nodes(seeds, query_bundle=bundle)
    assert len(calls) == 3


def test_the_walks_provenance_stays_out_of_the_llms_view(li_embed_model: Any) -> None:
    hop = EntityHopPostprocessor.from_defaults(NODES, embed_model=li_embed_model, top_n=3)
    seed = NodeWithScore(node=NODES[0].model_copy(update={"metadata": {"title": "Song"}}), score=0.9)
    out = hop.postprocess_nodes([seed], query_str=QUESTION)
    assert (
        {"retriever", "hop"} <= {n.node.metadata["found_by"] for n in out} <= {"retriever", "hop", "lexical"}
    )
    for n in out:
        view = n.node.get_content(metadata_mode=MetadataMode.LLM)
        embed_view = n.node.get_content(metadata_mode=MetadataMode.EMBED)
        for key in ("found_by", "score", "cosine", "lexical_score", "hop_score", "hop_entities", "strategy"):
            assert f"{key}:" not in view, (n.node.node_id, key)
            assert f"{key}:" not in embed_view, (n.node.node_id, key)
    assert "title: Song" in out[0].node.get_content(metadata_mode=MetadataMode.LLM)  # the app's own key stays


def test_from_dict_says_how_to_reopen_the_index(li_embed_model: Any) -> None:
    hop = EntityHopPostprocessor.from_defaults(NODES, embed_model=li_embed_model, top_n=2)
    data = hop.to_dict()
    assert data["top_n"] == 2
    with pytest.raises(TypeError, match=r"from_persist_dir"):
        EntityHopPostprocessor.from_dict(data)


def test_from_vector_store_walks_the_nodes_already_in_chroma(li_embed_model: Any) -> None:
    """The app's ``ChromaVectorStore`` index is walked as it is: its node ids are the walk's rows."""
    import uuid

    import chromadb
    from llama_index.core import StorageContext
    from llama_index.vector_stores.chroma import ChromaVectorStore

    collection = chromadb.EphemeralClient().get_or_create_collection(f"hop-{uuid.uuid4().hex[:12]}")
    store = ChromaVectorStore(chroma_collection=collection)
    index = VectorStoreIndex(
        NODES, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=li_embed_model
    )
    hop = EntityHopPostprocessor.from_vector_store(store, embed_model=li_embed_model, top_n=3)
    seeds = index.as_retriever(similarity_top_k=1).retrieve(QUESTION)
    out = hop.postprocess_nodes(seeds, query_str=QUESTION)
    assert out[0].node.node_id == "song"
    assert out[0].node.metadata["found_by"] == "retriever"  # matched by id: the same row
    assert "composer" in [n.node.node_id for n in out]
    store.delete_nodes(node_ids=["composer"])  # the app's own delete, in its store
    assert hop.walk.index.sync().removed == 1  # as docs/reliability.md says
    assert "composer" not in [n.node.node_id for n in hop.postprocess_nodes(seeds, query_str=QUESTION)]
    with pytest.raises(TypeError, match="expects a ChromaVectorStore"):
        EntityHopPostprocessor.from_vector_store(index, embed_model=li_embed_model)


def test_bad_arguments_say_what_to_pass(li_embed_model: Any) -> None:
    from pydantic import ValidationError

    with pytest.raises(
        ValidationError, match=r"filters must be a llama_index MetadataFilters, got dict: e\.g\."
    ):
        EntityHopPostprocessor.from_defaults(NODES, embed_model=li_embed_model, filters={"tenant": "acme"})
    index = VectorStoreIndex(NODES, embed_model=li_embed_model)
    with pytest.raises(TypeError, match=r"got VectorStoreIndex; for an index, pass its documents"):
        EntityHopPostprocessor.from_defaults(index, embed_model=li_embed_model)  # type: ignore[arg-type]


def test_include_abstracts_adds_the_abstracts_of_the_nodes_after_them(li_embed_model: Any) -> None:
    hop = EntityHopPostprocessor.from_defaults(
        NODES, embed_model=li_embed_model, top_n=2, include_abstracts=True
    )
    out = hop.postprocess_nodes([NodeWithScore(node=NODES[0], score=0.9)], query_str=QUESTION)
    kinds = [n.node.metadata.get("type") for n in out]
    assert kinds[:2] == [None, None]  # the top_n nodes first
    assert kinds[2:], "the nodes' abstracts follow them"
    assert set(kinds[2:]) == {"abstract"}
    assert out[2].node.node_id.startswith("abstract::")
    assert "abstract_id" in out[2].node.excluded_llm_metadata_keys  # provenance stays out of the LLM's view


def test_nodes_the_walk_adds_name_the_document_they_were_parsed_from(li_embed_model: Any) -> None:
    """A cited source: the walk's own nodes carry the LlamaIndex document as their ref_doc_id."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    documents = [Document(id_=f"{n.node_id}-doc", text=n.text) for n in NODES]
    nodes = SentenceSplitter().get_nodes_from_documents(documents)
    hop = EntityHopPostprocessor.from_defaults(
        nodes, embed_model=li_embed_model, top_n=3, include_abstracts=True
    )
    song = next(n for n in nodes if n.ref_doc_id == "song-doc")
    out = hop.postprocess_nodes([NodeWithScore(node=song, score=0.9)], query_str=QUESTION)
    reached = [n.node for n in out if n.node.metadata.get("found_by") != "retriever"]
    assert "composer-doc" in [n.ref_doc_id for n in reached]  # not the chunk's own node id
    assert all(n.ref_doc_id == n.metadata["ref_doc_id"] for n in reached)
    abstracts = [n.node for n in out if n.node.metadata.get("type") == "abstract"]
    assert abstracts
    assert {n.ref_doc_id for n in abstracts} <= {d.id_ for d in documents}  # abstracts cite it too
