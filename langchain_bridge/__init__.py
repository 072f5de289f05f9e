"""LangChain adapters for bridge-rag strategies.

:class:`StrategyRetriever` wraps any strategy; the named retrievers build one and add the
constructors a LangChain user expects (``from_documents``, ``from_vectorstore``, ``load``).
"""

from langchain_bridge.bridge import BridgeRetriever
from langchain_bridge.retrievers import StrategyRetriever, from_langchain_document, to_langchain_document

__all__ = ["BridgeRetriever", "StrategyRetriever", "from_langchain_document", "to_langchain_document"]
