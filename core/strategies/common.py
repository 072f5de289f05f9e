"""Plumbing every strategy shares.

Settings, where a strategy's Chroma data lives, batched embedding, and reopening a saved index.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from core.embed import Embedder
from core.filters import MetadataFilter
from core.ingest.precomputed import ENTITIES_KEY
from core.persist import IndexFiles, current_meta, index_kind, load_index_generation
from core.store import ChunkStore, StoredChunks
from core.types import BuildReport, Document

__all__ = [
    "CHUNK_KEYS",
    "DOCUMENT_NAME_KEYS",
    "DOC_ID_KEY",
    "EMPTY_COLLECTION",
    "FRAMEWORK_KEYS",
    "HIDDEN_KEYS_KEY",
    "NODE_KEYS",
    "ORDER_KEY",
    "POSITION_KEYS",
    "WINDOW_KEYS",
    "check_embedder",
    "check_new_index_directory",
    "check_query_vector",
    "check_rebuild_store",
    "collection_order",
    "default_store",
    "doc_id_of",
    "document_groups",
    "document_key",
    "documents_from_chunks",
    "embed_in_batches",
    "fit_mask",
    "hidden_keys",
    "index_directory",
    "jsonable",
    "mask_at",
    "normalise_rows",
    "open_index",
    "public_metadata",
    "read_from_store",
    "row_cosines",
    "still_belongs",
    "store_from_meta",
    "timed",
]

C = TypeVar("C")

#: Metadata key of a chunk's document id, and of its position in the document.
DOC_ID_KEY = "doc_id"
ORDER_KEY = "chunk_order"
#: Metadata keys that name a chunk's document, the first present winning (:func:`doc_id_of`).
DOCUMENT_NAME_KEYS = (DOC_ID_KEY, "source", "ref_doc_id", "document_id")
_EMBED_BATCH = 256


def default_store(
    persist_directory: str | os.PathLike[str] | None, collection_name: str, *, index_name: str, label: str
) -> ChunkStore:
    """The store a strategy builds into when the caller gives none.

    Without a directory: an in-memory Chroma collection with a unique name (in-memory clients
    share their data within a process). With one: an embedded Chroma under ``dir/chroma``, the
    index's own (:attr:`core.store.ChunkStore.index_owned`: a delete is compacted out of its files).

    Raises:
        FileExistsError: ``dir/index_name`` already holds an index (open it with ``load``).
    """
    if persist_directory is None:
        return ChunkStore.ephemeral(f"{collection_name}-{uuid.uuid4().hex[:8]}")
    root = Path(persist_directory)
    if (root / index_name).exists():
        raise FileExistsError(
            f"{str(root)!r} already holds a {label} index; open it (LangChain: load, LlamaIndex: "
            "from_persist_dir) and add documents to it, or choose another persist directory"
        )
    root.mkdir(parents=True, exist_ok=True)
    return ChunkStore.persistent(root / "chroma", collection_name, index_owned=True)


def check_new_index_directory(persist_directory: str | os.PathLike[str], label: str) -> None:
    """Refuses a build into a persist directory that is itself a saved index.

    A build keeps its index in ``dir/<name>``, but a load given ``dir`` reads ``dir`` itself
    when it is an index, so a build there would never be read. (A build into a directory
    whose ``dir/<name>`` holds an index is a rebuild of it: a new generation.)

    Raises:
        FileExistsError: ``dir`` is a saved index (of any kind, or one whose kind cannot be
            read).
    """
    root = Path(persist_directory)
    kind = index_kind(root)
    if kind is not None:
        what = f"a saved {kind} index" if kind else "a saved index whose manifest cannot be read"
        raise FileExistsError(
            f"{str(root)!r} is itself {what}; a new {label} index is not built inside another "
            "index's directory: open that one with load, or choose another persist directory"
        )


def check_rebuild_store(
    root: Path, index_dir: Path, store: ChunkStore | None, default_collection: str
) -> None:
    """Refuses a rebuild into ``index_dir`` over another Chroma collection than a load would open.

    A load of the directory opens the collection its manifest records (found as
    :func:`store_from_meta` finds it, e.g. in ``root/chroma`` after the folder moved), and its
    followers keep theirs, so a rebuild over another collection would be served from the
    wrong one. A wrapped collection (a ``ChunkStore(collection)``) is compared by name only.

    Raises:
        ValueError: The index there would be loaded with another collection (or another Chroma).
    """
    meta = current_meta(index_dir)
    if store is None or meta is None or not isinstance(meta.get("store"), dict):
        return
    try:
        opened = store_from_meta(root, index_dir, meta, default_collection)  # lazy: opens nothing
        name, location = opened.name, jsonable(opened.location)
    except (ValueError, FileNotFoundError):  # not findable: compare with what it records
        name, location = meta["store"].get("collection"), meta["store"].get("location") or {}
    here = jsonable(store.location)
    known = {location.get("kind"), here.get("kind")} <= {"persistent", "http", "ephemeral"}
    same_place = not known or (
        location.get("kind") == here.get("kind")
        and location.get("host") == here.get("host")
        and location.get("port") == here.get("port")
        and (
            location.get("path") is None
            or Path(str(location["path"])).resolve() == Path(str(here.get("path"))).resolve()
        )
    )
    if name != store.name or not same_place:
        raise ValueError(
            f"{str(index_dir)!r} indexes the Chroma collection {name!r} ({location.get('kind', '?')}); a "
            f"rebuild there over {store.name!r} ({here.get('kind', '?')}) would be loaded with the old "
            "one: rebuild over that collection, or choose another persist directory"
        )


def index_directory(path: str | os.PathLike[str], index_name: str) -> Path:
    """The index directory a path names: itself, or the index of this kind a persist directory holds.

    ``from_documents(persist_directory=P)`` keeps its index in ``P/<name>``; a load and a save
    given ``P`` both mean that folder when it holds an index of this kind (or a damaged one, so
    that a load says what is wrong with it) and ``P`` does not hold one of this kind.
    """
    root = Path(path)
    inner = root / index_name
    return inner if index_kind(inner) in (index_name, "") and index_kind(root) != index_name else root


def open_index(
    path: str | os.PathLike[str], index_name: str, *, kind: str, version: int, memory_map: bool = True
) -> tuple[Path, Path, str, dict[str, Any], IndexFiles]:
    """Reads a saved index given its directory or the persist directory holding it.

    Returns:
        ``(root, index_dir, generation, meta, files)``: ``generation`` names the one loaded.

    Raises:
        ValueError: ``path`` holds no index, and its ``index_name`` folder holds another kind.
    """
    root = Path(path)
    index_dir = index_directory(root, index_name)
    inner_kind = index_kind(root / index_name) if index_dir == root else None
    if inner_kind and inner_kind != index_name and index_kind(root) is None:
        raise ValueError(
            f"{str(root / index_name)!r} holds a {inner_kind} index, not a {index_name} one; open it "
            f"with the {inner_kind} strategy's load, or give the directory of a {index_name} index"
        )
    generation, meta, files = load_index_generation(
        index_dir, kind=kind, version=version, memory_map=memory_map
    )
    return root, index_dir, generation, meta, files


def store_from_meta(
    root: Path, index_dir: Path, meta: Mapping[str, Any], default_collection: str
) -> ChunkStore:
    """The Chroma collection an index recorded in its manifest, opened on first use.

    A loaded index answers queries from its own files; the collection is opened (and chromadb
    imported) only when the strategy writes to it (:meth:`core.store.ChunkStore.deferred`). An
    embedded Chroma found in the persist directory (``root/chroma``, or beside the index folder)
    is the index's own (:attr:`core.store.ChunkStore.index_owned`); one recorded elsewhere is not.

    Raises:
        FileNotFoundError: The embedded Chroma data is not where it was.
        ValueError: The index was built over a collection the caller passed in.
    """
    store_meta = meta.get("store", {})
    location = store_meta.get("location", {})
    name = str(store_meta.get("collection", default_collection))
    kind = location.get("kind")
    if kind == "http":
        host, port = str(location.get("host")), int(location.get("port", 8000))
        return ChunkStore.deferred(
            lambda: ChunkStore.http(host, port, name, create=False),
            name,
            {"kind": "http", "host": host, "port": port},
        )
    candidates = [root / "chroma", index_dir.parent / "chroma"]
    if kind == "persistent" and location.get("path"):
        candidates.append(Path(str(location["path"])))
    found = next((c for c in candidates if (c / "chroma.sqlite3").is_file()), None)
    if found is None:
        empty = next((c for c in candidates if c.is_dir()), None)
        if empty is not None:  # Chroma would create an empty database there: refuse, touch nothing
            raise FileNotFoundError(
                f"no Chroma data at {str(empty.absolute())!r} (no chroma.sqlite3); pass store=ChunkStore(...)"
            )
    if found is not None:
        path = found
        return ChunkStore.deferred(
            lambda: ChunkStore.persistent(path, name, create=False),
            name,
            {"kind": "persistent", "path": str(path.absolute())},
            index_owned=found in candidates[:2],  # the persist directory's own Chroma, not one elsewhere
        )
    if kind == "persistent":
        raise FileNotFoundError(
            f"no Chroma data for this index under {str(root)!r}; pass store=ChunkStore(...)"
        )
    if kind == "ephemeral":
        raise ValueError(
            "this index was built over an in-memory Chroma collection, which ends with the process "
            "that made it; in that process pass store=... (the collection), else rebuild with "
            "persist_directory=... so the chunks are kept"
        )
    raise ValueError(
        "this index was built over a Chroma collection it was given (not one under its directory); "
        "pass store=... (that collection, or the vector store holding it)"
    )


def check_embedder(embedder: Embedder, meta: Mapping[str, Any]) -> None:
    """Checks a query embedder against the one an index was built with.

    Raises:
        ValueError: The dimensions differ (a different name only warns).
    """
    saved = meta.get("embedder", {})
    dim = int(saved.get("dimension", -1))
    if embedder.dimension != dim:
        raise ValueError(
            f"the index was built with {dim}-dimensional embeddings ({saved.get('name')}), but the "
            f"embedder produces {embedder.dimension}; pass the embedder the index was built with"
        )
    if embedder.name != saved.get("name"):
        warnings.warn(
            f"the index was built with embedder {saved.get('name')!r}, loading with {embedder.name!r}",
            RuntimeWarning,
            stacklevel=3,
        )


def embed_in_batches(
    embedder: Embedder, texts: Sequence[str], *, show_progress: bool, desc: str = "embedding"
) -> npt.NDArray[np.float32]:
    """Embeds texts in batches with a progress bar; an (n, d) float32 matrix in input order.

    The texts are sent longest first, so that each batch holds texts of similar length and
    the model pads little (as one big ``encode`` call would, but with a progress bar).
    """
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    parts = []
    with tqdm(total=len(texts), desc=desc, unit="text", disable=not show_progress, leave=False) as bar:
        for start in range(0, len(texts), _EMBED_BATCH):
            parts.append(embedder.embed_documents([texts[i] for i in order[start : start + _EMBED_BATCH]]))
            bar.update(len(parts[-1]))
    if not parts:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
    out[np.asarray(order, dtype=np.int64)] = np.vstack(parts)
    return out


def read_from_store(store: ChunkStore, ids: Sequence[str], what: str) -> StoredChunks | None:
    """Texts and metadata of ``ids`` from Chroma (None for no ids).

    Raises:
        ValueError: The collection lacks some of them (index and collection out of sync).
    """
    if not ids:
        return None
    try:
        return store.get(list(ids), include_embeddings=False)
    except KeyError as exc:
        raise ValueError(
            f"the Chroma collection {store.name!r} does not hold the indexed {what} ({exc.args[0]}); "
            "pass the collection the index was built over, or rebuild the index"
        ) from exc


def check_query_vector(vector: Any, dimension: int) -> npt.NDArray[np.float32]:
    """A query embedding as a float32 vector, checked against the index's dimension.

    Raises:
        ValueError: The shape is not ``(dimension,)`` or a value is NaN or infinite.
    """
    arr = np.asarray(vector, dtype=np.float32)
    if arr.shape != (dimension,):
        raise ValueError(
            f"the query embedding has shape {arr.shape}, but the index holds {dimension}-dimensional "
            "embeddings; embed queries with the model the index was built with"
        )
    if not np.isfinite(arr).all():
        raise ValueError("the query embedding contains NaN or infinity; check the embedder")
    return arr


#: What a person reads for each timed build step while it runs (see :func:`stage_lines`).
STAGE_LABELS = {
    "chunk": "chunking",
    "embed": "embedding",
    "store": "storing the chunks in Chroma",
    "read collection": "reading the collection",
    "entities": "extracting entities",
    "abstracts": "structures: writing the abstracts",
    "filter": "structures: filling the cuckoo filter",
    "hierarchy": "structures: building the abstract tree",
    "entity links": "structures: linking entities",
    "dense index": "structures: building the vector index",
    "triples": "extracting triples",
    "graph": "structures: building the graph",
    "embed graph": "embedding the graph's nodes",
    "anchor index": "structures: building the anchor index",
}
_STAGES: ContextVar[Callable[[str], None] | None] = ContextVar("bridge_rag_stages", default=None)


@contextmanager
def stage_lines(show: bool) -> Iterator[None]:
    """While the block runs (in this thread), each timed build step announces itself on stderr.

    A build with ``show_progress`` says which stage it is in (chunking, embedding, entities,
    the structures), beside the bars of the stages that count items; without it, nothing.
    """
    if not show:
        yield
        return

    def announce(step: str) -> None:
        tqdm.write(f"bridge-rag: {STAGE_LABELS.get(step, step)} ...", file=sys.stderr)

    token = _STAGES.set(announce)
    try:
        yield
    finally:
        _STAGES.reset(token)


@contextmanager
def timed(report: BuildReport, step: str) -> Iterator[None]:
    """Adds the wall time of the block to ``report.seconds[step]``; announces it (:func:`stage_lines`)."""
    announce = _STAGES.get()
    if announce is not None:
        announce(step)
    t0 = time.perf_counter()
    yield
    report.seconds[step] = report.seconds.get(step, 0.0) + time.perf_counter() - t0


def row_cosines(
    query_vector: npt.NDArray[np.float32], matrix: npt.NDArray[np.float32], rows: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """Cosine of a unit query vector with the unit rows ``rows`` of ``matrix``, in the order given."""
    return (matrix[rows] @ query_vector).astype(np.float64)


def mask_at(mask: npt.NDArray[np.bool_], ids: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """``mask[ids]``, where an id outside the mask (-1, or a row appended meanwhile) is False."""
    at = np.asarray(ids, dtype=np.int64)
    inside = (at >= 0) & (at < mask.shape[0])
    out = np.zeros(at.shape, dtype=bool)
    out[inside] = mask[at[inside]]
    return out


def fit_mask(mask: npt.NDArray[np.bool_], n: int) -> npt.NDArray[np.bool_]:
    """``mask`` cut or padded (with False) to ``n`` entries: rows added since it was taken are out."""
    if mask.shape[0] == n:
        return mask
    if mask.shape[0] > n:
        return mask[:n]
    return np.concatenate([mask, np.zeros(n - mask.shape[0], dtype=bool)])


def normalise_rows(m: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length (zero rows stay zero), as a contiguous float32 matrix.

    Raises:
        ValueError: ``m`` is not two-dimensional or holds NaN or infinite values.
    """
    arr = np.ascontiguousarray(m, dtype=np.float32)
    if arr.ndim != 2:
        raise ValueError("embeddings must be a two-dimensional array")
    if not np.isfinite(arr).all():
        raise ValueError("embeddings contain NaN or infinite values")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (str/int/float/bool/None, lists, str-keyed dicts).

    NumPy scalars and arrays become Python numbers and lists, tuples and sets become lists
    (sets sorted when their items allow it), non-finite floats become None, and anything else
    becomes its ``str``.
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, set | frozenset):
        items = [jsonable(item) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=repr)
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays
    if callable(tolist) and hasattr(value, "dtype"):
        return jsonable(tolist())
    return str(value)


