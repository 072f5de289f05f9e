"""Document compressors: post-processing for any LangChain retriever's results."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Self

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document

from core.adapters.promotion import ParentPromotionSettings, offset_or_none, promotion_item, texts_by_id
from core.strategies.umg.promotion import PromotionItem

__all__ = ["ParentPromotionCompressor"]


class ParentPromotionCompressor(ParentPromotionSettings, BaseDocumentCompressor):
    """Parent promotion (UMGP) for any retriever: small hits become their parent windows.

    Documents covering at most ``fine_max_sentences`` sentences of their source are replaced by
    the ``parent_size``-sentence window around them, and overlapping passages of one source are
    merged (``mode``; see :func:`core.strategies.umg.promotion.promote_to_parents`). A document
    is located by ``metadata[doc_id_key]`` (a key of :attr:`texts`), ``metadata[start_key]``
    (LangChain splitters' ``add_start_index=True``) and ``metadata[end_key]`` (default
    ``start + len(page_content)``); others pass through unchanged. Results are
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

    score_key: str = "score"
    """Metadata key of the retriever's score (rank order is used when some document lacks it)."""

    @classmethod
    def from_documents(cls, documents: Iterable[Document], **kwargs: Any) -> Self:
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

    def _item(self, doc: Document, score: float) -> PromotionItem:
        meta = doc.metadata
        start = offset_or_none(meta.get(self.start_key))
        if self.end_key in meta:
            end = offset_or_none(meta[self.end_key])
        else:
            end = None if start is None else start + len(doc.page_content)
        member_id = doc.id if doc.id is not None else meta.get("id")
        return promotion_item(meta.get(self.doc_id_key), start, end, score, doc.page_content, meta, member_id)

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
        promoted = self._promote(docs, [d.metadata.get(self.score_key) for d in docs], self._item)
        return [
            Document(page_content=p.text, metadata=p.metadata, id=p.id if p.promoted else docs[p.index].id)
            for p in promoted
        ]
