"""Scale benchmark: Bridge-RAG over a deterministic synthetic corpus of up to 100,000 chunks.

Run with ``bridge-rag bench-scale [--chunks N]``. The corpus is generated, not downloaded:
documents of five one-sentence chunks (25-40 words each), about invented people,
organisations and places. Each document introduces its own person and organisation and
mentions a few earlier entities (popular ones more often), so the entity count grows with
the corpus, as in real collections, and a smaller corpus is exactly a prefix of a larger one.

Two indexes are built with the real embedder (all-MiniLM-L6-v2) and spaCy, in an embedded
Chroma: one over the first N/10 chunks and one over all N. For each the benchmark reports
the build time (and its steps), the resident memory, the bytes per entity (the cuckoo
filter) and per abstract (forest, embedding, text), and the query latency p50/p95 over the
same questions, with and without the query embedding (queries run with one torch thread, as
in the test suite: on a shared two-core machine more threads make them erratic). The
headline figure is the ratio of the p50 latencies at N and at N/10 (Bridge-RAG's lookups are
O(1) in the filter and local in the forest, so it should stay within 2x).
"""

from __future__ import annotations

import gc
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from core.evaluation.metrics import latency_summary, run_strategy
from core.evaluation.peak_memory import measure_peak_rss
from core.evaluation.reliability import one_torch_thread
from core.types import Document

__all__ = [
    "CHUNKS_PER_DOCUMENT",
    "CHUNK_SIZE",
    "ScaleRow",
    "format_report",
    "run_scale_benchmark",
    "synthetic_corpus",
    "synthetic_queries",
    "to_json",
]

CHUNKS_PER_DOCUMENT = 5
CHUNK_SIZE = 320  # characters: one generated sentence (165-300) per chunk, never two


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_SYLLABLES = _words(
    "ar bel cor dan el fen gal hes ir jor kel lor mar nev or pel quin ros sal tor ul "
    "vor wen yar zel bra cle dru fia gro hal ith kra lum mor nix ost pra rhu sti tam ves"
)
_ORG_KINDS = ("Guild", "Society", "Institute", "Company", "Archive", "Observatory", "Conservatory")
_PLACE_ENDS = ("wick", "holt", "moor", "bury", "ford", "haven", "stead", "mere")
_GOODS = _words(
    "salt copper amber wool timber glass silver linen spices paper ink pottery grain cider leather "
    "iron tin dyes maps"
)
_CLAUSES = (
    "and for {n} years it traded {g1} and {g2} with merchants from {place}",
    "while its ledgers were kept by {other} of the {org2}",
    "after a long dispute over the price of {g1} in {place}",
    "with the help of {other}, who had studied in {place}",
    "although the winters in {place} made the roads to {place2} hard to travel",
    "and its members met every spring to weigh {g1} and {g2}",
    "before the flood of {year2} destroyed the old warehouse near {place}",
    "so that the {org2} could buy {g1} at a fair price",
)


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(syllables)).capitalize()