#: Keys LlamaIndex's vector stores add to every node: ``_node_content`` repeats the whole node
#: as JSON (it must not reach prompts, and differs in every chunk), ``_node_type`` names its class.
FRAMEWORK_KEYS = frozenset({"_node_content", "_node_type"})

#: The error of a ``from_store`` over a collection with nothing in it.
EMPTY_COLLECTION = (
    "the Chroma collection is empty; add documents first, or build from documents "
    "(from_documents; LlamaIndex: from_defaults)"
)

#: Metadata keys that say where a chunk lies in its document, not what the document is: they
#: may differ between the chunks of one document (a PDF loader's page, a splitter's offsets).
POSITION_KEYS = frozenset(
    {
        DOC_ID_KEY,
        ORDER_KEY,
        "start_index",
        "end_index",
        "id",
        "page",
        "page_label",
        "page_number",
        "row",
        "seq_num",
    }
)

#: Metadata keys LlamaIndex's node parsers and extractors write about one node, not its
#: document: the sentence window and original sentence (``SentenceWindowNodeParser``,
#: ``SemanticSplitterNodeParser``), the Markdown header path, and the extractors' keywords,
#: questions and section summaries. Like positions, they differ between one document's nodes.
NODE_KEYS = frozenset(
    {
        "window",
        "original_text",
        "header_path",
        "excerpt_keywords",
        "questions_this_excerpt_can_answer",
        "section_summary",
        "prev_section_summary",
        "next_section_summary",
    }
)

