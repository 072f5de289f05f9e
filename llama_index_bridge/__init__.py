"""LlamaIndex adapters for bridge-rag strategies: the retrievers and ``ParentPromotionPostprocessor``."""

from llama_index_bridge.fusion import UncertaintyFusionRetriever
from llama_index_bridge.hop import EntityHopPostprocessor
from llama_index_bridge.postprocessors import ParentPromotionPostprocessor
from llama_index_bridge.retrievers import (
    BridgeRetriever,
    BubbleRetriever,
    StrategyRetriever,
    UMGRetriever,
    from_llama_document,
    to_node_with_score,
)

__all__ = [
    "BridgeRetriever",
    "BubbleRetriever",
    "EntityHopPostprocessor",
    "ParentPromotionPostprocessor",
    "StrategyRetriever",
    "UMGRetriever",
    "UncertaintyFusionRetriever",
    "from_llama_document",
    "to_node_with_score",
]