class _Names:
    """Entity names by index, deterministic and independent of the corpus size."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def _rng(self, kind: int, i: int) -> random.Random:
        return random.Random(self.seed * 1_000_003 + kind * 10_000_019 + i)

    def person(self, i: int) -> str:
        rng = self._rng(1, i)
        return f"{_word(rng, 2)} {_word(rng, rng.choice((2, 3)))}"

    def place(self, i: int) -> str:
        rng = self._rng(2, i)
        return _word(rng, rng.choice((1, 2))) + rng.choice(_PLACE_ENDS)

    def org(self, i: int) -> str:
        rng = self._rng(3, i)
        return f"{self.place(i * 7 + 3)} {rng.choice(_ORG_KINDS)}"


def _earlier(rng: random.Random, upto: int) -> int:
    """An earlier entity index, popular (small) ones more often (a power law)."""
    return min(upto, int(upto * rng.random() ** 3))


def _sentence(rng: random.Random, names: _Names, doc: int, first: bool) -> str:
    person, org = names.person(doc), names.org(doc)
    year = 1700 + (doc * 37 + rng.randrange(60)) % 300
    values = {
        "n": rng.randint(2, 60),
        "g1": rng.choice(_GOODS),
        "g2": rng.choice(_GOODS),
        "place": names.place(_earlier(rng, doc)),
        "place2": names.place(_earlier(rng, doc)),
        "other": names.person(_earlier(rng, doc)),
        "org2": names.org(_earlier(rng, doc)),
        "year2": year + rng.randint(1, 80),
    }
    if first:
        head = f"{person} founded the {org} in {names.place(doc)} in {year}"
    else:
        head = rng.choice(
            (
                f"In {year + rng.randint(1, 40)} the {org} opened a hall in {values['place']}",
                f"{person} travelled to {values['place']} to sell {values['g1']} for the {org}",
                f"The {org} founded by {person} lent money to {values['other']}",
                f"{values['other']} wrote that {person} of the {org} never sold {values['g1']}",
            )
        )
    clauses = [c.format(**values) for c in rng.sample(_CLAUSES, k=len(_CLAUSES))]
    text = head
    for clause in clauses:
        candidate = f"{text}, {clause}"
        if len(candidate) > 300 or len(candidate.split()) > 40:
            break
        text = candidate
        if len(text.split()) >= 25 and rng.random() < 0.5:
            break
    # Pad with goods, still one sentence: at least 25 words and more than half a chunk, so two
    # sentences never share a chunk.
    while len(text.split()) < 25 or len(text) < CHUNK_SIZE // 2 + 5:
        text += f", {rng.choice(_GOODS)} and {rng.choice(_GOODS)}"
    return text + "."


def synthetic_corpus(chunks: int, *, seed: int = 0) -> Iterator[Document]:
    """Documents of five one-sentence chunks, ``chunks`` chunks in all (rounded up to whole documents).

    Document ``i`` is the same for every corpus size: a smaller corpus is a prefix of a larger
    one. Each document's title is its person, so titles are entities too.

    Args:
        chunks: Number of chunks (each 25-40 words, at most 300 characters).
        seed: Seed of the names and sentences.

    Yields:
        The documents, with ids ``syn-000000`` and so on.

    Raises:
        ValueError: ``chunks`` is not positive.
    """
    if chunks < 1:
        raise ValueError(f"chunks must be >= 1, got {chunks}")
    names = _Names(seed)
    for doc in range(-(-chunks // CHUNKS_PER_DOCUMENT)):
        rng = random.Random(seed * 7_919 + doc)
        sentences = [_sentence(rng, names, doc, first=j == 0) for j in range(CHUNKS_PER_DOCUMENT)]
        yield Document(" ".join(sentences), id=f"syn-{doc:06d}", metadata={"title": names.person(doc)})


def synthetic_queries(documents: int, count: int, *, seed: int = 0) -> list[str]:
    """Questions about the first ``documents`` documents' entities, plus some that match none.

    Args:
        documents: Only entities of these documents are asked about (so every index that
            holds them can answer).
        count: Number of questions.
        seed: Seed of the choice of entities and templates.

    Returns:
        The questions.
    """
    names = _Names(seed)
    rng = random.Random(seed + 99)
    templates = (
        "Who founded the {org}?",
        "What did {person} trade for the {org}?",
        "When did {person} travel to {place}?",
        "{lower} and the {org}",
        "Tell me about {person}.",
    )
    unmatched = ("what happened to the silver trade", "who kept the ledgers", "the old warehouse flood")
    out = []
    for i in range(count):
        if i % 10 == 9:
            out.append(unmatched[i % len(unmatched)])
            continue
        doc = rng.randrange(max(1, documents))
        person = names.person(doc)
        out.append(
            rng.choice(templates).format(
                org=names.org(doc), person=person, place=names.place(doc), lower=person.lower()
            )
        )
    return out


# --------------------------------------------------------------------------- measurement


@dataclass
class ScaleRow:
    """Figures of one index size.

    Attributes:
        chunks: Chunks indexed.
        documents: Documents indexed.
        entities: Entities in the filter.
        abstracts: Abstract nodes (all levels).
        build_s: Build time (chunking, embedding, storing, entities, abstracts, filter, forest).
        steps_s: Build time per step.
        rss_before_mib: RSS before the build.
        rss_after_mib: RSS after the build (the index and Chroma in memory).
        peak_rss_mib: Peak RSS during the build (sampled every 10 ms,
            :func:`~core.evaluation.peak_memory.measure_peak_rss`).
        filter_bytes_per_entity: Cuckoo filter bytes (table, entry records, id lists) per entity.
        abstract_bytes: Bytes per abstract, by part (forest, embedding, text, Python objects).
        p50_ms: Median query latency, query embedding included.
        p95_ms: 95th percentile, query embedding included.
        p50_ms_without_embedding: Median latency of the retrieval alone.
        p95_ms_without_embedding: 95th percentile of the retrieval alone.
        queries: Questions timed.
        entity_hit_share: Share of questions answered through the filter (not a dense fallback).
    """

    chunks: int
    documents: int
    entities: int
    abstracts: int
    build_s: float
    steps_s: dict[str, float]
    rss_before_mib: float
    rss_after_mib: float
    peak_rss_mib: float
    filter_bytes_per_entity: float
    abstract_bytes: dict[str, float]
    p50_ms: float
    p95_ms: float
    p50_ms_without_embedding: float
    p95_ms_without_embedding: float
    queries: int
    entity_hit_share: float

    @property
    def bytes_per_abstract(self) -> float:
        """All parts of an abstract together."""
        return float(sum(self.abstract_bytes.values()))


def _abstract_bytes(rag: Any) -> dict[str, float]:
    n = max(1, len(rag._abs_level))
    summaries = rag._abs_summary
    entities = rag._abs_entities
    text = sum(len(s.encode()) for s in summaries) + sum(len(e.encode()) for ents in entities for e in ents)
    objects = sum(sys.getsizeof(s) for s in summaries) + sum(
        sys.getsizeof(ents) + sum(sys.getsizeof(e) for e in ents) for ents in entities
    )
    return {
        "forest": rag.forest.memory_bytes() / n,
        "embedding": rag._abs_matrix.nbytes / n,
        "text": text / n,
        "python_objects": max(0, objects - text) / n,
    }


def _measure(
    docs: list[Document], questions: Sequence[str], embedder: Any, workdir: Path, *, label: str
) -> ScaleRow:
    from core.store import ChunkStore
    from core.strategies.bridge import BridgeRAG

    gc.collect()
    store = ChunkStore.persistent(workdir / label, f"scale-{label}")
    with measure_peak_rss() as mem:
        t0 = time.perf_counter()
        rag = BridgeRAG.from_documents(
            docs, embedder=embedder, store=store, chunk_size=CHUNK_SIZE, chunk_overlap=0, show_progress=True
        )
        build_s = time.perf_counter() - t0
        gc.collect()
    with one_torch_thread():
        for q in questions[:10]:  # warm-up: caches, Chroma's index, the embedder
            rag.retrieve(q)
        with tqdm(total=len(questions), desc=f"{label}: queries", unit="query") as bar:
            run = run_strategy(
                label,
                questions,
                lambda q: rag.retrieve(q, k=5),
                lambda q, v: rag.retrieve_by_vector(q, v, 5),
                embedder.embed_query,
                progress=bar.update,
            )
    store.close()
    latency = latency_summary(run)
    hits = sum(bool(res) and res[0].metadata.get("fallback") is None for res in run.results)
    return ScaleRow(
        chunks=rag.num_chunks,
        documents=len(docs),
        entities=rag.num_entities,
        abstracts=rag.num_abstracts,
        build_s=build_s,
        steps_s=dict(rag.report.seconds),
        rss_before_mib=mem.start_mib,
        rss_after_mib=mem.end_mib,
        peak_rss_mib=mem.peak_mib,
        filter_bytes_per_entity=rag.entity_filter.memory_bytes() / max(1, rag.num_entities),
        abstract_bytes=_abstract_bytes(rag),
        p50_ms=latency["p50_ms"],
        p95_ms=latency["p95_ms"],
        p50_ms_without_embedding=latency["p50_no_embed_ms"],
        p95_ms_without_embedding=latency["p95_no_embed_ms"],
        queries=len(questions),
        entity_hit_share=hits / max(1, len(questions)),
    )


def run_scale_benchmark(
    chunks: int = 100_000, *, queries: int = 200, seed: int = 0, embedder: Any = None
) -> dict[str, Any]:
    """Builds Bridge-RAG over ``chunks // 10`` and ``chunks`` synthetic chunks and measures both.

    Args:
        chunks: The large corpus size (the small one is a tenth of it).
        queries: Questions timed on each index (the same for both).
        seed: Seed of the corpus and the questions.
        embedder: Anything :func:`core.embed.as_embedder` accepts; None = all-MiniLM-L6-v2.

    Returns:
        ``{"rows": [small, large] as dicts, "p50_ratio": ..., "p50_ratio_without_embedding": ...,
        "report": markdown}``.

    Raises:
        ValueError: ``chunks`` is below 100 or ``queries`` below 1.
    """
    from core.embed import as_embedder

    if chunks < 100:
        raise ValueError(f"chunks must be >= 100 (the small index holds a tenth), got {chunks}")
    if queries < 1:
        raise ValueError(f"queries must be >= 1, got {queries}")
    emb = as_embedder(embedder)
    small_n = chunks // 10
    corpus = list(tqdm(synthetic_corpus(chunks, seed=seed), desc="generating corpus", unit="doc"))
    small_docs = corpus[: -(-small_n // CHUNKS_PER_DOCUMENT)]
    questions = synthetic_queries(len(small_docs), queries, seed=seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bridge-scale-") as tmp:
        for label, docs in (("small", small_docs), ("large", corpus)):
            rows.append(_measure(docs, questions, emb, Path(tmp), label=label))
            gc.collect()
    small, large = rows
    out: dict[str, Any] = {
        "seed": seed,
        "embedder": emb.name,
        "rows": [{**asdict(r), "bytes_per_abstract": r.bytes_per_abstract} for r in rows],
        "p50_ratio": large.p50_ms / small.p50_ms,
        "p50_ratio_without_embedding": large.p50_ms_without_embedding / small.p50_ms_without_embedding,
    }
    out["report"] = format_report(rows, out)
    return out


def format_report(rows: Sequence[ScaleRow], out: dict[str, Any]) -> str:
    """The figures as markdown tables."""
    header = (
        "chunks",
        "documents",
        "entities",
        "abstracts",
        "build s",
        "RSS before MiB",
        "RSS after MiB",
        "peak RSS MiB",
        "filter B/entity",
        "B/abstract",
        "p50 ms",
        "p95 ms",
        "p50 ms w/o embed",
        "p95 ms w/o embed",
        "entity hits",
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for r in rows:
        cells = (
            f"{r.chunks:,}",
            f"{r.documents:,}",
            f"{r.entities:,}",
            f"{r.abstracts:,}",
            f"{r.build_s:.1f}",
            f"{r.rss_before_mib:.0f}",
            f"{r.rss_after_mib:.0f}",
            f"{r.peak_rss_mib:.0f}",
            f"{r.filter_bytes_per_entity:.1f}",
            f"{r.bytes_per_abstract:.0f}",
            f"{r.p50_ms:.1f}",
            f"{r.p95_ms:.1f}",
            f"{r.p50_ms_without_embedding:.1f}",
            f"{r.p95_ms_without_embedding:.1f}",
            f"{r.entity_hit_share:.0%}",
        )
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| chunks | " + " | ".join(f"{k} s" for k in rows[-1].steps_s) + " |"]
    lines.append("|---:|" + "---:|" * len(rows[-1].steps_s))
    for r in rows:
        lines.append(
            f"| {r.chunks:,} | " + " | ".join(f"{r.steps_s.get(k, 0.0):.1f}" for k in rows[-1].steps_s) + " |"
        )
    lines += ["", "| chunks | " + " | ".join(f"{k} B/abstract" for k in rows[-1].abstract_bytes) + " |"]
    lines.append("|---:|" + "---:|" * len(rows[-1].abstract_bytes))
    for r in rows:
        lines.append(f"| {r.chunks:,} | " + " | ".join(f"{v:.0f}" for v in r.abstract_bytes.values()) + " |")
    lines += [
        "",
        f"p50 latency at {rows[-1].chunks:,} chunks / at {rows[0].chunks:,}: {out['p50_ratio']:.2f}x "
        f"(without the query embedding: {out['p50_ratio_without_embedding']:.2f}x; target <= 2x)",
    ]
    return "\n".join(lines)


def to_json(out: dict[str, Any]) -> str:
    """The figures of :func:`run_scale_benchmark` as JSON (without the text report)."""
    return json.dumps({k: v for k, v in out.items() if k != "report"}, indent=2)