#: The keys that may differ between the chunks of one document (:data:`POSITION_KEYS`,
#: :data:`NODE_KEYS` and a chunk's precomputed entities): chunks are grouped into documents by
#: the rest of their metadata.
CHUNK_KEYS = POSITION_KEYS | NODE_KEYS | {ENTITIES_KEY}

#: The metadata a UMG-RAG window carries that its document's chunks do not.
WINDOW_KEYS = ("doc_id", "sent_start", "sent_end", "start_index", "end_index", "granularities")


#: A document's own list of metadata keys to keep out of prompts (a JSON list, as Chroma stores
#: only scalars): a LlamaIndex document's ``excluded_llm_metadata_keys``, kept with its chunks.
HIDDEN_KEYS_KEY = "_hidden_metadata_keys"


def public_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """A stored item's metadata without the node copies LlamaIndex adds (:data:`FRAMEWORK_KEYS`).

    Every other key stays, ``_``-prefixed ones included: filters see them as Chroma does. The
    ``excluded_llm_metadata_keys`` of a node LlamaIndex stored are kept under
    :data:`HIDDEN_KEYS_KEY`.
    """
    meta = metadata or {}
    out = {k: v for k, v in meta.items() if str(k) not in FRAMEWORK_KEYS}
    hidden = _hidden_keys_of_node(meta.get("_node_content"))
    if hidden and HIDDEN_KEYS_KEY not in out:
        out[HIDDEN_KEYS_KEY] = json.dumps(hidden)
    return out


