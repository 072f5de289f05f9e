"""The peers: what LangChain and LlamaIndex users pick today, built through their public APIs.

- ``langchain-ensemble``: ``langchain_classic.retrievers.EnsembleRetriever`` (weighted
  reciprocal-rank fusion, equal weights) over ``langchain_community``'s ``BM25Retriever``
  (rank_bm25) and a ``langchain_chroma.Chroma`` retriever on the run's shared collection.
- ``llamaindex-fusion``: ``QueryFusionRetriever(mode="reciprocal_rerank", num_queries=1)``
  over a ``VectorStoreIndex`` on a ``ChromaVectorStore`` (the shared collection) and
  ``llama_index.retrievers.bm25.BM25Retriever``. ``num_queries=1`` generates no extra
  queries; the retriever is given an LLM that raises if it is ever called, so no LLM can be
  used behind the benchmark's back. ``use_async=False``: its sub-retrievers run one after
  the other, as ours do.

Both read the chunks and vectors that dense retrieval and Bridge-RAG read, embed queries
with the same model (through small adapters), and return ``k`` results from ``k`` per
sub-retriever. The frameworks are imported only when a peer is built; this module imports
neither at import time.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from core.embed import Embedder
from core.evaluation.corpus import BenchContext
from core.types import Retrieved

__all__ = [
    "LangChainPeer",
    "LlamaIndexPeer",
    "build_langchain_chroma",
    "build_langchain_ensemble",
    "build_langchain_entity_hop",
    "build_langchain_uncertainty_fusion",
    "build_llamaindex_fusion",
    "langchain_bm25_and_chroma",
    "langchain_embeddings",
    "llama_index_embedding",
]

_LANGCHAIN_HINT = (
    "the langchain-ensemble peer needs langchain-classic, langchain-community, rank-bm25 and "
    "langchain-chroma: pip install 'bridge-rag[langchain,eval]'"
)
_LLAMA_INDEX_HINT = (
    "the llamaindex-fusion peer needs llama-index-core, llama-index-vector-stores-chroma and "
    "llama-index-retrievers-bm25: pip install 'bridge-rag[llama-index,eval]'"
)


@contextmanager
def _needs(hint: str) -> Iterator[None]:
    """Re-raises an ImportError of the block with ``hint`` (what to install) in front."""
    try:
        yield
    except ImportError as exc:
        raise ImportError(f"{hint} ({exc})") from exc


def _adapter(make_class: Callable[[], type], hint: str, embedder: Embedder) -> Any:
    """An instance of the framework class ``make_class`` defines (``hint`` if the framework is missing)."""
    with _needs(hint):
        cls = make_class()
    return cls(embedder)


Hit = tuple[str, str, float, dict[str, Any]]


class _Peer:
    """A framework's retriever behind the benchmark's ``retrieve(query, k)``.

    Args:
        retriever: The framework's retriever.
        name: The row name.
    """

    def __init__(self, retriever: Any, name: str) -> None:
        self.retriever = retriever
        self.name = name

    def retrieve(self, query: str, k: int) -> list[Retrieved]:
        """The retriever's results, cut to ``k``, as :class:`~core.types.Retrieved`."""
        return [
            Retrieved(id=hit_id, text=text, score=score, metadata={**meta, "strategy": self.name})
            for hit_id, text, score, meta in itertools.islice(self._hits(query), k)
        ]

    def _hits(self, query: str) -> Iterator[Hit]:
        """``(id, text, score, metadata with doc_id)`` of each result, best first."""
        raise NotImplementedError


class LangChainPeer(_Peer):
    """A LangChain ``BaseRetriever`` (``retriever.invoke(query)``) behind ``retrieve(query, k)``."""

    def _hits(self, query: str) -> Iterator[Hit]:
        for rank, doc in enumerate(self.retriever.invoke(query)):
            meta = dict(doc.metadata)
            doc_id = str(doc.id or meta.get("id") or "")
            meta.setdefault("doc_id", doc_id.split("::")[0])
            yield doc_id, doc.page_content, 1.0 / (rank + 1), meta


class LlamaIndexPeer(_Peer):
    """A LlamaIndex ``BaseRetriever`` (``retriever.retrieve(query)``) behind ``retrieve(query, k)``.

    Args:
        retriever: The LlamaIndex retriever.
        name: The row name.
        postprocessors: Node postprocessors run on its nodes in order, as a query engine runs them.
    """

    def __init__(self, retriever: Any, name: str, postprocessors: Sequence[Any] = ()) -> None:
        super().__init__(retriever, name)
        self.postprocessors = list(postprocessors)

    def _hits(self, query: str) -> Iterator[Hit]:
        from llama_index.core.schema import QueryBundle

        bundle = QueryBundle(query)  # one bundle for the retriever and every step, as a query engine does
        nodes = self.retriever.retrieve(bundle)
        for postprocessor in self.postprocessors:
            nodes = postprocessor.postprocess_nodes(nodes, query_bundle=bundle)
        for hit in nodes:
            node = hit.node
            meta = dict(node.metadata)
            # LlamaIndex moves a stored ``doc_id`` key into its relationships; the chunk id keeps it.
            meta.setdefault("doc_id", node.ref_doc_id or str(node.node_id).split("::")[0])
            score = float(hit.score) if hit.score is not None else 0.0
            yield str(node.node_id), node.get_content(), score, meta


