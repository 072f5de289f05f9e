"""langchain_bridge.EntityHopCompressor behind ContextualCompressionRetriever, over any base retriever."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore

from core import BridgeRAG
from core.entity_hop import EntityHopWalk
from core.types import Document as CoreDocument
from langchain_bridge import EntityHopCompressor

# A two-hop chain: the question names the song; the song's passage names its composer; the
# composer's passage (which shares no words with the question) holds the birthplace.
CHUNKS = [
    Document("By the Beautiful Sea is a song written by Harold Atteridge in 1914.", id="song"),
    Document("Harold Atteridge was born in Lake Forest, Illinois, and wrote lyrics.", id="composer"),
    Document("The beautiful sea near Corvane is popular with swimmers in summer.", id="sea"),
    Document("Lake Forest is a city on the shore of Lake Michigan.", id="city"),
    Document("A bakery in Marrowick sells rye bread every morning.", id="bakery"),
]
QUESTION = "Where was the writer of By the Beautiful Sea born?"


@pytest.fixture(scope="module")
def compressor(lc_embeddings: Any) -> EntityHopCompressor:
    return EntityHopCompressor.from_documents(CHUNKS, embedding=lc_embeddings, k=3)


def test_reaches_the_second_hop_after_a_non_chroma_retriever(
    compressor: EntityHopCompressor, lc_embeddings: Any
) -> None:
    store = InMemoryVectorStore.from_documents(CHUNKS, lc_embeddings)
    base = store.as_retriever(search_kwargs={"k": 1})
    assert [d.id for d in base.invoke(QUESTION)] == ["song"]  # dense alone stops at the first hop
    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=base)
    docs = retriever.invoke(QUESTION)
    ids = [d.metadata.get("doc_id", d.id) for d in docs]
    assert "song" in ids
    assert "composer" in ids
    composer = docs[ids.index("composer")]
    assert composer.id == "composer::0"  # the index's chunk id
    assert composer.metadata["found_by"] == "hop"
    assert composer.metadata["hop"] >= 1
    assert composer.metadata["hop_entities"]
    song = docs[ids.index("song")]
    assert song.metadata["found_by"] == "retriever"
    assert {"score", "cosine", "hop_score", "doc_id"} <= set(song.metadata)
    assert len(docs) <= 3


def test_seeds_the_index_does_not_hold_keep_their_rank(compressor: EntityHopCompressor) -> None:
    stranger = Document("A text from another corpus about something else.", id="elsewhere")
    out = compressor.compress_documents([stranger, CHUNKS[0]], QUESTION)
    assert out[0].id == "elsewhere"
    assert out[0].metadata == {}
    matched_by_text = compressor.compress_documents([Document(CHUNKS[0].page_content)], QUESTION)
    assert matched_by_text[0].metadata["found_by"] == "retriever"
    assert compressor.compress_documents([], QUESTION) == []


def test_load_opens_a_bridge_index_directory_and_acompress_works(lc_embeddings: Any, tmp_path: Path) -> None:
    docs = [CoreDocument(d.page_content, id=d.id) for d in CHUNKS]
    BridgeRAG.from_documents(docs, embedder=lc_embeddings, persist_directory=tmp_path, show_progress=False)
    loaded = EntityHopCompressor.load(tmp_path, embedding=lc_embeddings, k=2)
    out = asyncio.run(loaded.acompress_documents([CHUNKS[0]], QUESTION))
    assert len(out) == 2
    assert {d.metadata["found_by"] for d in out} == {"retriever", "hop"}


def test_bad_arguments_are_refused(compressor: EntityHopCompressor) -> None:
    with pytest.raises(ValueError, match="k must be an int >= 1"):
        EntityHopWalk(compressor.walk.index, k=0)
    with pytest.raises(TypeError, match="needs a BridgeRAG index"):
        EntityHopWalk(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        compressor.compress_documents(CHUNKS[:1], "   ")


def test_a_seed_matched_by_text_follows_a_delete_and_re_add(lc_embeddings: Any) -> None:
    compressor = EntityHopCompressor.from_documents(CHUNKS, embedding=lc_embeddings, k=3)
    seed = Document(CHUNKS[0].page_content)  # e.g. from BM25Retriever.from_texts: no id
    assert compressor.compress_documents([seed], QUESTION)[0].metadata["found_by"] == "retriever"
    index = compressor.walk.index
    index.delete_documents(["song"])
    out = compressor.compress_documents([seed], QUESTION)
    assert "found_by" not in out[0].metadata  # the deleted chunk is no longer the index's
    index.add_documents([CoreDocument(CHUNKS[0].page_content, id="song")])  # the same text again
    again = compressor.compress_documents([seed], QUESTION)
    assert again[0].metadata["found_by"] == "retriever"
    assert again[0].metadata["doc_id"] == "song"


def _over_a_two_chunk_document(
    lc_embeddings: Any, *sentences: str, **fields: Any
) -> tuple[Document, EntityHopCompressor]:
    """A document of two sentences (two chunks) in place of the song's chunk, and a compressor (k=3)."""
    long_doc = Document(" ".join(sentences), id="long")
    compressor = EntityHopCompressor.from_documents(
        [long_doc, *CHUNKS[1:]], embedding=lc_embeddings, k=3, chunk_size=70, chunk_overlap=0, **fields
    )
    return long_doc, compressor