def _hidden_keys_of_node(node_json: Any) -> list[str]:
    """The ``excluded_llm_metadata_keys`` in LlamaIndex's stored node JSON (none if unreadable)."""
    node = _json_value(node_json)
    return sorted(set(_strings(node.get("excluded_llm_metadata_keys")))) if isinstance(node, dict) else []


def hidden_keys(metadata: Mapping[str, Any]) -> list[str]:
    """The keys a document asked to keep out of prompts (:data:`HIDDEN_KEYS_KEY`), if any."""
    return _strings(_json_value(metadata.get(HIDDEN_KEYS_KEY)))


def _json_value(text: Any) -> Any:
    """``text`` parsed as JSON; None when it is not a string or not JSON."""
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _strings(value: Any) -> list[str]:
    """A JSON list's items as strings (none for anything else)."""
    return [str(item) for item in value] if isinstance(value, list) else []


def doc_id_of(item_id: str, metadata: Mapping[str, Any] | None) -> str:
    """The document a stored item belongs to.

    The first of its ``doc_id``, ``source``, ``ref_doc_id`` and ``document_id`` metadata,
    else the item's own id. A node LlamaIndex stored without a source document carries the
    text ``"None"`` under those keys: that names nothing (each such node is its own document).
    """
    meta = metadata or {}
    node = any(key in meta for key in FRAMEWORK_KEYS)
    for key in DOCUMENT_NAME_KEYS:
        value = meta.get(key)
        if isinstance(value, str | int) and not (node and value == "None"):
            return str(value)
    return item_id


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _position_key(metas: Sequence[Mapping[str, Any]]) -> str | None:
    """The metadata key that orders one document's chunks: ``chunk_order``, else ``start_index``.

    A key counts only when every chunk has it as an int and no two chunks share a value: a
    loader that emits one document per page or row under one ``source`` restarts
    ``start_index`` at 0 for each, and those offsets cannot order the whole document.
    """
    return next((key for key in (ORDER_KEY, "start_index") if _distinct_ints(metas, key)), None)


