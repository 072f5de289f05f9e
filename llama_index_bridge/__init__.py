"""LlamaIndex adapters for bridge-rag strategies.

:class:`StrategyRetriever` wraps any strategy; the named retrievers build one and add the
constructors a LlamaIndex user expects (``from_defaults``, ``from_vector_store``,
``persist`` / ``from_persist_dir``).
"""

from llama_index_bridge.bridge import BridgeRetriever
from llama_index_bridge.retrievers import StrategyRetriever, from_llama_document, to_node_with_score

__all__ = ["BridgeRetriever", "StrategyRetriever", "from_llama_document", "to_node_with_score"]
