"""Every strategy against a real Chroma server, through ``chromadb.HttpClient``: the scale-out path.

For each strategy of :data:`tests.reliability.cases.STRATEGIES` (real all-MiniLM-L6-v2):

- an index built over a server collection records the server in its manifest; a LangChain
  worker and a LlamaIndex worker reopen it from the index directory alone and answer exactly
  as the builder does, synchronously and asynchronously;
- several workers share one server and one index directory: one writer adds and deletes
  documents, readers that reload see the change, readers that do not keep answering from
  the generation they loaded;
- Bridge-RAG also builds over collections filled by LangChain's and LlamaIndex's own Chroma
  stores on the server (the one-line swap).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings

from core.embed import LangChainEmbedder, LlamaIndexEmbedder, SentenceTransformerEmbedder
from core.store import ChunkStore
from core.types import Document
from tests.integration.conftest import ChromaServer
from tests.langchain.conftest import CountingEmbeddings
from tests.llama_index.conftest import CountingEmbedding
from tests.reliability.cases import QUERIES, STRATEGIES, StrategyCase, result_signature, shared_real_embedder

pytestmark = pytest.mark.integration

K = 4
NEW_DOC = Document(
    "Zephyrine Quill was a glassblower who opened the Quillworks studio in Pellmire in 1921. "
    "The Quillworks made lenses for lighthouses along the Bay of Corvane. Quill trained four apprentices.",
    id="zephyrine-quill",
    metadata={"title": "Zephyrine Quill"},
)


def _collection() -> str:
    return f"it-{uuid.uuid4().hex[:10]}"


def _client(server: ChromaServer) -> Any:
    return chromadb.HttpClient(
        host=server.host, port=server.port, settings=Settings(anonymized_telemetry=False)
    )


@pytest.fixture(params=STRATEGIES, ids=str)
def case(request: pytest.FixtureRequest) -> StrategyCase:
    param: StrategyCase = request.param
    return param


@pytest.fixture(scope="module")
def docs() -> list[Document]:
    from core.data import load_demo_corpus

    return load_demo_corpus()


def _corpus(case: StrategyCase, docs: list[Document]) -> list[Document]:
    return docs[: min(case.corpus_size, 12)]


def _lc_signature(documents: list[Any]) -> list[tuple[Any, ...]]:
    return [(d.id, d.page_content, dict(d.metadata)) for d in documents]


def _li_signature(nodes: list[Any]) -> list[tuple[Any, ...]]:
    return [(n.node.node_id, n.score, n.node.get_content(), dict(n.node.metadata)) for n in nodes]


def test_both_adapters_reopen_an_index_over_the_server(
    case: StrategyCase,
    chroma_server: ChromaServer,
    st_embedder: SentenceTransformerEmbedder,
    docs: list[Document],
    tmp_path: Path,
) -> None:
    cached = shared_real_embedder(st_embedder)
    lc_embeddings = CountingEmbeddings(cached)  # type: ignore[arg-type]
    li_embed_model = CountingEmbedding(cached)  # type: ignore[arg-type]
    corpus = _corpus(case, docs)

    # LangChain: build over a server collection, then a "worker" reopens the directory alone.
    name = _collection()
    built = case.build(
        corpus,
        embedder=LangChainEmbedder(lc_embeddings),
        store=ChunkStore.http(chroma_server.host, chroma_server.port, name),
        persist_directory=tmp_path / "lc",
    )
    assert _client(chroma_server).get_collection(name).count() == built.store.count() > 0
    builder = case.langchain(built, K)
    worker = case.langchain_load(tmp_path / "lc", lc_embeddings, K)
    assert worker.strategy.store.location == {
        "kind": "http",
        "host": chroma_server.host,
        "port": chroma_server.port,
    }
    for q in QUERIES:
        assert _lc_signature(worker.invoke(q)) == _lc_signature(builder.invoke(q)), q
    together = asyncio.run(_gather(worker.ainvoke(q) for q in QUERIES))
    assert [_lc_signature(d) for d in together] == [_lc_signature(builder.invoke(q)) for q in QUERIES]

    # LlamaIndex: the same over another collection.
    name = _collection()
    built = case.build(
        corpus,
        embedder=LlamaIndexEmbedder(li_embed_model),
        store=ChunkStore.http(chroma_server.host, chroma_server.port, name),
        persist_directory=tmp_path / "li",
    )
    builder_li = case.llama_index(built, K, {})
    worker_li = case.llama_index_load(tmp_path / "li", li_embed_model, K)
    for q in QUERIES:
        assert _li_signature(worker_li.retrieve(q)) == _li_signature(builder_li.retrieve(q)), q
    together = asyncio.run(_gather(worker_li.aretrieve(q) for q in QUERIES))
    assert [_li_signature(n) for n in together] == [_li_signature(builder_li.retrieve(q)) for q in QUERIES]


async def _gather(coroutines: Any) -> list[Any]:
    return list(await asyncio.gather(*coroutines))


def test_workers_share_one_server_and_one_index_directory(
    case: StrategyCase,
    chroma_server: ChromaServer,
    st_embedder: SentenceTransformerEmbedder,
    docs: list[Document],
    tmp_path: Path,
) -> None:
    embedder = shared_real_embedder(st_embedder)
    shared = tmp_path / "shared-index"
    writer = case.build(
        _corpus(case, docs),
        embedder=embedder,
        store=ChunkStore.http(chroma_server.host, chroma_server.port, _collection()),
        persist_directory=shared,
    )
    readers = [case.load(shared, embedder=embedder) for _ in range(2)]
    expected = {q: result_signature(writer.retrieve(q, k=K)) for q in QUERIES}
    for reader in readers:
        assert {q: result_signature(reader.retrieve(q, k=K)) for q in QUERIES} == expected

    question = "Who opened the Quillworks studio in Pellmire?"
    before = result_signature(readers[0].retrieve(question, k=K))
    assert all(r[3]["doc_id"] != NEW_DOC.id for r in before)
    writer.add_documents([NEW_DOC])  # one writer: Chroma gets the chunks, the directory a new generation
    fresh = case.load(shared, embedder=embedder)
    assert fresh.retrieve(question, k=K)[0].metadata["doc_id"] == NEW_DOC.id
    assert result_signature(readers[0].retrieve(question, k=K)) == before, "a reader keeps its generation"

    assert writer.delete_documents([NEW_DOC.id]) > 0
    again = case.load(shared, embedder=embedder)
    assert all(r.metadata["doc_id"] != NEW_DOC.id for r in again.retrieve(question, k=K))


def test_bridge_over_collections_filled_by_the_frameworks_on_the_server(
    chroma_server: ChromaServer, st_embedder: SentenceTransformerEmbedder, docs: list[Document]
) -> None:
    from langchain_chroma import Chroma
    from langchain_core.documents import Document as LCDocument
    from llama_index.core import Document as LIDocument
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.vector_stores.chroma import ChromaVectorStore

    import langchain_bridge
    import llama_index_bridge

    cached = shared_real_embedder(st_embedder)
    client = _client(chroma_server)
    corpus = docs[:12]
    question = "Who founded the Marrowick Observatory?"

    lc_embeddings = CountingEmbeddings(cached)  # type: ignore[arg-type]
    vectorstore = Chroma(collection_name=_collection(), embedding_function=lc_embeddings, client=client)
    vectorstore.add_documents(
        [LCDocument(page_content=d.text, metadata={**d.metadata, "source": d.id}) for d in corpus]
    )
    lc = langchain_bridge.BridgeRetriever.from_vectorstore(vectorstore, k=K, show_progress=False)
    assert lc.invoke(question)[0].metadata["source"] == "marrowick-observatory"

    li_embed_model = CountingEmbedding(cached)  # type: ignore[arg-type]
    collection = client.get_or_create_collection(_collection())
    storage = StorageContext.from_defaults(vector_store=ChromaVectorStore(chroma_collection=collection))
    VectorStoreIndex.from_documents(
        [LIDocument(text=d.text, id_=d.id, metadata=dict(d.metadata)) for d in corpus],
        storage_context=storage,
        embed_model=li_embed_model,
    )
    li = llama_index_bridge.BridgeRetriever.from_vector_store(
        ChromaVectorStore(chroma_collection=collection),
        embed_model=li_embed_model,
        similarity_top_k=K,
        show_progress=False,
    )
    assert li.retrieve(question)[0].node.ref_doc_id == "marrowick-observatory"


def test_random_filters_against_the_servers_own_where(
    case: StrategyCase,
    chroma_server: ChromaServer,
    st_embedder: SentenceTransformerEmbedder,
    docs: list[Document],
) -> None:
    """Over a server collection, every strategy in both frameworks returns only what the
    server's own ``get(where=...)`` selects, and something whenever it selects anything."""
    import random

    from core.filters import FilterError
    from tests.filter_cases import random_where, tag_documents

    cached = shared_real_embedder(st_embedder)
    name = _collection()
    built = case.build(
        tag_documents(_corpus(case, docs)),
        embedder=LangChainEmbedder(CountingEmbeddings(cached)),  # type: ignore[arg-type]
        store=ChunkStore.http(chroma_server.host, chroma_server.port, name),
    )
    server = _client(chroma_server).get_collection(built.store.name)
    lc = case.langchain(built, K)
    rng = random.Random(29)
    checked = 0
    for _ in range(60):
        where = random_where(rng)
        try:
            passing = set(server.get(where=where, include=[])["ids"])
        except ValueError:
            with pytest.raises(FilterError):
                lc.invoke(QUERIES[0], filter=where)
            continue
        query = rng.choice(QUERIES)
        li = case.llama_index(built, K, {"filter": where})
        lc_ids = {d.metadata["id"] for d in lc.invoke(query, filter=where)}
        li_ids = {n.node.node_id for n in li.retrieve(query)}
        assert lc_ids <= passing, where
        assert li_ids <= passing, where
        assert bool(lc_ids) == bool(passing) == bool(li_ids), where
        checked += 1
    assert checked > 30