def _distinct_ints(metas: Sequence[Mapping[str, Any]], key: str) -> bool:
    """Whether every chunk has ``key`` as an int and no two share a value."""
    values = [_int(m.get(key)) for m in metas]
    return all(v is not None for v in values) and len(set(values)) == len(values)


def document_key(metadata: Mapping[str, Any] | None) -> str:
    """What the chunks of one document share: their metadata apart from :data:`CHUNK_KEYS`."""
    shared = {
        str(k): v
        for k, v in (metadata or {}).items()
        if str(k) not in CHUNK_KEYS and str(k) not in FRAMEWORK_KEYS
    }
    return json.dumps(shared, sort_keys=True, default=str)


def still_belongs(
    chunk_id: str,
    metadata: Mapping[str, Any],
    doc: str,
    flt: MetadataFilter | None,
    *,
    window: Mapping[str, Any] | None = None,
) -> bool:
    """Whether a chunk read from Chroma now is still one a delete names: a check of the app's writes.

    The app may have rewritten a chunk under the same id since the index took it in (another
    document's, another tenant's). It still belongs when it is still of document ``doc``
    (it carries that name, or ``doc`` is ``name#<hash>`` of its name and metadata: another
    tenant's same-named file is another document) and its metadata pass the delete's filter.

    Args:
        chunk_id: The chunk's id.
        metadata: Its metadata as Chroma holds it now.
        doc: The id of the document the delete takes it for.
        flt: The delete's filter, if any.
        window: For a chunk UMG-RAG cut windows from: one of those windows' metadata (the
            filter passed it); the filter then sees the chunk's document-level keys and the
            keys only windows carry (``doc_id``, sentence and character spans, granularities).
    """
    name = doc_id_of(chunk_id, metadata)
    if doc not in (name, suffixed_name(name, document_key(metadata))):
        return False
    if flt is None:
        return True
    view = public_metadata(metadata)
    if window is not None:
        view = {k: v for k, v in view.items() if k not in CHUNK_KEYS}
        view.update({k: window[k] for k in WINDOW_KEYS if k in window})
    return flt.matches(view)


