"""Bridge-RAG: entity -> abstract -> chunk retrieval over an abstract forest (CFT-RAG filter).

Modules only this strategy uses: :mod:`.abstracts` (level-0 abstract summaries),
:mod:`.hierarchy` (grouping abstracts by meaning into upper levels) and :mod:`.strategy`
(:class:`BridgeRAG` itself).
"""

from core.strategies.bridge.strategy import BridgeConfig, BridgeRAG

__all__ = ["BridgeConfig", "BridgeRAG"]
