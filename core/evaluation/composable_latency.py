"""What the composable pieces cost over the retrievers they wrap, measured question by question.

Run with ``python -m core.evaluation.composable_latency [--data ../shared/data]``, alone on the
machine. For each dataset, on the benchmark's shared collection, every question is answered
in turn by each of these benchmark rows (:mod:`core.evaluation.registry`), and its query is
embedded once more on its own:

* ``langchain-chroma`` and ``entity-hop``: a ``langchain_chroma`` retriever (2k) alone, and
  the same retriever in a ``ContextualCompressionRetriever`` with ``EntityHopCompressor`` (k);
* ``llamaindex-vector`` and ``llamaindex-entity-hop``: a ``VectorStoreIndex`` retriever (2k)
  alone, and followed by ``EntityHopPostprocessor`` (k), one ``QueryBundle`` passed to both as
  a query engine passes it, so the step reuses the embedding the retriever computed; and
  ``llamaindex-entity-hop, own embedding``: the same with ``reuse_query_embedding=False``;
* ``langchain-ensemble`` and ``uncertainty-fusion``: LangChain's ``EnsembleRetriever`` and
  ``UncertaintyFusionRetriever`` over the same ``BM25Retriever`` and Chroma retriever.

Each pair is timed back to back on the same question, the composed row and its base taking
turns to go first (each question both ways over two rounds), so the two run under the same
machine state: ``bridge-rag bench`` measures one row after the other, so a pair's difference
there also holds the drift between rows, and a fixed order inside a question would charge one
row with what the row before it left behind (the BM25 ensemble's memory churn before the last
row). The figures are medians over every question and round of: each row's latency, a
composed row's time minus its base's on the same question, and that difference minus the
question's own query embedding time for the steps that embed the query (what the step adds
beyond the one query embedding it is allowed).

``--pairs umg:dense,umgp:dense,bubble:dense`` (:data:`STRATEGY_PAIRS`) measures the
strategies against dense retrieval the same way: any rows of the benchmark registry can be
paired as ``composed:base``, each queried as ``bridge-rag bench`` queries it (its options,
UMGP's parent promotion, included), the rows of one build (UMG and UMGP) built once.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.embed import as_embedder
from core.evaluation.corpus import BenchContext
from core.evaluation.embedding_cache import EmbeddingCache
from core.evaluation.metrics import load_dataset
from core.evaluation.peers import LlamaIndexPeer
from core.evaluation.registry import STRATEGIES, StrategySpec

__all__ = ["EMBEDDING_STEPS", "PAIRS", "STRATEGY_PAIRS", "base_key", "main", "measure_dataset", "parse_pairs"]

#: (composed row, its base row): the step is measured as the composed row's time minus the base's.
PAIRS = (
    ("entity-hop", "langchain-chroma"),
    ("llamaindex-entity-hop", "llamaindex-vector"),
    ("llamaindex-entity-hop, own embedding", "llamaindex-vector"),
    ("uncertainty-fusion", "langchain-ensemble"),
)
#: The strategies against dense retrieval (``--pairs umg:dense,umgp:dense,bubble:dense``).
STRATEGY_PAIRS = (("umg", "dense"), ("umgp", "dense"), ("bubble", "dense"))
_OWN_EMBEDDING = "llamaindex-entity-hop, own embedding"
#: Composed rows whose step embeds the query itself (the others add no embedding to subtract).
EMBEDDING_STEPS = frozenset({"entity-hop", "llamaindex-entity-hop, own embedding"})
_DATASETS = ("hotpotqa", "musique", "2wiki")


def _elapsed_ms(call: Callable[..., object], *args: object) -> float:
    start = time.perf_counter()
    call(*args)
    return (time.perf_counter() - start) * 1000.0


def base_key(composed: str, base: str) -> str:
    """The key of a base row's times measured beside ``composed`` (a base serves several pairs)."""
    return f"{base}, beside {composed}"


def parse_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """``composed:base,...`` as pairs of benchmark rows.

    Raises:
        ValueError: A malformed pair, or a row the registry does not know.
    """
    pairs = []
    for item in text.split(","):
        composed, sep, base = item.strip().partition(":")
        if not sep or not composed or not base:
            raise ValueError(f"--pairs takes composed:base pairs separated by commas, got {item.strip()!r}")
        for name in (composed, base):
            if name not in STRATEGIES and name != _OWN_EMBEDDING:
                raise ValueError(f"unknown row {name!r}; choose from {', '.join(STRATEGIES)}")
        pairs.append((composed, base))
    return tuple(pairs)