# ---------------------------------------------------------------------- embedding adapters


@functools.cache
def _langchain_embeddings_class() -> type:
    from langchain_core.embeddings import Embeddings

    class CoreEmbeddings(Embeddings):
        """LangChain ``Embeddings`` over a bridge-rag :class:`~core.embed.Embedder`."""

        def __init__(self, embedder: Embedder) -> None:
            self.embedder = embedder

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            rows: list[list[float]] = self.embedder.embed_documents(texts).tolist()
            return rows

        def embed_query(self, text: str) -> list[float]:
            vector: list[float] = self.embedder.embed_query(text).tolist()
            return vector

    return CoreEmbeddings


def langchain_embeddings(embedder: Embedder) -> Any:
    """A LangChain ``Embeddings`` that embeds with ``embedder``.

    Raises:
        ImportError: langchain-core is not installed.
    """
    return _adapter(_langchain_embeddings_class, _LANGCHAIN_HINT, embedder)


@functools.cache
def _llama_index_embedding_class() -> type:
    from llama_index.core.embeddings import BaseEmbedding
    from pydantic import PrivateAttr

    class CoreEmbedding(BaseEmbedding):
        """LlamaIndex ``BaseEmbedding`` over a bridge-rag :class:`~core.embed.Embedder`."""

        _embedder: Any = PrivateAttr()

        def __init__(self, embedder: Embedder, **kwargs: Any) -> None:
            super().__init__(model_name=embedder.name, **kwargs)
            self._embedder = embedder

        @classmethod
        def class_name(cls) -> str:
            return "CoreEmbedding"

        def _get_query_embedding(self, query: str) -> list[float]:
            vector: list[float] = self._embedder.embed_query(query).tolist()
            return vector

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._get_text_embeddings([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            rows: list[list[float]] = self._embedder.embed_documents(texts).tolist()
            return rows

    return CoreEmbedding


def llama_index_embedding(embedder: Embedder) -> Any:
    """A LlamaIndex ``BaseEmbedding`` that embeds with ``embedder``.

    Raises:
        ImportError: llama-index-core is not installed.
    """
    return _adapter(_llama_index_embedding_class, _LLAMA_INDEX_HINT, embedder)


@functools.cache
def _refusing_llm_class() -> type:
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata

    class RefusingLLM(CustomLLM):
        """An LLM that raises when called: proves the fusion retriever generated no queries."""

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="no-llm")

        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            raise RuntimeError("the llamaindex-fusion peer called an LLM; it must run with num_queries=1")

        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            raise RuntimeError("the llamaindex-fusion peer called an LLM; it must run with num_queries=1")

    return RefusingLLM


# ---------------------------------------------------------------------- builders


def build_langchain_ensemble(ctx: BenchContext) -> LangChainPeer:
    """LangChain's ``EnsembleRetriever`` over BM25 and Chroma, on the shared collection.

    Raises:
        ImportError: A LangChain package is missing (the message says which to install).
    """
    with _needs(_LANGCHAIN_HINT):
        from langchain_classic.retrievers import EnsembleRetriever
    ensemble = EnsembleRetriever(retrievers=langchain_bm25_and_chroma(ctx), weights=[0.5, 0.5])
    return LangChainPeer(ensemble, "langchain-ensemble")


def build_langchain_uncertainty_fusion(ctx: BenchContext) -> LangChainPeer:
    """``langchain_bridge.UncertaintyFusionRetriever`` over the ensemble peer's two retrievers.

    Raises:
        ImportError: A LangChain package is missing (the message says which to install).
    """
    from langchain_bridge.fusion import UncertaintyFusionRetriever

    fusion = UncertaintyFusionRetriever(retrievers=langchain_bm25_and_chroma(ctx), weights=[0.5, 0.5])
    return LangChainPeer(fusion, "langchain-uncertainty-fusion")


def _langchain_chroma(ctx: BenchContext, k: int) -> Any:
    """A ``langchain_chroma`` retriever (``k`` results) over the shared collection, the run's model."""
    with _needs(_LANGCHAIN_HINT):
        from langchain_chroma import Chroma
    corpus = ctx.corpus
    if corpus.store.client is None:
        raise ValueError("the LangChain peers need a ChunkStore opened with a Chroma client")
    return Chroma(
        client=corpus.store.client,
        collection_name=corpus.store.name,
        embedding_function=langchain_embeddings(ctx.embedder),
        create_collection_if_not_exists=False,
    ).as_retriever(search_kwargs={"k": k})


def build_langchain_chroma(ctx: BenchContext) -> LangChainPeer:
    """The entity-hop row's base retriever alone: a ``langchain_chroma`` retriever with ``2k`` results.

    Raises:
        ImportError: A LangChain package is missing (the message says which to install).
    """
    return LangChainPeer(_langchain_chroma(ctx, 2 * ctx.k), "langchain-chroma")


def build_langchain_entity_hop(ctx: BenchContext) -> LangChainPeer:
    """``ContextualCompressionRetriever``: a Chroma retriever (``2k``) then ``EntityHopCompressor`` (``k``).

    The compressor's index is Bridge-RAG built from the shared collection (no re-embedding).

    Raises:
        ImportError: A LangChain package is missing (the message says which to install).
    """
    with _needs(_LANGCHAIN_HINT):
        from langchain_classic.retrievers import ContextualCompressionRetriever
    from core.entity_hop import EntityHopWalk
    from langchain_bridge.hop import EntityHopCompressor

    walk = EntityHopWalk.from_store(ctx.corpus.store, embedder=ctx.embedder, k=ctx.k)
    retriever = ContextualCompressionRetriever(
        base_compressor=EntityHopCompressor(walk=walk, k=ctx.k),
        base_retriever=_langchain_chroma(ctx, 2 * ctx.k),
    )
    return LangChainPeer(retriever, "entity-hop")


def langchain_bm25_and_chroma(ctx: BenchContext) -> list[Any]:
    """LangChain's ``BM25Retriever`` and a ``langchain_chroma`` retriever (``k`` each), shared collection."""
    with _needs(_LANGCHAIN_HINT):
        from langchain_community.retrievers import BM25Retriever
        from langchain_core.documents import Document
    dense = _langchain_chroma(ctx, ctx.k)
    docs = [Document(page_content=text, metadata=meta, id=cid) for cid, text, meta in ctx.corpus.rows()]
    return [BM25Retriever.from_documents(docs, k=ctx.k), dense]


def _llamaindex_vector_index(ctx: BenchContext) -> Any:
    """A LlamaIndex ``VectorStoreIndex`` over the shared collection, the run's model."""
    with _needs(_LLAMA_INDEX_HINT):
        from llama_index.core import VectorStoreIndex
        from llama_index.vector_stores.chroma import ChromaVectorStore
    return VectorStoreIndex.from_vector_store(
        ChromaVectorStore(chroma_collection=ctx.corpus.store.collection),
        embed_model=llama_index_embedding(ctx.embedder),
    )


def build_llamaindex_vector(ctx: BenchContext) -> LlamaIndexPeer:
    """The llamaindex-entity-hop row's base alone: a ``VectorStoreIndex`` retriever with ``2k`` results.

    Raises:
        ImportError: A LlamaIndex package is missing (the message says which to install).
    """
    return LlamaIndexPeer(
        _llamaindex_vector_index(ctx).as_retriever(similarity_top_k=2 * ctx.k), "llamaindex-vector"
    )


def build_llamaindex_entity_hop(ctx: BenchContext) -> LlamaIndexPeer:
    """A ``VectorStoreIndex`` retriever (``2k``) then ``EntityHopPostprocessor`` (``k``).

    The postprocessor's index is Bridge-RAG built from the shared collection (no re-embedding).

    Raises:
        ImportError: A LlamaIndex package is missing (the message says which to install).
    """
    from core.entity_hop import EntityHopWalk
    from llama_index_bridge.hop import EntityHopPostprocessor

    walk = EntityHopWalk.from_store(ctx.corpus.store, embedder=ctx.embedder, k=ctx.k)
    base = _llamaindex_vector_index(ctx).as_retriever(similarity_top_k=2 * ctx.k)
    return LlamaIndexPeer(base, "llamaindex-entity-hop", [EntityHopPostprocessor(walk, top_n=ctx.k)])


def build_llamaindex_fusion(ctx: BenchContext) -> LlamaIndexPeer:
    """LlamaIndex's ``QueryFusionRetriever`` over BM25 and a Chroma vector index, no LLM.

    Raises:
        ImportError: A LlamaIndex package is missing (the message says which to install).
    """
    with _needs(_LLAMA_INDEX_HINT):
        from llama_index.core.retrievers import QueryFusionRetriever
        from llama_index.core.schema import BaseNode, TextNode
        from llama_index.retrievers.bm25 import BM25Retriever
    corpus = ctx.corpus
    index = _llamaindex_vector_index(ctx)
    nodes: list[BaseNode] = [TextNode(id_=cid, text=text, metadata=meta) for cid, text, meta in corpus.rows()]
    bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=ctx.k)
    fusion = QueryFusionRetriever(
        [index.as_retriever(similarity_top_k=ctx.k), bm25],
        llm=_refusing_llm_class()(),
        mode="reciprocal_rerank",  # type: ignore[arg-type]  # the enum's value, as users write it
        num_queries=1,
        similarity_top_k=ctx.k,
        use_async=False,
    )
    return LlamaIndexPeer(fusion, "llamaindex-fusion")
