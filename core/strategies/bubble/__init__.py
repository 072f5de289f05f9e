"""BubbleRAG: evidence subgraphs of a schema-free knowledge graph, mapped back to their chunks.

Modules only this strategy uses: :mod:`.triples` (spaCy / LLM triple extraction), :mod:`.kg`
(the knowledge graph with node and edge vectors), :mod:`.concepts` (query concepts),
:mod:`.blas` (one BLAS thread inside a query) and :mod:`.strategy` (:class:`BubbleRAG`).
"""

from core.strategies.bubble.strategy import BubbleConfig, BubbleRAG, EvidenceGraph

__all__ = ["BubbleConfig", "BubbleRAG", "EvidenceGraph"]
