"""LangChain adapters for bridge-rag strategies.

:class:`StrategyRetriever` wraps any strategy; the named retrievers build one and add the
constructors a LangChain user expects (``from_documents``, ``from_vectorstore``, ``load``).
:class:`ParentPromotionCompressor` post-processes any retriever's results.
"""

from langchain_bridge.bridge import BridgeRetriever
from langchain_bridge.bubble import BubbleRetriever
from langchain_bridge.compressors import ParentPromotionCompressor
from langchain_bridge.retrievers import StrategyRetriever, from_langchain_document, to_langchain_document
from langchain_bridge.umg import UMGRetriever

__all__ = [
    "BridgeRetriever",
    "BubbleRetriever",
    "ParentPromotionCompressor",
    "StrategyRetriever",
    "UMGRetriever",
    "from_langchain_document",
    "to_langchain_document",
]
