"""A Ray Data pipeline: chunk, embed and extract where the data is, write to Chroma, build the index.

When a corpus outgrows one machine's afternoon, the per-chunk work (chunking, embedding, entity
extraction: nine tenths of a build) runs on a Ray cluster with ``map_batches``; each actor
loads its model once. The rows go to a Chroma server with their vectors and their entities
under :data:`core.ingest.precomputed.ENTITIES_KEY`, and the index is built over that
collection with ``from_store``: nothing is embedded again and no NER runs on the driver.
The result is the index ``from_documents`` builds over the same documents (same chunk ids,
texts, metadata, vectors and entities).

Install with ``pip install 'bridge-rag[distributed]'``; the same code runs on a laptop
(``ray.init(num_cpus=2)``) and on a cluster (``ray.init(address="ray://head:10001")``)::

    import ray
    from core.ingest.ray_data import build_with_ray

    ray.init(address="auto")
    rag = build_with_ray(documents, chroma_host="chroma.internal", chroma_port=8000,
                         collection="reports", strategy="bridge", concurrency=16)

``documents`` is any iterable of :class:`core.types.Document`, or a ``ray.data.Dataset``
with ``id``, ``text`` and (optional) ``metadata`` columns (a JSON object as a string), e.g. one
read by ``ray.data.read_json`` or ``read_parquet`` on the cluster's own storage.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np

from core.types import Document

__all__ = ["build_with_ray", "chunk_dataset"]

_INSTALL = "the Ray pipeline needs Ray Data; install it with: pip install 'bridge-rag[distributed]'"


def _ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise ImportError(_INSTALL) from exc
    return ray


def _chunk(batch: dict[str, Any], chunk_size: int, chunk_overlap: int) -> dict[str, Any]:
    """Documents to chunk rows, cut as the strategy's own build cuts them (a stateless task)."""
    from core.strategies.table import chunk_new_documents

    metas = batch.get("metadata")
    docs = [
        Document(
            text=str(t), id=str(i), metadata=json.loads(metas[n]) if metas is not None and metas[n] else {}
        )
        for n, (i, t) in enumerate(zip(batch["id"], batch["text"], strict=True))
    ]
    _, rows = chunk_new_documents(docs, set(), chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return {
        "id": rows.ids,
        "text": rows.texts,
        "metadata": [json.dumps(m, ensure_ascii=False, sort_keys=True) for m in rows.metadatas],
    }


class _Embed:
    """Embeds chunk texts; one model per actor."""

    def __init__(self, model: str | None) -> None:
        from core.embed import as_embedder

        self.embedder = as_embedder(model)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        from core.strategies.common import embed_in_batches

        texts = [str(t) for t in batch["text"]]
        return {**batch, "embedding": embed_in_batches(self.embedder, texts, show_progress=False)}


class _Entities:
    """Each chunk's entities into its metadata (:mod:`core.ingest.precomputed`); one extractor per actor."""

    def __init__(self) -> None:
        from core.entities import default_entity_extractor

        self.extractor = default_entity_extractor()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        from core.ingest.precomputed import ENTITIES_KEY, entity_metadata

        texts = [str(t) for t in batch["text"]]
        metas = []
        for raw, value in zip(batch["metadata"], entity_metadata(self.extractor, texts), strict=True):
            meta = json.loads(raw)
            meta[ENTITIES_KEY] = value
            metas.append(json.dumps(meta, ensure_ascii=False, sort_keys=True))
        return {**batch, "metadata": metas}


class _Write:
    """Adds the rows to a Chroma server's collection; one client per actor."""

    def __init__(self, host: str, port: int, collection: str) -> None:
        from core.store import ChunkStore

        self.store = ChunkStore.http(host, port, collection)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        ids = [str(i) for i in batch["id"]]
        self.store.add(
            ids,
            [str(t) for t in batch["text"]],
            np.asarray(np.stack(list(batch["embedding"])), dtype=np.float32),
            [json.loads(m) for m in batch["metadata"]],
        )
        return {"written": np.asarray([len(ids)], dtype=np.int64)}


def chunk_dataset(
    documents: Iterable[Document] | Any,
    *,
    chunk_size: int,
    chunk_overlap: int = 0,
    model: str | None = None,
    extract_entities: bool = True,
    concurrency: int = 2,
    batch_size: int = 256,
) -> Any:
    """The lazy ``ray.data.Dataset`` of chunk rows with vectors and (optionally) entities.

    Args:
        documents: Documents, or a Dataset with ``id``, ``text`` and optional ``metadata``
            (JSON object string) columns.
        chunk_size: Characters per chunk, as the strategy's ``chunk_size``.
        chunk_overlap: Characters shared by consecutive chunks.
        model: The sentence-transformers model (a name or path) each actor loads; None:
            all-MiniLM-L6-v2, as the strategies' default.
        extract_entities: Also write each chunk's entities into its metadata.
        concurrency: Actors per model stage (embedding, entities).
        batch_size: Rows per batch.

    Returns:
        A Dataset with ``id``, ``text``, ``metadata`` (JSON) and ``embedding`` columns.

    Raises:
        ImportError: Ray Data is not installed (names the extra).
        ValueError: ``concurrency`` or ``batch_size`` below 1.
    """
    ray = _ray()
    for name, value in (("concurrency", concurrency), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if isinstance(documents, ray.data.Dataset):
        ds = documents
    else:
        items = [
            {"id": d.id, "text": d.text, "metadata": json.dumps(dict(d.metadata), ensure_ascii=False)}
            for d in documents
        ]
        if not items:
            raise ValueError("cannot build an index from an empty corpus; pass at least one document")
        # enough blocks for every actor of the model stages to take some
        ds = ray.data.from_items(items, override_num_blocks=min(len(items), 4 * concurrency))
    ds = ds.map_batches(
        _chunk,
        fn_kwargs={"chunk_size": chunk_size, "chunk_overlap": chunk_overlap},
        batch_size=batch_size,
        batch_format="numpy",
    )
    ds = ds.map_batches(
        _Embed,
        fn_constructor_kwargs={"model": model},
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(min_size=1, max_size=concurrency),
    )
    if extract_entities:
        ds = ds.map_batches(
            _Entities,
            batch_size=batch_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(min_size=1, max_size=concurrency),
        )
    return ds


def build_with_ray(
    documents: Iterable[Document] | Any,
    *,
    chroma_host: str,
    chroma_port: int,
    collection: str,
    strategy: str = "bridge",
    model: str | None = None,
    concurrency: int = 2,
    batch_size: int = 256,
    show_progress: bool = False,
    **options: Any,
) -> Any:
    """Chunks, embeds and extracts on Ray, writes to a Chroma server, and builds the index there.

    Args:
        documents: As :func:`chunk_dataset`.
        chroma_host: The Chroma server every worker and the driver reach.
        chroma_port: Its port.
        collection: A new (or empty) collection on it.
        strategy: ``bridge``, ``umg`` or ``bubble``. Bridge-RAG takes the precomputed
            entities; the others build from the stored vectors (``from_store``).
        model: The embedding model each actor loads and queries use (None: all-MiniLM-L6-v2).
        concurrency: Actors per model stage.
        batch_size: Rows per batch.
        show_progress: Progress bars of the final build on the driver.
        **options: The strategy's settings and models (``chunk_size``, ``k``, ...).

    Returns:
        The built strategy, over the server's collection.

    Raises:
        ImportError: Ray Data is not installed.
        ValueError: The collection already holds rows, or an unknown strategy.
    """
    from core.embed import as_embedder
    from core.store import ChunkStore
    from core.strategies.registry import get_strategy

    cls: Any = get_strategy(strategy)
    _ray().data.DataContext.get_current().enable_progress_bars = show_progress
    store = ChunkStore.http(chroma_host, chroma_port, collection)
    if store.count():
        raise ValueError(
            f"the collection {collection!r} already holds {store.count():,} rows; the pipeline writes "
            "into a new one: name another, or build over it with from_store"
        )
    settings = {k: v for k, v in options.items() if k not in cls.model_options}
    config = cls.config_type.merged(None, settings, cls.label)
    embedder = as_embedder(model)
    chunk_size = config.chunk_size if getattr(config, "chunk_size", None) else _window(embedder)
    ds = chunk_dataset(
        documents,
        chunk_size=chunk_size,
        chunk_overlap=getattr(config, "chunk_overlap", 0),
        model=model,
        extract_entities=strategy == "bridge",
        concurrency=concurrency,
        batch_size=batch_size,
    )
    ray = _ray()
    written = ds.map_batches(
        _Write,
        fn_constructor_kwargs={"host": chroma_host, "port": chroma_port, "collection": collection},
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(min_size=1, max_size=concurrency),
    )
    total = int(sum(int(row["written"]) for row in written.iter_rows()))
    if total == 0:
        raise ValueError("the documents gave no chunks; pass documents with text")
    return cls.from_store(store, embedder=embedder, show_progress=show_progress, **options)


def _window(embedder: Any) -> int:
    from core.embed import window_chars

    return window_chars(embedder)