def suffixed_name(name: str, key: str) -> str:
    """The id of one of several documents that share ``name``: ``name#<8 hex digits of key>``."""
    return f"{name}#{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def _groups(ids: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None]) -> dict[str, list[int]]:
    """Row indices per document, documents in order of first appearance.

    Chunks belong to one document when they have the same document name (:func:`doc_id_of`)
    and the same metadata apart from :data:`CHUNK_KEYS`. A name that several such groups
    share (two tenants' ``report.pdf``) becomes ``name#<8 hex digits of their metadata>`` for
    each of them, so no document ever holds chunks whose metadata disagree.
    """
    by_name: dict[str, dict[str, list[int]]] = {}
    for i, cid in enumerate(ids):
        parts = by_name.setdefault(doc_id_of(cid, metadatas[i]), {})
        parts.setdefault(document_key(metadatas[i]), []).append(i)
    groups: dict[str, list[int]] = {}
    for name, parts in by_name.items():
        if len(parts) == 1:
            groups[name] = next(iter(parts.values()))
            continue
        for key, rows in parts.items():
            groups[suffixed_name(name, key)] = rows
    order = {rows[0]: doc for doc, rows in groups.items()}
    return {order[first]: groups[order[first]] for first in sorted(order)}


def collection_order(ids: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None]) -> list[int]:
    """Stored items grouped by document (:func:`document_groups`), each document in chunk order."""
    return [i for rows in document_groups(ids, metadatas).values() for i in rows]


