"""Node postprocessors: post-processing for any LlamaIndex retriever's results."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Self

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)

from core.adapters.promotion import ParentPromotionSettings, offset_or_none, promotion_item, texts_by_id
from core.strategies.umg.promotion import Promoted, PromotionItem
from llama_index_bridge.retrievers import hiding

__all__ = ["ParentPromotionPostprocessor"]


class ParentPromotionPostprocessor(ParentPromotionSettings, BaseNodePostprocessor):
    """Parent promotion (UMGP) for any retriever: small nodes become their parent windows.

    Nodes covering at most ``fine_max_sentences`` sentences of their source are replaced by the
    ``parent_size``-sentence window around them, and overlapping passages of one document are
    merged (``mode``; see :func:`core.strategies.umg.promotion.promote_to_parents`). A node is
    located by ``metadata[doc_id_key]`` (else ``ref_doc_id``) and ``metadata[start_key]`` /
    ``[end_key]`` (else ``start_char_idx`` / ``end_char_idx``); others pass through unchanged.
    No docstore of parent nodes is needed (unlike ``AutoMergingRetriever``): parents are cut
    from the source texts, so this works behind a ``VectorStoreIndex`` over Chroma. Results are
    ordered by score (rank when some is missing); a promoted node is a new ``TextNode``
    ``"{doc_id}::s{first}-{last}"`` with the best member's metadata and ``SOURCE``; every
    result gets ``promoted`` and ``merged_ids`` (and offsets), kept out of the LLM's view.

    Setup:
        ```bash
        pip install "bridge-rag[llama-index]"
        ```

    Instantiate:
        ```python
        from llama_index_bridge import ParentPromotionPostprocessor

        postprocessor = ParentPromotionPostprocessor.from_documents(documents, parent_size=8)
        ```

    Usage:
        ```python
        engine = index.as_query_engine(similarity_top_k=10, node_postprocessors=[postprocessor])
        nodes = postprocessor.postprocess_nodes(index.as_retriever().retrieve(question))
        ```
    """

    @classmethod
    def class_name(cls) -> str:
        """The component's class name."""
        return "ParentPromotionPostprocessor"

    @classmethod
    def from_documents(cls, documents: Iterable[BaseNode], **kwargs: Any) -> Self:
        """Builds the postprocessor from the full source documents (before parsing into nodes).

        Args:
            documents: The source documents; each one's id is ``metadata[doc_id_key]`` when
                present, else its ``id_`` (the ``ref_doc_id`` of the nodes parsed from it).
            **kwargs: Other fields (``parent_size``, ``mode``, ``doc_id_key``, ...).

        Returns:
            The postprocessor.

        Raises:
            ValueError: Two different texts share an id.
        """
        key = str(kwargs.get("doc_id_key", "doc_id"))
        texts = texts_by_id(
            (doc.metadata.get(key, doc.id_), doc.get_content(metadata_mode=MetadataMode.NONE))
            for doc in documents
        )
        return cls(texts=texts, **kwargs)

    def _item(self, nws: NodeWithScore, score: float) -> PromotionItem:
        node = nws.node
        meta = node.metadata
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        if self.start_key in meta:  # the offsets in metadata, the end defaulting as LangChain's does
            start = offset_or_none(meta[self.start_key])
            if self.end_key in meta:
                end = offset_or_none(meta[self.end_key])
            else:
                end = None if start is None else start + len(text)
        elif isinstance(node, TextNode):
            start, end = node.start_char_idx, node.end_char_idx
        else:
            start = end = None
        return promotion_item(
            meta.get(self.doc_id_key, node.ref_doc_id), start, end, score, text, meta, node.node_id
        )

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        """Promotes the nodes to their parent windows and removes overlaps.

        Args:
            nodes: A retriever's results, best first.
            query_bundle: Unused.

        Returns:
            New scored nodes, best first; the inputs are not modified.
        """
        promoted = self._promote(nodes, [n.score for n in nodes], self._item)
        return [
            NodeWithScore(node=self._node(p, nodes[p.index].node), score=nodes[p.index].score)
            for p in promoted
        ]

    def _node(self, p: Promoted, source: BaseNode) -> BaseNode:
        """The output node of one passage (a modified copy of its best member)."""
        metadata = dict(p.metadata)
        added = [key for key in metadata if key not in source.metadata or key in ("promoted", "merged_ids")]
        update: dict[str, Any] = {"metadata": metadata, **hiding(source, added)}
        if p.promoted and isinstance(source, TextNode):
            relationships: dict[NodeRelationship, Any] = {}
            if source.source_node is not None:
                relationships[NodeRelationship.SOURCE] = source.source_node
            elif p.doc_id is not None:
                relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=p.doc_id)
            update.update(
                {
                    "id_": p.id,
                    "text": p.text,
                    "start_char_idx": p.start,
                    "end_char_idx": p.end,
                    "relationships": relationships,
                    "embedding": None,
                }
            )
        return source.model_copy(update=update, deep=True)
