"""LlamaIndex adapters for bridge-rag strategies."""

from llama_index_bridge.retrievers import StrategyRetriever, from_llama_document, to_node_with_score

__all__ = ["StrategyRetriever", "from_llama_document", "to_node_with_score"]
