"""``EntityHopPostprocessor``: multi-hop for any LlamaIndex retriever, as a node postprocessor.

After a ``VectorStoreIndex`` retriever (or any other), the retrieved nodes seed the
entity-hop walk over a Bridge-RAG index of the same corpus (:mod:`core.entity_hop`); the
merged ranking comes back with the provenance keys of the strategies' retrievers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Self

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters
from pydantic import Field, PrivateAttr, field_validator

from core.adapters import chroma_collection, split_fields
from core.entity_hop import EntityHopWalk, Seed
from core.store import ChunkStore
from core.strategies.common import jsonable
from llama_index_bridge.filters import to_chroma_where
from llama_index_bridge.retrievers import core_documents, hiding, to_node_with_score

__all__ = ["EntityHopPostprocessor"]


class EntityHopPostprocessor(BaseNodePostprocessor):
    """The entity-hop walk from a retriever's nodes, over an index of the same corpus.

    Build it with :meth:`from_defaults` (the documents or nodes the retriever's index holds),
    :meth:`from_vector_store` (the nodes already in its ``ChromaVectorStore``) or
    :meth:`from_persist_dir` (a bridge-rag index directory). A node is matched to the index
    by its id, else by its text; one the index does not hold keeps its rank.

    Example:
        ```python
        from llama_index_bridge import EntityHopPostprocessor

        hop = EntityHopPostprocessor.from_defaults(documents=nodes, embed_model=embed_model, top_n=5)
        engine = index.as_query_engine(similarity_top_k=10, node_postprocessors=[hop])
        ```
    """

    top_n: int = Field(default=4, ge=1, description="Nodes returned (seeds and reached chunks merged).")
    reuse_query_embedding: bool = Field(
        default=True,
        description="Use the query bundle's embedding when the retriever computed one with the same model.",
    )
    """Use ``query_bundle.embedding`` when the retriever before this step already computed it
    (a ``VectorStoreIndex`` retriever in a query engine does), as LlamaIndex's own
    ``SentenceEmbeddingOptimizer`` does; an embedding of another dimension is ignored. Set it
    to False when the retriever embeds with another model of the same dimension."""
    filters: MetadataFilters | None = Field(
        default=None, description="Metadata filters: the walk keeps to the chunks that pass them."
    )
    """LlamaIndex metadata filters, as the retriever before this step takes them (a tenant's):
    seeds match, and the walk reaches, only chunks that pass them."""
    include_abstracts: bool = Field(
        default=False, description="Also return the Bridge-RAG abstracts of the nodes, after them."
    )
    """After the ``top_n`` nodes, the summaries of the Bridge-RAG abstracts they belong to, as
    extra context (``metadata["type"] == "abstract"``; under ``filters``, only abstracts whose
    every chunk passes them)."""
    _walk: EntityHopWalk = PrivateAttr()

    @field_validator("filters", mode="before")
    @classmethod
    def _check_filters(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, MetadataFilters):
            raise ValueError(
                f"filters must be a llama_index MetadataFilters, got {type(value).__name__}: e.g. "
                "MetadataFilters(filters=[MetadataFilter(key='tenant', value='acme')])"
            )
        return value

    def __init__(self, walk: EntityHopWalk, top_n: int = 4, **kwargs: Any) -> None:
        super().__init__(top_n=top_n, **kwargs)  # type: ignore[call-arg]  # a field of this subclass
        to_chroma_where(self.filters)  # an operator Chroma cannot express fails here
        self._walk = walk

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's serialisation name."""
        return "EntityHopPostprocessor"

    @property
    def walk(self) -> EntityHopWalk:
        """The walk and its Bridge-RAG index (``hop.walk.index.sync()`` follows the store's own writes)."""
        return self._walk

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> Self:
        """Refused: ``to_dict`` holds the fields, not the index they walk over.

        Raises:
            TypeError: Always; the message says how to reopen the index.
        """
        raise TypeError(
            "EntityHopPostprocessor cannot be rebuilt from a dict (its index is not in it); open the "
            "index with EntityHopPostprocessor.from_persist_dir(persist_dir, top_n=..., ...)"
        )

    @classmethod
    def from_defaults(
        cls, documents: Sequence[BaseNode], *, embed_model: Any = None, top_n: int = 4, **settings: Any
    ) -> EntityHopPostprocessor:
        """Indexes the corpus the retriever searches.

        Args:
            documents: LlamaIndex documents or nodes (their ids name them).
            embed_model: A LlamaIndex embedding model; default all-MiniLM-L6-v2. The query is
                embedded at most once per call, not at all when the bundle carries the
                retriever's embedding.
            top_n: Nodes returned.
            **settings: This postprocessor's fields (``reuse_query_embedding``, ``filters``,
                ``include_abstracts``, ``callback_manager``),
                :class:`core.strategies.bridge.strategy.BridgeConfig` fields, or
                ``persist_directory`` to keep the index.
        """
        fields, settings = split_fields(settings, cls.model_fields)
        walk = EntityHopWalk.from_documents(
            core_documents(documents), embedder=embed_model, k=top_n, **settings
        )
        return cls(walk, top_n, **fields)

    @classmethod
    def from_vector_store(
        cls, vector_store: Any, *, embed_model: Any = None, top_n: int = 4, **settings: Any
    ) -> EntityHopPostprocessor:
        """Indexes the nodes already in the retriever's ``ChromaVectorStore`` (nothing re-embedded).

        The retriever's nodes and the index's chunks are then the same rows, matched by id.

        Args:
            vector_store: A ``llama_index.vector_stores.chroma.ChromaVectorStore``.
            embed_model: The embedding model the store was filled with (the store does not know
                it; the dimensions are checked); default all-MiniLM-L6-v2.
            top_n: Nodes returned.
            **settings: As for :meth:`from_defaults` (no ``persist_directory``).

        Raises:
            TypeError: ``vector_store`` is not a Chroma vector store.
        """
        fields, settings = split_fields(settings, cls.model_fields)
        store = ChunkStore(chroma_collection(vector_store, "from_vector_store expects a ChromaVectorStore"))
        return cls(
            EntityHopWalk.from_store(store, embedder=embed_model, k=top_n, **settings), top_n, **fields
        )

    @classmethod
    def from_persist_dir(
        cls, persist_dir: str | os.PathLike[str], *, embed_model: Any = None, top_n: int = 4, **fields: Any
    ) -> EntityHopPostprocessor:
        """Opens a bridge-rag index directory of the same corpus (no rebuild).

        Args:
            persist_dir: The index directory (``bridge-rag index`` or ``persist_directory``).
            embed_model: The embedding model the index was built with; default all-MiniLM-L6-v2.
            top_n: Nodes returned.
            **fields: This postprocessor's fields (``reuse_query_embedding``, ``filters``,
                ``include_abstracts``, ``callback_manager``).

        Raises:
            TypeError: A keyword that is not one of its fields.
        """
        unknown = sorted(set(fields) - set(cls.model_fields))
        if unknown:
            raise TypeError(
                f"EntityHopPostprocessor has no field {unknown}; its fields: {sorted(cls.model_fields)}"
            )
        walk = EntityHopWalk.load(persist_dir, embedder=embed_model, k=top_n)
        return cls(walk, top_n, **fields)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("EntityHopPostprocessor needs the query: pass query_bundle (or query_str)")
        seeds = [Seed(n.node.node_id, n.node.get_content()) for n in nodes]
        vector = query_bundle.embedding if self.reuse_query_embedding else None
        provenance = self._walk.index.provenance_keys
        out: list[NodeWithScore] = []
        where = to_chroma_where(self.filters)  # read at every call: assigning it later takes effect
        hits = self._walk.expand(
            query_bundle.query_str,
            seeds,
            self.top_n,
            query_vector=vector,
            filter=where,
            include_abstracts=self.include_abstracts,
        )
        for hit in hits:
            original = nodes[hit.seed] if hit.seed is not None else None
            if hit.result is None:
                if original is not None:  # a seed the index does not hold: as retrieved
                    out.append(original)
            elif original is not None:  # the retriever's own node (a copy), with the walk's provenance
                node = _with_walk_metadata(
                    original.node, self._walk.provenance(hit.result, original.node.metadata)
                )
                out.append(NodeWithScore(node=node, score=hit.result.score))
            else:
                out.append(to_node_with_score(hit.result, provenance_keys=provenance))
        return out


def _with_walk_metadata(node: BaseNode, provenance: Mapping[str, Any]) -> BaseNode:
    """A copy of ``node`` carrying the walk's provenance, kept out of the LLM's view."""
    added = jsonable(dict(provenance))
    return node.model_copy(update={"metadata": {**node.metadata, **added}, **hiding(node, list(added))})