def _pairs_argument(text: str) -> tuple[tuple[str, str], ...]:
    try:
        return parse_pairs(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def measure_dataset(
    directory: Path, *, k: int = 5, rounds: int = 2, pairs: Sequence[tuple[str, str]] = PAIRS
) -> dict[str, list[float]]:
    """Per-question latencies (ms) of every pair of ``pairs`` and of the query embedding.

    Args:
        directory: The dataset's folder.
        k: Results per question.
        rounds: Passes over the questions (each pass answers every question with every row).
        pairs: ``(composed, base)`` rows of the benchmark registry (default :data:`PAIRS`).

    Returns:
        Latencies by composed row name, by :func:`base_key` for its base (timed right before
        or after it), and ``"query embedding"``; index ``i`` of every list is the same question
        and round.
    """
    data = load_dataset(directory)
    names = list(dict.fromkeys(n for pair in pairs for n in pair))
    with tempfile.TemporaryDirectory(prefix="composable-latency-") as tmp:
        ctx = BenchContext.create(
            data.documents(seed=0), EmbeddingCache(as_embedder(None)), Path(tmp), k=k, show_progress=False
        )
        rows = _rows(ctx, names, k)
        out: dict[str, list[float]] = {"query embedding": []}
        for round_ in range(rounds):
            for i, q in enumerate(data.questions):
                composed_first = (round_ + i) % 2 == 1  # each question both ways over two rounds
                for composed, base in pairs:
                    pair = [(composed, composed), (base_key(composed, base), base)]
                    for key, name in pair if composed_first else reversed(pair):
                        out.setdefault(key, []).append(_elapsed_ms(rows[name], q.question))
                out["query embedding"].append(_elapsed_ms(ctx.embedder.embed_query, q.question))
    return out


def _rows(ctx: BenchContext, names: Sequence[str], k: int) -> dict[str, Callable[[str], object]]:
    """Each named row as a question -> results call, queried as ``bridge-rag bench`` queries it."""
    built: dict[str, Any] = {}
    rows: dict[str, Callable[[str], object]] = {}
    for name in names:
        spec = STRATEGIES["llamaindex-entity-hop" if name == _OWN_EMBEDDING else name]
        if spec.key not in built:
            built[spec.key] = spec.build(ctx)
        index = _without_embedding_reuse(built[spec.key]) if name == _OWN_EMBEDDING else built[spec.key]
        rows[name] = _query(spec, index, ctx, k)
    return rows


def _query(spec: StrategySpec, index: Any, ctx: BenchContext, k: int) -> Callable[[str], object]:
    text, by_vector, options = spec.query.text, spec.query.by_vector, dict(spec.options)
    if text is not None:
        return lambda q: text(index, q, k, **options)
    assert by_vector is not None  # a Query has one of the two
    return lambda q: by_vector(index, q, ctx.embedder.embed_query(q), k, **options)


def _without_embedding_reuse(row: LlamaIndexPeer) -> LlamaIndexPeer:
    """The same retriever and walk, the postprocessor embedding the query itself."""
    from llama_index_bridge.hop import EntityHopPostprocessor

    (step,) = row.postprocessors
    own = EntityHopPostprocessor(step._walk, top_n=step.top_n, reuse_query_embedding=False)
    return LlamaIndexPeer(row.retriever, "llamaindex-entity-hop, own embedding", [own])


def _p50(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: measures, prints one table, returns 0."""
    parser = argparse.ArgumentParser(
        prog="python -m core.evaluation.composable_latency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="the datasets' folder")
    parser.add_argument("--k", type=int, default=5, help="results per question (default 5)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the questions (default 2)")
    parser.add_argument("--datasets", default=",".join(_DATASETS), help="comma-separated dataset folders")
    parser.add_argument(
        "--pairs",
        type=_pairs_argument,
        default=PAIRS,
        help="composed:base rows of the benchmark registry, comma-separated (default: the composable "
        "steps; umg:dense,umgp:dense,bubble:dense for the strategies against dense)",
    )
    args = parser.parse_args(argv)
    print(
        f"p50 ms over every question x {args.rounds} rounds, each pair timed back to back "
        f"(taking turns to go first); k = {args.k}"
    )
    print(
        "| dataset | step | base p50 | composed p50 | added p50 | query embedding p50 | "
        "added - embedding p50 | composed / base p50 |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in args.datasets.split(","):
        times = measure_dataset(args.data / name, k=args.k, rounds=args.rounds, pairs=args.pairs)
        embed = times["query embedding"]
        for composed, base in args.pairs:
            base_times = times[base_key(composed, base)]
            added = [c - b for c, b in zip(times[composed], base_times, strict=True)]
            beyond = [a - e for a, e in zip(added, embed, strict=True)]
            b, c = _p50(base_times), _p50(times[composed])
            beyond_cell = f"{_p50(beyond):+.1f}" if composed in EMBEDDING_STEPS else ""
            print(
                f"| {name} | {composed} over {base} | {b:.1f} | {c:.1f} | {_p50(added):+.1f} | "
                f"{_p50(embed):.1f} | {beyond_cell} | {c / b:.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
