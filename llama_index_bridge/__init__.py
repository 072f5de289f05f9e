"""LlamaIndex adapters for bridge-rag strategies.

:class:`StrategyRetriever` wraps any strategy; the named retrievers build one and add the
constructors a LlamaIndex user expects (``from_defaults``, ``from_vector_store``,
``persist`` / ``from_persist_dir``). :class:`ParentPromotionPostprocessor` post-processes
any retriever's nodes.
"""

from llama_index_bridge.bridge import BridgeRetriever
from llama_index_bridge.bubble import BubbleRetriever
from llama_index_bridge.postprocessors import ParentPromotionPostprocessor
from llama_index_bridge.retrievers import StrategyRetriever, from_llama_document, to_node_with_score
from llama_index_bridge.umg import UMGRetriever

__all__ = [
    "BridgeRetriever",
    "BubbleRetriever",
    "ParentPromotionPostprocessor",
    "StrategyRetriever",
    "UMGRetriever",
    "from_llama_document",
    "to_node_with_score",
]
