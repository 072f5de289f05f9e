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
