"""LangChain adapters for bridge-rag strategies."""

from langchain_bridge.retrievers import StrategyRetriever, from_langchain_document, to_langchain_document

__all__ = ["StrategyRetriever", "from_langchain_document", "to_langchain_document"]
