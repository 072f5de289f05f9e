"""Multi-hop as a post-processing step: the entity-hop walk from another retriever's results.

An app keeps its retriever (a vector store, an ensemble, a reranker); its results take the
place of Bridge-RAG's own dense pool, over a Bridge-RAG index built once from the same corpus
(from the same documents or the same Chroma collection, or opened from a bridge-rag index
directory):

1. each seed is found among the index's chunks: by its id (a chunk id of the collection, or
   a document id, standing for that document's chunk nearest the query), else by its text
   (whitespace folded); a seed found nowhere keeps its place;
2. the query is embedded once; Bridge-RAG then retrieves with the seeds as its dense pool
   (:meth:`~core.strategies.bridge.strategy.BridgeRAG.retrieve_by_vector`, ``pool_rows``):
   the query's entities in the cuckoo filter and their abstracts, and the zero-token
   entity-hop walk (:meth:`core.strategies.entity_links.EntityLinks.propagate`), whose later
   hops start from the best seeds, all with the index's settings;
3. the seeds and the chunks reached are ranked as Bridge-RAG ranks its candidates, the
   confident direct matches kept (:func:`~core.strategies.entity_links.keep_confident`);
   a seed's result says ``found_by: retriever``, a reached chunk how it was reached
   (``entity``, ``hop``, ``tree`` or ``bridge``). A query that names no entity of the index
   gets the seeds back, ranked by cosine.

A ``filter`` (Chroma's ``where`` syntax, a tenant's) holds at every step: a seed is matched
only to a chunk that passes it, and the walk reaches only such chunks.

Nothing here imports a framework: ``langchain_bridge.EntityHopCompressor`` and
``llama_index_bridge.EntityHopPostprocessor`` wrap it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.filters import MetadataFilter, parse_filter
from core.store import ChunkStore
from core.strategies.base import check_k, check_query
from core.strategies.bridge.strategy import BridgeRAG
from core.strategies.common import DOC_ID_KEY, normalise_rows, row_cosines
from core.strategies.follow import follows_writer
from core.types import Document, Retrieved

__all__ = ["EntityHopWalk", "HopHit", "Seed"]


@dataclass(frozen=True)
class Seed:
    """One result of the first retriever.

    Attributes:
        id: Its id (a chunk id of the indexed collection), if it has one.
        text: Its text.
    """

    id: str | None
    text: str


@dataclass(frozen=True)
class HopHit:
    """One merged result: a seed (``seed`` is its index), or a chunk the walk reached.

    Attributes:
        seed: The seed's index in the caller's list, or None for a chunk the walk reached.
        result: The chunk with Bridge-RAG's provenance (``found_by``: ``retriever`` for a
            seed, else ``entity``, ``hop``, ``tree`` or ``bridge``; ``score``, ``cosine``,
            ``matched_entities``, ``hop``, ``hop_score``, ``hop_entities``, ...); None for a
            seed the index does not hold (kept as the retriever gave it).
    """

    seed: int | None
    result: Retrieved | None


def _folded(text: str) -> str:
    return " ".join(text.split())


class EntityHopWalk:
    """The entity-hop walk over a Bridge-RAG index, seeded by another retriever's results.

    Args:
        index: The Bridge-RAG index of the corpus the first retriever searches.
        k: Results returned by default.

    Example:
        >>> walk = EntityHopWalk.from_documents(docs)  # doctest: +SKIP
        >>> hits = walk.expand("Where was the composer of the song born?", seeds, k=5)  # doctest: +SKIP
    """

    def __init__(self, index: BridgeRAG, k: int = 4) -> None:
        if not isinstance(index, BridgeRAG):
            raise TypeError(f"EntityHopWalk needs a BridgeRAG index, got {type(index).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an int >= 1, got {k!r}")
        self.index = index
        self.k = k
        # The live rows by folded text, and the table's ``alive`` array it was built from: every
        # add or delete replaces that array, so a new one means the map is stale.
        self._by_text: tuple[Any, dict[str, list[int]]] | None = None

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        *,
        embedder: Any = None,
        persist_directory: str | os.PathLike[str] | None = None,
        k: int = 4,
        show_progress: bool = False,
        **settings: Any,
    ) -> EntityHopWalk:
        """Builds the index from the first retriever's corpus (:meth:`BridgeRAG.from_documents`)."""
        index = BridgeRAG.from_documents(
            documents,
            embedder=embedder,
            persist_directory=persist_directory,
            show_progress=show_progress,
            **settings,
        )
        return cls(index, k)

    @classmethod
    def from_store(
        cls, store: ChunkStore, *, embedder: Any = None, k: int = 4, **settings: Any
    ) -> EntityHopWalk:
        """Builds the index over the chunks of the first retriever's Chroma collection (not re-embedded)."""
        settings.setdefault("show_progress", False)
        return cls(BridgeRAG.from_store(store, embedder=embedder, **settings), k)

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, embedder: Any = None, k: int = 4, **models: Any
    ) -> EntityHopWalk:
        """Opens a bridge-rag index directory (built with ``persist_directory`` or ``bridge-rag index``)."""
        return cls(BridgeRAG.load(path, embedder=embedder, **models), k)

    def expand(
        self,
        query: str,
        seeds: Sequence[Seed],
        k: int | None = None,
        *,
        query_vector: Any = None,
        filter: Mapping[str, Any] | None = None,
        include_abstracts: bool = False,
    ) -> list[HopHit]:
        """The seeds and the chunks the walk reaches from them, merged, best first.

        Args:
            query: The question.
            seeds: The first retriever's results, best first.
            k: Results (default ``self.k``).
            query_vector: The query's embedding, when the first retriever already computed it
                with the index's model (it is scaled to unit length); one of another
                dimension, or None, and the query is embedded here.
            filter: A metadata filter in Chroma's ``where`` syntax (a tenant's): seeds match, and
                the walk reaches, only chunks that pass it (a seed matching none keeps its rank).
            include_abstracts: Also return, after the hits, the summaries of the Bridge-RAG
                abstracts the hits belong to, as context (``seed`` None, ``metadata["type"] ==
                "abstract"``; under a filter only abstracts whose every chunk passes it).

        Returns:
            At most ``k`` hits: seeds the index holds and reached chunks ranked by cosine plus
            hop bonus; a seed the index does not hold keeps its rank among the seeds. Then the
            abstracts, with ``include_abstracts``.

        Raises:
            TypeError, ValueError: A bad query or ``k`` (as ``retrieve`` checks them).
            core.filters.FilterError: A malformed filter.
        """
        idx = self.index
        text, n = check_query(query, idx.config.max_query_chars), check_k(k, self.k)
        flt = parse_filter(filter)
        qv = _given_vector(query_vector, idx.embedder.dimension)
        if qv is None:
            qv = idx.embedder.embed_query(text)  # the one query embedding this step adds
        return list(follows_writer(_walk)(idx, self, text, qv, seeds, n, flt, include_abstracts))

    def provenance(self, result: Retrieved, own: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the walk says of a hit: ``found_by``, ``score``, ``hop``, ..., and the ``doc_id`` matched.

        For a seed with metadata ``own`` (the first retriever's document): the keys to set on
        it. Its own ``doc_id`` stays; the matched row's other metadata is not copied onto it.
        """
        keys = self.index.provenance_keys | ({DOC_ID_KEY} if DOC_ID_KEY not in (own or {}) else set())
        return {key: value for key, value in result.metadata.items() if key in keys}

    def _rows_of(self, seed: Seed, passing: Any) -> list[int]:
        """The allowed live rows (``passing``) a seed may be: its chunk, its document's, or its text's."""
        table = self.index.chunk_table
        if seed.id is not None and seed.id in table.id_to_row:
            rows = [table.id_to_row[seed.id]]
        elif seed.id is not None and seed.id in table.doc_rows:  # a whole document the index chunked
            rows = list(table.doc_rows[seed.id])
        else:  # the first allowed row with its text (two tenants may hold the same text)
            rows = [r for r in self._rows_by_text(seed.text) if passing[r]][:1]
        return [r for r in rows if passing[r]]

    def _rows_by_text(self, text: str) -> list[int]:
        """The live rows holding ``text`` (spacing folded), in row order.

        Queries run side by side: the map is built into a local dict and published with one
        assignment, so a query sees either the old map or the whole new one.
        """
        table = self.index.chunk_table
        alive = table.alive
        cached = self._by_text
        if cached is None or cached[0] is not alive:
            by_text: dict[str, list[int]] = {}
            for i in np.flatnonzero(alive).tolist():
                by_text.setdefault(_folded(table.texts[i]), []).append(i)
            cached = self._by_text = (alive, by_text)
        return cached[1].get(_folded(text), [])


def _given_vector(vector: Any, dimension: int) -> Any:
    """A caller's query embedding as a unit vector, or None when it is absent or of another model."""
    if vector is None or np.shape(vector) != (dimension,):
        return None
    return normalise_rows(np.asarray(vector, dtype=np.float32)[None, :])[0]


def _walk(
    idx: BridgeRAG,
    walk: EntityHopWalk,
    text: str,
    qv: Any,
    seeds: Sequence[Seed],
    k: int,
    flt: MetadataFilter | None,
    include_abstracts: bool,
) -> list[HopHit]:
    matrix = idx.chunk_table.matrix
    passing = idx.chunk_table.live_mask(flt)
    options = [walk._rows_of(s, passing) for s in seeds]
    if not any(options):  # nothing to walk from: the retriever's own results
        return [HopHit(i, None) for i in range(min(k, len(seeds)))]
    # A seed naming a whole document stands for its chunk nearest the query (the pool's
    # cosines are computed once more in retrieve_by_vector, so only such seeds need them here).
    several = sorted({r for rows in options if len(rows) > 1 for r in rows})
    cosines = row_cosines(qv, matrix, np.asarray(several, dtype=np.int64)).tolist() if several else []
    cos_of = dict(zip(several, cosines, strict=True))
    rows = [max(rs, key=lambda r: (cos_of.get(r, 0.0), -r)) if rs else None for rs in options]
    seed_of = {r: i for i, r in reversed(list(enumerate(rows))) if r is not None}
    results = idx.retrieve_by_vector(text, qv, k, pool_rows=list(seed_of), filter=flt)
    id_to_row = idx.chunk_table.id_to_row
    hits = [_hop_hit(r, seed_of.get(id_to_row[r.id])) for r in results]
    # Seeds the index does not hold keep their rank among the seeds.
    for i, row in enumerate(rows):
        if row is None and i < k:
            hits.insert(min(i, len(hits)), HopHit(i, None))
    hits = hits[:k]
    if include_abstracts:
        held = [h.result for h in hits if h.result is not None]
        allowed = passing if flt is not None else None
        hits.extend(HopHit(None, a) for a in idx.abstract_results(held, qv, allowed))
    return hits


def _hop_hit(result: Retrieved, seed: int | None) -> HopHit:
    """Bridge-RAG's result as the step's: a seed is ``found_by`` the retriever."""
    meta = {**result.metadata, "strategy": "entity-hop"}
    if seed is not None:
        meta["found_by"] = "retriever"
    return HopHit(seed, Retrieved(id=result.id, text=result.text, score=result.score, metadata=meta))