def document_groups(
    ids: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None]
) -> dict[str, list[int]]:
    """Stored items as documents: the rows of each (first appearance), in chunk order.

    The grouping rule is :func:`_groups`'; the order within a document is its chunks'
    ``chunk_order`` when every chunk has a distinct one, else their ``start_index``
    (LangChain splitters' ``add_start_index``) on the same condition, else the collection's
    own order (see :func:`_position_key`).
    """
    groups = _groups(ids, metadatas)
    for doc, rows in groups.items():
        metas = [metadatas[i] or {} for i in rows]
        key = _position_key(metas)
        if key is not None:
            groups[doc] = [
                i for _, i in sorted(zip((_int(m.get(key)) or 0 for m in metas), rows, strict=True))
            ]
    return groups


def documents_from_chunks(
    ids: Sequence[str],
    texts: Sequence[str | None],
    metadatas: Sequence[Mapping[str, Any] | None],
    groups: Mapping[str, list[int]] | None = None,
) -> list[Document]:
    """Rebuilds whole documents from the chunks of a collection, for strategies that re-split.

    Chunks are grouped by document and put in order (:func:`document_groups`: one name and
    the same metadata apart from position keys). Where ``start_index`` orders a document's chunks, a chunk
    that overlaps the text so far (a splitter's ``chunk_overlap``) contributes only what lies
    beyond it (when the overlap really is the same text), a chunk that starts where the text
    ends is appended as it is, and a gap (whitespace a splitter stripped) becomes one space;
    otherwise chunks are joined by a blank line. A document's metadata is what all its chunks
    agree on (per-chunk keys dropped).

    What is lost: without usable ``start_index`` an overlap between chunks is kept twice,
    and without usable ``chunk_order`` / ``start_index`` the document follows the
    collection's order, which need not be the text's.

    ``groups``, when given, is :func:`document_groups` of the same chunks, already computed.
    """
    docs: list[Document] = []
    for doc_id, rows in (document_groups(ids, metadatas) if groups is None else groups).items():
        metas = [public_metadata(metadatas[i]) for i in rows]
        if _distinct_ints(metas, "start_index"):
            text = _join_by_offsets(
                [texts[i] or "" for i in rows], [_int(m.get("start_index")) for m in metas]
            )
        else:
            text = "\n\n".join(texts[i] or "" for i in rows)
        shared = {
            key: value
            for key, value in metas[0].items()
            if key not in CHUNK_KEYS and all(m.get(key) == value for m in metas[1:])
        }
        if text.strip():
            docs.append(Document(text=text, id=doc_id, metadata=shared))
    return docs


def _join_by_offsets(chunks: Sequence[str], starts: Sequence[int | None]) -> str:
    """Chunks in order, joined by where each starts in the original text."""
    text, end = "", 0
    for chunk, start in zip(chunks, starts, strict=True):
        if start is None or not text:
            text, end = (f"{text}\n\n{chunk}" if text else chunk), (start or 0) + len(chunk)
        elif start > end:
            text, end = f"{text} {chunk}", start + len(chunk)
        elif start == end:
            text, end = text + chunk, start + len(chunk)
        elif text.endswith(chunk[: end - start]):
            if start + len(chunk) > end:
                text, end = text + chunk[end - start :], start + len(chunk)
        else:  # the offsets do not describe this text: keep the chunk whole
            text, end = f"{text}\n\n{chunk}", start + len(chunk)
    return text
