"""LangChain adapters for bridge-rag strategies: the retrievers and ``ParentPromotionCompressor``."""

from langchain_bridge.compressors import ParentPromotionCompressor
from langchain_bridge.fusion import UncertaintyFusionRetriever
from langchain_bridge.hop import EntityHopCompressor
from langchain_bridge.retrievers import (
    BridgeRetriever,
    BubbleRetriever,
    StrategyRetriever,
    UMGRetriever,
    from_langchain_document,
    to_langchain_document,
)

__all__ = [
    "BridgeRetriever",
    "BubbleRetriever",
    "EntityHopCompressor",
    "ParentPromotionCompressor",
    "StrategyRetriever",
    "UMGRetriever",
    "UncertaintyFusionRetriever",
    "from_langchain_document",
    "to_langchain_document",
]