def test_a_seed_naming_a_chunked_document_stands_for_its_chunk_nearest_the_query(lc_embeddings: Any) -> None:
    long_doc, compressor = _over_a_two_chunk_document(
        lc_embeddings,
        "Rye bread is baked every morning in the Marrowick bakery.",
        "By the Beautiful Sea is a song written by Harold Atteridge in 1914.",
    )
    table = compressor.walk.index._table
    assert len(table.doc_rows["long"]) == 2  # the document became two chunks
    out = compressor.compress_documents([long_doc], QUESTION)
    assert out[0].page_content == long_doc.page_content  # the retriever's own document comes back
    assert out[0].metadata["found_by"] == "retriever"
    assert out[0].metadata["id"] == "long::1"  # the chunk about the song, not the bakery
    assert "composer" in [d.metadata.get("doc_id") for d in out[1:]]


def test_a_seed_keeps_its_own_doc_id(compressor: EntityHopCompressor) -> None:
    seed = Document(CHUNKS[0].page_content, metadata={"doc_id": "paper-7", "retriever": "bm25"})
    (first, *_) = compressor.compress_documents([seed], QUESTION)
    assert first.metadata["found_by"] == "retriever"
    assert first.metadata["doc_id"] == "paper-7"  # the walk's matched doc_id once replaced it
    assert first.metadata["retriever"] == "bm25"


def test_from_vectorstore_walks_the_chunks_already_in_chroma(lc_embeddings: Any) -> None:
    """The app's Chroma store is walked as it is (nothing re-embedded): its ids are the walk's rows."""
    import uuid

    from langchain_chroma import Chroma

    store = Chroma(collection_name=f"hop-{uuid.uuid4().hex[:8]}", embedding_function=lc_embeddings)
    store.add_documents(CHUNKS)
    embedded = len(lc_embeddings.embedded_texts)
    compressor = EntityHopCompressor.from_vectorstore(store, k=3, show_progress=True)  # a build setting too
    again = set(lc_embeddings.embedded_texts[embedded:])  # at most the dimension probe
    assert not again & {d.page_content for d in CHUNKS}  # the stored vectors are read, not recomputed
    retriever = ContextualCompressionRetriever(
        base_compressor=compressor, base_retriever=store.as_retriever(search_kwargs={"k": 1})
    )
    docs = retriever.invoke(QUESTION)
    assert docs[0].id == "song"
    assert docs[0].metadata["found_by"] == "retriever"  # matched by id: the same row
    assert "composer" in [d.id for d in docs]
    with pytest.raises(TypeError, match=r"from_vectorstore expects a langchain_chroma\.Chroma store"):
        EntityHopCompressor.from_vectorstore(InMemoryVectorStore(lc_embeddings))
    with pytest.raises(
        TypeError, match="got InMemoryVectorStore; for the documents already in a Chroma store"
    ):
        EntityHopCompressor.from_documents(InMemoryVectorStore(lc_embeddings), embedding=lc_embeddings)  # type: ignore[arg-type]


def test_include_abstracts_adds_the_abstracts_of_the_documents_it_returns(lc_embeddings: Any) -> None:
    long_doc, compressor = _over_a_two_chunk_document(
        lc_embeddings,
        "By the Beautiful Sea is a song written by Harold Atteridge in 1914.",
        "Its sheet music sold a million copies in Quillmere.",
        include_abstracts=True,
    )
    assert compressor.include_abstracts  # a field of the compressor, not a setting of the index
    out = compressor.compress_documents([long_doc], QUESTION)
    chunks = [d for d in out if d.metadata.get("type") != "abstract"]
    abstracts = out[len(chunks) :]
    assert len(chunks) == 3  # k documents first, then the context
    assert abstracts, "the documents' abstracts follow them"
    assert {a.metadata["doc_id"] for a in abstracts} <= {d.metadata["doc_id"] for d in chunks}
    assert any("Quillmere" in a.page_content for a in abstracts)  # the summary of the whole document
    # A filter that lets one chunk of the document through: its abstract, which summarises the
    # other chunk too, is not returned.
    only_first = compressor.model_copy(update={"filter": {"start_index": 0}})
    filtered = only_first.compress_documents([long_doc], QUESTION)
    assert filtered[0].metadata["found_by"] == "retriever"  # the seed, as the retriever gave it
    assert not any("Quillmere" in d.page_content for d in filtered[1:])
    assert any(d.metadata.get("type") == "abstract" for d in filtered)  # the one-chunk documents' still come
