"""The ``bridge-rag`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _cmd_bench_filter(args: argparse.Namespace) -> int:
    from core.filter_benchmark import format_table, rows_to_json, run_filter_benchmark

    rows = run_filter_benchmark(args.sizes, seed=args.seed)
    print(format_table(rows))
    if args.out:
        Path(args.out).write_text(rows_to_json(rows) + "\n", encoding="utf-8")
        print(f"\nwrote {args.out}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    import json

    if args.suite == "umg":
        from core.umg_benchmark import run_umg_benchmark

        out = run_umg_benchmark(args.dataset, seed=args.seed, sample=args.sample, splade=args.splade)
    else:
        from core.bridge_benchmark import run_bridge_benchmark

        out = run_bridge_benchmark(args.dataset, depths=args.depths, seed=args.seed, sample=args.sample)
    print(
        f"\n{out['dataset']}: {out['questions']} questions, {out['passages']:,} passages indexed "
        "one document "
        f"each in shuffled order (seed {out['seed']}); embedder {out['embedder']}\n"
    )
    print(out["table"])
    b = out["build"]
    built = b.get("bridge_build_s", b.get("umg_build_s", 0.0))
    print(
        f"\nbuild: {args.suite} index {built:.1f} s; "
        f"embedding the corpus once {b['embed_corpus_once_s']:.1f} s; "
        f"ratio {b['build_over_embed']:.2f}x"
    )
    print("build steps (s): " + ", ".join(f"{k} {v:.1f}" for k, v in b["steps_s"].items()))
    print("index: " + ", ".join(f"{k} {v:,}" for k, v in b["counts"].items()))
    if args.out:
        Path(args.out).write_text(json.dumps({k: v for k, v in out.items() if k != "table"}, indent=2) + "\n")
        print(f"\nwrote {args.out}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from core.demo import run_demo

    run_demo(persist_directory=args.persist, k=args.k, depth=args.depth)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command."""
    parser = argparse.ArgumentParser(
        prog="bridge-rag", description="Structured retrievers for LangChain and LlamaIndex over Chroma."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bf = sub.add_parser(
        "bench-filter",
        help="benchmark the entity cuckoo filter against a dict and a Tree-RAG BFS",
        description="Benchmark the entity cuckoo filter against a Python dict and a Tree-RAG BFS lookup.",
    )
    bf.add_argument(
        "--sizes",
        type=_positive_ints,
        default=[10_000, 100_000, 1_000_000],
        help="comma-separated entity counts",
    )
    bf.add_argument("--seed", type=int, default=0, help="seed for the synthetic entities (default 0)")
    bf.add_argument("--out", help="also write the figures as JSON to this file")
    bf.set_defaults(func=_cmd_bench_filter)

    demo = sub.add_parser(
        "demo",
        help="build a Bridge-RAG index over the bundled demo corpus and answer a few questions",
        description="Build a Bridge-RAG index in an embedded Chroma over the bundled demo corpus and show, "
        "for a few questions, the retrieved chunks with their entity -> abstract path and the time "
        "per query.",
    )
    demo.add_argument("--persist", help="keep the index in this directory (default: a temporary one)")
    demo.add_argument("--k", type=int, default=3, help="chunks per question (default 3)")
    demo.add_argument("--depth", type=int, default=2, help="expansion depth (default 2)")
    demo.set_defaults(func=_cmd_demo)

    bench = sub.add_parser(
        "bench",
        help="benchmark a strategy and its baselines on a dataset directory",
        description="Benchmark on DATASET_DIR (corpus.jsonl + questions.jsonl), in one run over one Chroma "
        "collection: --suite bridge measures dense retrieval and Bridge-RAG at several depths; --suite umg "
        "measures BM25, dense, SPLADE (--splade), hybrid RRF, UMG-RAG and UMGP-RAG.",
    )
    bench.add_argument("dataset", help="dataset directory, e.g. ../shared/data/musique")
    bench.add_argument(
        "--depths", type=_positive_ints, default=[1, 2, 3], help="Bridge depths (default 1,2,3)"
    )
    bench.add_argument("--seed", type=int, default=0, help="corpus shuffle seed (default 0)")
    bench.add_argument("--sample", type=int, default=None, help="use a seeded sample of N questions")
    bench.add_argument(
        "--suite",
        choices=["bridge", "umg"],
        default="bridge",
        help="bridge: dense and Bridge-RAG; umg: BM25, dense, SPLADE, RRF, UMG and UMGP (default bridge)",
    )
    bench.add_argument("--splade", action="store_true", help="umg suite: add the SPLADE expert (slow on CPU)")
    bench.add_argument("--out", help="also write the figures as JSON to this file")
    bench.set_defaults(func=_cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bridge-rag`` command."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ValueError, FileNotFoundError, TypeError) as exc:
        print(f"bridge-rag {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
