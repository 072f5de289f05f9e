"""Node postprocessors: post-processing for any LlamaIndex retriever's results."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal

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
from pydantic import Field, model_validator

from core.promotion import Promoted, PromotionItem, promote_to_parents, texts_from_store

__all__ = ["ParentPromotionPostprocessor"]


def _index(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


class ParentPromotionPostprocessor(BaseNodePostprocessor):
    """Parent promotion (UMGP) for any retriever: small nodes become their parent windows.

    Each retrieved node that covers at most ``fine_max_sentences`` sentences of its source
    document is replaced by the window of ``parent_size`` sentences around it, and
    overlapping or nested passages of one document are merged (``mode="keep_best"`` keeps the
    best one, ``"union"`` their union span); see :func:`core.promotion.promote_to_parents`.
    A node is located by its source document id (``metadata[doc_id_key]``, else
    ``node.ref_doc_id``) and its character offsets (``metadata[start_key]`` /
    ``metadata[end_key]``, else ``node.start_char_idx`` / ``node.end_char_idx``, which
    LlamaIndex's node parsers set). Nodes that cannot be located pass through unchanged.

    Unlike LlamaIndex's ``AutoMergingRetriever``, no docstore of parent nodes is needed: the
    parents are cut from the source texts, so this works behind a plain
    ``VectorStoreIndex`` over a ``ChromaVectorStore`` (where the docstore stays empty).

    Results are ordered by score (rank when some node has none). A promoted node is a new
    ``TextNode`` with id ``"{doc_id}::s{first}-{last}"``, the parent's text and offsets, the
    best member's metadata and its ``SOURCE`` relationship. Every result's metadata gets
    ``promoted`` and ``merged_ids`` (and, when located, ``start_index``/``end_index``/
    ``sent_start``/``sent_end``), kept out of the LLM and embedding views.

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

    texts: dict[str, str] = Field(default_factory=dict, description="Full source texts by document id.")
    parent_size: int = Field(default=8, ge=1, strict=True, description="Sentences per parent window.")
    stride: int | None = Field(
        default=None, ge=1, strict=True, description="Step between windows; None for parent_size // 2."
    )
    fine_max_sentences: int = Field(
        default=4, ge=0, strict=True, description="Nodes covering at most this many sentences are promoted."
    )
    mode: Literal["keep_best", "union"] = Field(
        default="keep_best", description="keep_best keeps the best of overlapping passages; union merges."
    )
    doc_id_key: str = Field(default="doc_id", description="Metadata key of the source document id.")
    start_key: str = Field(default="start_index", description="Metadata key of the start offset.")
    end_key: str = Field(default="end_index", description="Metadata key of the end offset.")

    @model_validator(mode="after")
    def _check_stride(self) -> ParentPromotionPostprocessor:
        if self.stride is not None and self.stride > self.parent_size:
            raise ValueError(f"stride must be <= parent_size ({self.parent_size}), got {self.stride}")
        return self

    @classmethod
    def class_name(cls) -> str:
        """The component's class name."""
        return "ParentPromotionPostprocessor"

    @classmethod
    def from_documents(cls, documents: Iterable[BaseNode], **kwargs: Any) -> ParentPromotionPostprocessor:
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
        texts: dict[str, str] = {}
        for doc in documents:
            doc_id = str(doc.metadata.get(key, doc.id_))
            text = doc.get_content(metadata_mode=MetadataMode.NONE)
            if doc_id in texts and texts[doc_id] != text:
                raise ValueError(f"two different documents have the id {doc_id!r}; ids must be unique")
            texts[doc_id] = text
        return cls(texts=texts, **kwargs)

    @classmethod
    def from_umg(cls, strategy: Any, **kwargs: Any) -> ParentPromotionPostprocessor:
        """Builds the postprocessor over the documents of a UMG-RAG index.

        The texts are rebuilt from the index's sentence-window units in Chroma (see
        :func:`core.promotion.texts_from_store`).

        Args:
            strategy: A :class:`core.strategies.umg.UMGRAG` (or a retriever wrapping one).
            **kwargs: Other fields.

        Returns:
            The postprocessor.

        Raises:
            TypeError: ``strategy`` has no Chroma store.
        """
        strategy = getattr(strategy, "strategy", strategy)
        store = getattr(strategy, "store", None)
        if store is None:
            raise TypeError(f"from_umg expects a UMGRAG strategy, got {type(strategy).__name__}")
        return cls(texts=texts_from_store(store), **kwargs)

    def _item(self, nws: NodeWithScore, score: float) -> PromotionItem:
        node = nws.node
        meta = node.metadata
        raw_id = meta.get(self.doc_id_key, node.ref_doc_id)
        if self.start_key in meta:
            start, end = _index(meta.get(self.start_key)), _index(meta.get(self.end_key))
        elif isinstance(node, TextNode):
            start, end = node.start_char_idx, node.end_char_idx
        else:
            start = end = None
        return PromotionItem(
            doc_id=None if raw_id is None else str(raw_id),
            start=start,
            end=end,
            score=score,
            text=node.get_content(metadata_mode=MetadataMode.NONE),
            metadata=dict(meta),
            id=node.node_id,
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
        given = [n.score for n in nodes]
        if all(s is not None and math.isfinite(s) for s in given):
            scores = [float(s) for s in given if s is not None]
        else:
            scores = [float(len(nodes) - i) for i in range(len(nodes))]
        promoted = promote_to_parents(
            [self._item(n, s) for n, s in zip(nodes, scores, strict=True)],
            self.texts,
            parent_size=self.parent_size,
            stride=self.stride,
            fine_max_sentences=self.fine_max_sentences,
            mode=self.mode,
        )
        return [
            NodeWithScore(node=self._node(p, nodes[p.index].node), score=nodes[p.index].score)
            for p in promoted
        ]

    def _node(self, p: Promoted, source: BaseNode) -> BaseNode:
        """The output node of one passage (a modified copy of its best member)."""
        metadata = dict(p.metadata)
        if p.sent_start is not None and p.start is not None and p.end is not None:
            metadata[self.start_key] = p.start
            metadata[self.end_key] = p.end
        added = [key for key in metadata if key not in source.metadata or key in ("promoted", "merged_ids")]
        update: dict[str, Any] = {
            "metadata": metadata,
            "excluded_llm_metadata_keys": list(dict.fromkeys([*source.excluded_llm_metadata_keys, *added])),
            "excluded_embed_metadata_keys": list(
                dict.fromkeys([*source.excluded_embed_metadata_keys, *added])
            ),
        }
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
