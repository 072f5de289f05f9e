"""The abstract forest: Bridge-RAG's tree of abstracts over chunk ranges, in flat C++ arrays."""

from __future__ import annotations

from core import _native
from core.native.serial import SerializableMixin

__all__ = ["AbstractForest"]


class AbstractForest(SerializableMixin, _native.AbstractForest):
    """A forest of abstract nodes stored as flat arrays (parent, level, chunk range, CSR children).

    Each node owns a contiguous chunk range ``[chunk_begin, chunk_end)`` (possibly empty for
    upper nodes) and, through its descendants, their ranges too. A parent's level must be
    strictly above its children's, which rules out cycles. Nodes are appended with
    :meth:`add_nodes` (incremental builds); a root can later be given a parent with
    :meth:`set_parents`.

    :meth:`expand` implements Bridge-RAG's neighbourhood (eq. 1): from each seed, up to
    ``depth`` ancestors and ``depth`` levels of descendants. :meth:`chunk_ids` returns the
    sorted union of the chunks the given nodes own. Both release the GIL.

    Example:
        >>> f = AbstractForest()
        >>> f.add_nodes(levels=[0, 0, 1], chunk_begin=[0, 5, 0], chunk_end=[5, 8, 0], parents=[2, 2, -1])
        0
        >>> f.expand([0], depth=1)[0].tolist()
        [0, 2]
        >>> f.chunk_ids([2]).tolist()
        [0, 1, 2, 3, 4, 5, 6, 7]
    """

    _what = "abstract forest file"

    def __repr__(self) -> str:
        return f"AbstractForest(nodes={len(self)})"
