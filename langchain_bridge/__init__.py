"""LangChain adapters for bridge-rag strategies."""

__all__: list[str] = []
