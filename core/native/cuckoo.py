"""Entity -> abstract-id map: the CFT-RAG cuckoo filter, exact, growable and thread-safe."""

from __future__ import annotations

from core import _native
from core.native.serial import SerializableMixin

__all__ = ["CuckooFilter"]


class CuckooFilter(SerializableMixin, _native.CuckooFilter):
    """Cuckoo filter mapping an entity string to the sorted ids of the abstracts that mention it.

    Buckets hold four slots; each slot keeps a fingerprint (``fingerprint_bits`` of the key's
    hash, 8-16) and a reference to an entry record. The two candidate buckets are
    ``i1 = hash & (buckets - 1)`` and ``i2 = i1 XOR hash(fingerprint)``. Unlike the published
    CFT-RAG code, every fingerprint hit is verified against the key's full 64-bit hash, so a
    lookup never returns another entity's list; when bounded eviction (``max_kicks``) fails,
    the table doubles and is rebuilt instead of refusing the insert.

    Each entry has a temperature, incremented on every successful :meth:`lookup` /
    :meth:`lookup_many` (``touch=True``); :meth:`reorder` sorts every bucket hottest-first and
    runs automatically every ``reorder_every`` lookups (0 disables it). Lookups from several
    threads are safe and the temperature counts stay exact; batch calls release the GIL.

    Two keys with the same 64-bit hash are treated as the same entity (probability about
    n^2 / 2^65 for n keys: 3e-8 at a million keys).

    Example:
        >>> f = CuckooFilter()
        >>> f.insert("marie curie", [3, 7])
        True
        >>> f.insert("marie curie", [1])
        False
        >>> f.lookup("marie curie")
        [1, 3, 7]
        >>> f.lookup("pierre curie") is None
        True

    Key init args (keyword only):
        fingerprint_bits: Significant fingerprint bits, 8-16 (default 12).
        capacity: Expected number of entities; sizes the first table (default 1024).
        max_kicks: Evictions tried before the table grows (default 500).
        reorder_every: Lookups between automatic reorders; 0 = never (default 1,000,000). A
            reorder reads every entry once, so keep it well above the number of entities.
        seed: Hash and eviction seed; same seed and same operations give the same bytes.
    """

    _what = "cuckoo filter file"

    def get(self, entity: str, default: list[int] | None = None) -> list[int] | None:
        """Returns the entity's ids without warming it, or ``default`` when absent.

        Args:
            entity: The entity string.
            default: Returned when the entity is absent.

        Returns:
            The sorted abstract ids, or ``default``.
        """
        ids = self.lookup(entity, touch=False)
        return default if ids is None else ids

    def __repr__(self) -> str:
        return (
            f"CuckooFilter(entities={len(self)}, buckets={self.num_buckets}, "
            f"load_factor={self.load_factor():.3f}, fingerprint_bits={self.fingerprint_bits})"
        )
