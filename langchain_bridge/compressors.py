"""Document compressors: post-processing for any LangChain retriever's results."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import Field, model_validator

from core.adapters import offset_or_none, promote, scores_or_ranks, texts_by_id, umg_store_of
from core.strategies.umg.promotion import PromotionItem, texts_from_store

__all__ = ["ParentPromotionCompressor"]


class ParentPromotionCompressor(BaseDocumentCompressor):
    """Parent promotion (UMGP) for any retriever: small hits become their parent windows.

    Documents covering at most ``fine_max_sentences`` sentences of their source are replaced by
    the ``parent_size``-sentence window around them, and overlapping passages of one source are
    merged (``mode``; see :func:`core.strategies.umg.promotion.promote_to_parents`). A document
    is located by ``metadata[doc_id_key]`` (a key of :attr:`texts`) and ``metadata[start_key]``
    (LangChain splitters' ``add_start_index=True``); others pass through unchanged. Results are
    ordered by ``metadata[score_key]`` (rank when some is missing) and carry ``promoted``,
    ``merged_ids`` and, when located, their offsets and sentence span.

    Setup:
        ```bash
        pip install "bridge-rag[langchain]" langchain-classic
        ```

    Key init args:
        texts: dict[str, str]
            Full source texts by document id (or use :meth:`from_documents` / :meth:`from_umg`).
        parent_size: int
            Sentences per parent window (default 8).
        fine_max_sentences: int
            Hits covering at most this many sentences are promoted (default 4).
        mode: "keep_best" | "union"
            How overlapping passages of one document are de-duplicated.

    Instantiate:
        ```python
        from langchain_classic.retrievers import ContextualCompressionRetriever
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        from langchain_bridge import ParentPromotionCompressor

        splitter = RecursiveCharacterTextSplitter(chunk_size=200, add_start_index=True)
        vectorstore.add_documents(splitter.split_documents(docs))  # docs carry metadata["doc_id"]
        retriever = ContextualCompressionRetriever(
            base_compressor=ParentPromotionCompressor.from_documents(docs),
            base_retriever=vectorstore.as_retriever(search_kwargs={"k": 10}),
        )
        ```

    Usage:
        ```python
        docs = retriever.invoke("Who built the telescope?")
        docs[0].metadata["promoted"], docs[0].metadata["merged_ids"]
        ```
    """

    texts: dict[str, str] = Field(default_factory=dict)
    """Full source document texts by document id."""

    parent_size: int = Field(default=8, ge=1, strict=True)
    """Sentences per parent window."""

    stride: int | None = Field(default=None, ge=1, strict=True)
    """Step between parent windows; None for ``max(1, parent_size // 2)``."""

    fine_max_sentences: int = Field(default=4, ge=0, strict=True)
    """Documents covering at most this many sentences are promoted."""

    mode: Literal["keep_best", "union"] = "keep_best"
    """``"keep_best"`` keeps the best of overlapping passages; ``"union"`` merges them."""

    doc_id_key: str = "doc_id"
    """Metadata key of the source document id."""

    start_key: str = "start_index"
    """Metadata key of the start offset in the source document."""

    end_key: str = "end_index"
    """Metadata key of the end offset (default ``start + len(page_content)`` when absent)."""

    score_key: str = "score"
    """Metadata key of the retriever's score (rank order is used when some document lacks it)."""

    @model_validator(mode="after")
    def _check_stride(self) -> ParentPromotionCompressor:
        if self.stride is not None and self.stride > self.parent_size:
            raise ValueError(f"stride must be <= parent_size ({self.parent_size}), got {self.stride}")
        return self

    @classmethod
    def from_documents(cls, documents: Iterable[Document], **kwargs: Any) -> ParentPromotionCompressor:
        """Builds the compressor from the full source documents (before splitting).

        Args:
            documents: The source documents; each one's id is ``metadata[doc_id_key]`` when
                present, else ``doc.id``.
            **kwargs: Other fields (``parent_size``, ``mode``, ``doc_id_key``, ...).

        Returns:
            The compressor.

        Raises:
            ValueError: A document has no id, or two different texts share one.
        """
        key = str(kwargs.get("doc_id_key", "doc_id"))
        texts = texts_by_id((doc.metadata.get(key, doc.id), doc.page_content) for doc in documents)
        return cls(texts=texts, **kwargs)

    @classmethod
    def from_umg(cls, strategy: Any, **kwargs: Any) -> ParentPromotionCompressor:
        """Builds the compressor over the documents of a UMG-RAG index.

        The texts are rebuilt from the index's sentence-window units in Chroma (see
        :func:`core.strategies.umg.promotion.texts_from_store`), so no source documents are needed.

        Args:
            strategy: A :class:`core.strategies.umg.UMGRAG` (or a retriever wrapping one).
            **kwargs: Other fields (``parent_size``, ``mode``, ...).

        Returns:
            The compressor.
        """
        return cls(texts=texts_from_store(umg_store_of(strategy)), **kwargs)

    def _item(self, doc: Document, score: float) -> PromotionItem:
        meta = doc.metadata
        raw_id = meta.get(self.doc_id_key)
        start = offset_or_none(meta.get(self.start_key))
        if self.end_key in meta:
            end = offset_or_none(meta[self.end_key])
        else:
            end = None if start is None else start + len(doc.page_content)
        member_id = doc.id if doc.id is not None else meta.get("id")
        return PromotionItem(
            doc_id=None if raw_id is None else str(raw_id),
            start=start,
            end=end,
            score=score,
            text=doc.page_content,
            metadata=dict(meta),
            id=None if member_id is None else str(member_id),
        )

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Promotes the documents to their parent windows and removes overlaps.

        Args:
            documents: A retriever's results, best first.
            query: The query (unused).
            callbacks: Unused.

        Returns:
            New documents, best first; the inputs are not modified.
        """
        docs = list(documents)
        scores = scores_or_ranks([d.metadata.get(self.score_key) for d in docs])
        items = [self._item(d, s) for d, s in zip(docs, scores, strict=True)]
        out: list[Document] = []
        for p in promote(self, items, self.start_key, self.end_key):
            doc_id = p.id if p.promoted else docs[p.index].id
            out.append(Document(page_content=p.text, metadata=p.metadata, id=doc_id))
        return out
