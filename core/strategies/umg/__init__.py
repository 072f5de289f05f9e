"""UMG-RAG / UMGP-RAG: uncertainty-weighted hybrid retrieval over several sentence granularities.

Modules only this strategy uses: :mod:`.units` (sentence windows), :mod:`.sparse` (BM25 and
SPLADE experts), :mod:`.uncertainty` (entropy confidences), :mod:`.promotion` (parent
promotion and overlap removal, also behind the framework compressors) and :mod:`.strategy`
(:class:`UMGRAG` itself).
"""

from core.strategies.umg.strategy import UMGRAG, UMGConfig

__all__ = ["UMGRAG", "UMGConfig"]
