"""The ``bridge-rag`` command line."""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.evaluation.suite import Suite

__all__ = ["main"]


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _megabytes(text: str) -> float:
    """A ``--max-file-mb`` value: a positive, finite number of megabytes."""
    problem = argparse.ArgumentTypeError(
        f"expected a positive number of megabytes (e.g. 100 or 0.5), got {text!r}"
    )
    try:
        value = float(text)
    except ValueError:
        raise problem from None
    if not (math.isfinite(value) and value > 0):
        raise problem
    return value


def _write_out(path: str | None, text: str) -> None:
    """Writes ``--out`` (when given) and says so."""
    if path:
        Path(path).write_text(text + "\n", encoding="utf-8")
        print(f"\nwrote {path}")


def _report(out: str | None, report: str, json_text: str, heading: str = "") -> int:
    """Prints a benchmark's heading and report, writes its JSON to ``--out``; the exit code."""
    if heading:
        print(f"\n{heading}\n")
    print(report)
    _write_out(out, json_text)
    return 0


def _cmd_bench_filter(args: argparse.Namespace) -> int:
    from core.evaluation.filter_benchmark import format_table, rows_to_json, run_filter_benchmark

    rows = run_filter_benchmark(args.sizes, seed=args.seed)
    return _report(args.out, format_table(rows), rows_to_json(rows))


def _cmd_bench_filtered(args: argparse.Namespace) -> int:
    from core.evaluation.filtered_bench import filtered_json, format_filtered, run_filtered_benchmark

    rows = run_filtered_benchmark(args.datasets, strategies=args.strategies, k=args.k, seed=args.seed)
    return _report(args.out, format_filtered(rows), filtered_json(rows))


def _strategy_names(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated strategy names, got {text!r}")
    return names


def _cmd_bench(args: argparse.Namespace) -> int:
    if args.suite == "all":
        return _cmd_bench_all(args)
    wrong = [f"--{o}" for o in ("strategies", "k", "plot") if getattr(args, o) is not None] + (
        ["--no-ragas"] if args.no_ragas else []
    )
    if wrong:
        raise ValueError(
            f"{', '.join(wrong)}: only for the all-strategies comparison (--suite all); "
            f"drop {'it' if len(wrong) == 1 else 'them'} or --suite {args.suite}"
        )
    return _cmd_bench_suite(args)


def _cmd_bench_all(args: argparse.Namespace) -> int:
    import json

    from core.evaluation.comparison import run_comparison

    if args.splade or args.depths is not None:
        raise ValueError("--depths and --splade apply to --suite bridge / --suite umg only")
    t0 = time.perf_counter()
    result = run_comparison(
        _bench_dataset(args),
        shape=_bench_shape(args),
        strategies=args.strategies,
        k=5 if args.k is None else args.k,
        sample=args.sample,
        seed=args.seed,
        ragas=not args.no_ragas,
    )
    print()
    print(result.report())
    _write_out(args.out, json.dumps(result.to_json(), indent=2))
    if args.plot:
        result.plot(args.plot)
        print(f"wrote {args.plot}")
    print(f"\ntotal run time {time.perf_counter() - t0:.1f} s")
    return 1 if result.failed else 0


def _bench_dataset(args: argparse.Namespace) -> Any:
    from core.evaluation.metrics import load_dataset

    return load_dataset(args.dataset, args.questions)


def _bench_shape(args: argparse.Namespace) -> Any:
    from core.evaluation.shapes import CorpusShape

    return CorpusShape(titles=args.titles, documents=args.documents, sections=args.sections)


def _suite(args: argparse.Namespace) -> Suite:
    """The per-strategy suite ``--suite`` names, configured by its flags."""
    if args.suite == "umg":
        from core.evaluation.umg_suite import umg_suite

        return umg_suite(splade=args.splade)
    if args.suite == "bubble":
        from core.evaluation.bubble_suite import bubble_suite

        return bubble_suite(grow_with=args.grow)
    from core.evaluation.bridge_suite import bridge_suite

    return bridge_suite([1, 2, 3] if args.depths is None else args.depths)


def _cmd_bench_suite(args: argparse.Namespace) -> int:
    import json

    if args.grow is not None and args.suite != "bubble":
        raise ValueError("--grow applies to --suite bubble only")
    from core.evaluation.runner import run_suite, suite_output

    suite = _suite(args)
    shape = _bench_shape(args)
    result = run_suite(_bench_dataset(args), suite, seed=args.seed, sample=args.sample, shape=shape)
    out = suite_output(result, suite)
    print(
        f"\n{out['dataset']}: {out['questions']} questions, {out['passages']:,} passages, "
        f"{shape.label()}, indexed in shuffled order (seed {out['seed']}); embedder {out['embedder']}\n"
    )
    print(out["table"])
    b = out["build"]
    print(
        f"\nbuild: {args.suite} index {b[f'{args.suite}_build_s']:.1f} s; "
        f"embedding the corpus once {b['embed_corpus_once_s']:.1f} s; "
        f"ratio {b['build_over_embed']:.2f}x"
    )
    print("build steps (s): " + ", ".join(f"{k} {v:.1f}" for k, v in b["steps_s"].items()))
    if b.get("counts"):
        print("index: " + ", ".join(f"{k} {v:,}" for k, v in b["counts"].items()))
    if "graph" in out:
        g = out["graph"]
        kinds = ", ".join(f"{k} {v:,}" for k, v in g["edges_by_kind"].items())
        print(f"graph: {g['nodes']:,} nodes, {g['edges']:,} edges ({kinds}), {g['memory_mb']:.1f} MB")
    if "localisation" in out:
        loc = out["localisation"]
        print(
            f"localisation: graph grown {loc['growth']:.1f}x ({loc['small_nodes']:,} -> "
            f"{loc['grown_nodes']:,} nodes, +{loc['added_passages']:,} passages); bubble p50 "
            f"{loc['small_p50_ms']:.1f} -> {loc['grown_p50_ms']:.1f} ms ({loc['p50_ratio']:.2f}x); "
            f"grown build {loc['grown_build_s']:.0f} s"
        )
    _write_out(args.out, json.dumps({k: v for k, v in out.items() if k != "table"}, indent=2))
    return 0


def _cmd_bench_table(args: argparse.Namespace) -> int:
    from core.evaluation.robustness import kept_gains, load_runs, robustness_table

    runs = load_runs(args.files)
    print(robustness_table(runs, k=args.k))
    kept = kept_gains(runs, k=args.k)
    if kept:
        print(f"\nR@{args.k} gain over dense kept from the titles-in-metadata shape:\n{kept}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from core.app.demo import run_demo

    run_demo(persist_directory=args.persist, k=args.k, depth=args.depth)
    return 0


def _positive_int(text: str) -> int:
    values = _positive_ints(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"expected one positive integer, got {text!r}")
    return values[0]


def _cmd_bench_scale(args: argparse.Namespace) -> int:
    from core.evaluation.scale import run_scale_benchmark, to_json

    if args.precomputed or args.compare_workers:
        return _bench_build_scale(args)
    out = run_scale_benchmark(args.chunks, queries=args.queries, seed=args.seed)
    heading = f"Bridge-RAG over synthetic corpora (seed {out['seed']}, embedder {out['embedder']})"
    return _report(args.out, out["report"], to_json(out), heading)


def _bench_build_scale(args: argparse.Namespace) -> int:
    from core.evaluation.build_scale import run_precomputed_benchmark, run_workers_comparison

    if args.precomputed and args.compare_workers:
        raise SystemExit("bridge-rag bench-scale: choose --precomputed or --compare-workers, not both")
    if args.precomputed:
        out = run_precomputed_benchmark(args.chunks, queries=args.queries, seed=args.seed)
        heading = f"Bridge-RAG from precomputed rows (seed {out['seed']})"
    else:
        out = run_workers_comparison(args.chunks, args.compare_workers, seed=args.seed)
        heading = f"Bridge-RAG build by workers (seed {out['seed']}, embedder {out['embedder']})"
    body = {k: v for k, v in out.items() if k != "report"}
    return _report(args.out, out["report"], json.dumps(body, indent=2), heading)


def _worker_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected worker counts such as 1,2; got {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"worker counts must be positive integers, got {text!r}")
    return counts


def _cmd_bench_workers(args: argparse.Namespace) -> int:
    from core.evaluation.workers import run_workers_benchmark, workers_json

    out = run_workers_benchmark(
        args.chunks, workers=args.workers, queries=args.queries, index=args.index, seed=args.seed
    )
    heading = f"Bridge-RAG query workers over one index (seed {out['seed']}, embedder {out['embedder']})"
    return _report(args.out, out["report"], workers_json(out), heading)


def _cmd_bench_reliability(args: argparse.Namespace) -> int:
    from core.evaluation.reliability import run_reliability_benchmark, to_json

    out = run_reliability_benchmark(
        queries=args.queries,
        entities=args.entities,
        strategies=args.strategies,
        embed_queries=args.embed_queries,
    )
    return _report(args.out, out["report"], to_json(out))


def _cmd_index(args: argparse.Namespace) -> int:
    from core.app.indexing import IndexOptions, run_index

    run_index(
        IndexOptions(
            paths=args.paths,
            index_dir=args.index,
            strategy=args.strategy,
            update=args.update,
            strict=args.strict,
            chroma_host=args.chroma_host,
            chroma_port=args.chroma_port,
            collection=args.collection,
            globs=args.glob,
            progress=False if args.no_progress else None,
            follow_symlinks=args.follow_symlinks,
            max_file_mb=args.max_file_mb,
            workers=args.workers,
        )
    )
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    from core.app.querying import run_query

    if args.question is None and sys.stdin.isatty():
        print(
            "bridge-rag query: reading questions from standard input, one a line (Ctrl-D ends)",
            file=sys.stderr,
        )
    run_query(args.index, args.question, k=args.k, filter_json=args.filter, as_json=args.json)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from core.app.serve import run_server

    run_server(
        args.index, args.host, args.port, max_k=args.max_k, threads=args.threads, access_log=args.access_log
    )
    return 0


def _add_index_and_query(sub: Any) -> None:
    from core.app.files import DEFAULT_MAX_FILE_MB

    index = sub.add_parser(
        "index",
        help="index your own files (.txt, .md, .jsonl, .pdf) into a directory, or update that index",
        description="Read files and folders (recursively: .txt, .md, .jsonl with one JSON document per line, "
        ".pdf with the [pdf] extra) and index them with a strategy into an embedded Chroma under --index DIR "
        "(or a Chroma server). With --update, an existing index is brought up to date: new files added, "
        "changed ones re-indexed, vanished ones deleted, by content hash, without a rebuild. Only regular "
        "files are read: FIFOs, sockets, devices and files above --max-file-mb are skipped with a warning, "
        "and so are symlinks inside folders (those leading outside are read with --follow-symlinks); a file "
        "or folder named directly is read even when it is a symlink.",
    )
    index.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files and folders (with --update: default the recorded ones)",
    )
    index.add_argument("--index", required=True, metavar="DIR", help="the index directory")
    index.add_argument(
        "--strategy",
        help="bridge, umg or bubble (a new index: default bridge; with --update: the recorded one)",
    )
    index.add_argument(
        "--update", action="store_true", help="update the index in DIR instead of building one"
    )
    index.add_argument(
        "--strict", action="store_true", help="stop (writing nothing) when a file cannot be read"
    )
    index.add_argument("--chroma-host", help="keep the chunks on this Chroma server (with --chroma-port)")
    index.add_argument("--chroma-port", type=_positive_int, help="the Chroma server's port")
    index.add_argument(
        "--collection", help="Chroma collection name (default: the strategy's, e.g. bridge_rag)"
    )
    index.add_argument(
        "--glob",
        action="append",
        metavar="PATTERN",
        help="only read files inside folders whose relative path or name matches (repeatable), e.g. '*.md'; "
        "--update keeps the index's patterns unless given ('*' reads every file)",
    )
    index.add_argument(
        "--follow-symlinks",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also read the files and folders that symlinks inside the folders lead to outside them "
        "(by default skipped with a warning; links to places inside a folder are never followed); "
        "--update keeps the index's choice unless given",
    )
    index.add_argument(
        "--max-file-mb",
        type=_megabytes,
        default=None,
        metavar="MB",
        help=f"skip files larger than this many MB (of 2^20 bytes), with a warning "
        f"(default {DEFAULT_MAX_FILE_MB:g}; --update keeps the index's limit unless given)",
    )
    index.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        metavar="N",
        help="cores the build uses: embedding threads, entity and triple extraction processes "
        "(default: every core); the index is the same whatever N",
    )
    index.add_argument("--no-progress", action="store_true", help="no progress bars")
    index.set_defaults(func=_cmd_index)

    query = sub.add_parser(
        "query",
        help="ask an index built by `bridge-rag index`",
        description="Retrieve the best chunks for a question from an index directory, with how each was "
        "found (the strategy's provenance). Without a QUESTION, questions are read from standard input, one "
        "a line, and each answer is printed as it comes (--json: one JSON object a line): the index and the "
        "models are loaded once for all of them. A cold start takes about a second: the index keeps an ONNX "
        "copy of its embedding model, so no torch is imported; `bridge-rag serve` keeps the index loaded "
        "for other programs.",
    )
    query.add_argument("index", metavar="DIR", help="the index directory")
    query.add_argument(
        "question",
        nargs="?",
        help="the question or search text (none: one question a line on standard input)",
    )
    query.add_argument("-k", type=_positive_int, default=5, help="results (default 5)")
    query.add_argument("--filter", help='a Chroma where-filter as JSON, e.g. \'{"source": "notes/a.md"}\'')
    query.add_argument("--json", action="store_true", help="print one JSON document instead")
    query.set_defaults(func=_cmd_query)

    serve = sub.add_parser(
        "serve",
        help="serve an index built by `bridge-rag index` over HTTP (POST /retrieve, GET /health)",
        description="Keep an index directory loaded and answer POST /retrieve with JSON "
        '{"query": "...", "k": 5, "filter": {...}} (the answer of `query --json`) and GET /health. '
        "The server follows the index: what `bridge-rag index --update` saves is served without a "
        "restart. It listens on the loopback address unless --host says otherwise; it has no "
        "authentication. Needs the [serve] extra.",
    )
    serve.add_argument("index", metavar="DIR", help="the index directory")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0: any free one)")
    serve.add_argument(
        "--max-k", type=_positive_int, default=100, help="most results one request may ask for (default 100)"
    )
    serve.add_argument(
        "--threads",
        type=_positive_int,
        default=1,
        help="threads that run queries (default 1: one query at a time, the fastest on a few cores)",
    )
    serve.add_argument(
        "--access-log",
        action="store_true",
        help="log every request (uvicorn's access log, on standard output)",
    )
    serve.set_defaults(func=_cmd_serve)


def _out_and_run(parser: argparse.ArgumentParser, func: Callable[[argparse.Namespace], int]) -> None:
    """The benchmark's last option, ``--out``, and the function that runs it."""
    parser.add_argument("--out", help="also write the figures as JSON to this file")
    parser.set_defaults(func=func)


def _add_scale_and_reliability(sub: Any) -> None:
    scale = sub.add_parser(
        "bench-scale",
        help="Bridge-RAG build time, memory and query latency over a synthetic corpus of N chunks",
        description="Build Bridge-RAG (real embedder, spaCy, embedded Chroma) over a deterministic synthetic "
        "corpus of N/10 and N chunks and report build time, peak memory, bytes per entity and per abstract, "
        "and p50/p95 query latency at both sizes with their ratio.",
    )
    scale.add_argument("--chunks", type=_positive_int, default=100_000, help="corpus size (default 100,000)")
    scale.add_argument("--queries", type=_positive_int, default=200, help="questions timed (default 200)")
    scale.add_argument("--seed", type=int, default=0, help="seed of the corpus and questions (default 0)")
    scale.add_argument(
        "--precomputed",
        action="store_true",
        help="build from rows that already carry vectors and entities (no model in the build), at N/10 and N",
    )
    scale.add_argument(
        "--compare-workers",
        type=_worker_counts,
        metavar="1,2",
        help="build the N-chunk corpus once per worker count and compare stages and index files",
    )
    _out_and_run(scale, _cmd_bench_scale)
    workers = sub.add_parser(
        "bench-workers",
        help="memory, load time and latency of N query workers sharing one memory-mapped index",
        description="Build (or reuse, with --index) Bridge-RAG over the synthetic corpus of N chunks, then "
        "start 1 and W query workers that load it without a model, once reading every array into memory "
        "(copy) and once memory-mapping them (mmap, the default), and report each worker's unique (USS), "
        "proportional (PSS) and resident memory, load time and query latency.",
    )
    workers.add_argument(
        "--chunks", type=_positive_int, default=100_000, help="corpus size (default 100,000)"
    )
    workers.add_argument("--workers", type=_positive_int, default=4, help="workers side by side (default 4)")
    workers.add_argument(
        "--queries", type=_positive_int, default=200, help="questions per worker (default 200)"
    )
    workers.add_argument(
        "--index", help="keep the index here and reuse it on the next run (default: temporary)"
    )
    workers.add_argument("--seed", type=int, default=0, help="seed of the corpus and questions (default 0)")
    _out_and_run(workers, _cmd_bench_workers)
    rel = sub.add_parser(
        "bench-reliability",
        help="GIL scaling of the C++ batch lookups and RSS over 10,000 queries per strategy",
        description="Measure batch entity lookups on one thread against two (the C++ loop releases the "
        "GIL) and each strategy's resident memory after 1,000 and after N queries (a leak check).",
    )
    rel.add_argument(
        "--queries", type=_positive_int, default=10_000, help="queries per strategy (default 10,000)"
    )
    rel.add_argument(
        "--entities",
        type=_positive_int,
        default=200_000,
        help="entities in the lookup benchmark (default 200,000)",
    )
    rel.add_argument(
        "--strategies",
        type=_strategy_names,
        default=["bridge", "umg", "bubble"],
        help="strategies (default bridge,umg,bubble)",
    )
    rel.add_argument(
        "--embed-queries",
        action="store_true",
        help="run the embedding model for every query too (slow); by default each distinct query is "
        "embedded once",
    )
    _out_and_run(rel, _cmd_bench_reliability)


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
    _out_and_run(bf, _cmd_bench_filter)

    bfd = sub.add_parser(
        "bench-filtered",
        help="latency and recall of tenant-filtered queries (10 %% and 1 %%) beside Chroma's filtered search",
        description=(
            "Filtered-retrieval benchmark: every question asked unfiltered and inside a tenant holding "
            "about 10 % and 1 % of the corpus; p50 latency ratios and recall within the filter, beside "
            "dense retrieval through Chroma's own filtered search."
        ),
    )
    bfd.add_argument("datasets", nargs="+", help="dataset directories (corpus.jsonl + questions.jsonl)")
    bfd.add_argument(
        "--strategies",
        type=_strategy_names,
        default=["dense", "bridge", "umgp", "bubble"],
        help="comma-separated strategies (default dense,bridge,umgp,bubble)",
    )
    bfd.add_argument("-k", type=int, default=5, help="results per query (default 5)")
    bfd.add_argument("--seed", type=int, default=0, help="corpus shuffle seed (default 0)")
    _out_and_run(bfd, _cmd_bench_filtered)

    table = sub.add_parser(
        "bench-table",
        help="the robustness table: every strategy over every corpus shape, from bench --out JSON files",
        description="Read the JSON files written by 'bridge-rag bench ... --out FILE' (one per dataset and "
        "corpus shape: --titles, --documents, --questions) and print R@k of every strategy beside dense "
        "retrieval (its gain in points), and how much of its titles-in-metadata gain each strategy keeps "
        "on the other shapes.",
    )
    table.add_argument("files", nargs="+", help="bench JSON files")
    table.add_argument("--k", type=_positive_int, default=5, help="the recall column to read (default 5)")
    table.set_defaults(func=_cmd_bench_table)

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
        help="compare every strategy and its LangChain / LlamaIndex peers on a dataset directory",
        description="Benchmark on DATASET_DIR (corpus.jsonl + questions.jsonl), in one run over one Chroma "
        "collection. By default (--suite all) every strategy named in --strategies and the LangChain and "
        "LlamaIndex peers are built from the same corpus, embedder and Chroma data and compared: passage "
        "recall@k, answer recall@k, context words, p50/p95 latency, build time, peak memory and RAGAS's "
        "non-LLM metrics, as a markdown table (stdout), JSON (--out) and a PNG (--plot). --suite bridge "
        "measures dense retrieval and Bridge-RAG at several depths; --suite umg measures BM25, dense, "
        "SPLADE (--splade), hybrid RRF, UMG-RAG and UMGP-RAG; --suite bubble measures BubbleRAG beside dense "
        "and Bridge-RAG (--grow adds the localisation check).",
    )
    bench.add_argument("dataset", help="dataset directory, e.g. ../shared/data/musique")
    bench.add_argument(
        "--strategies",
        type=_strategy_names,
        default=None,
        help="comma-separated strategies to compare (default: all registered): dense, bm25, hybrid, "
        "two-hop, bridge, umg, umgp, bubble, langchain-ensemble, uncertainty-fusion, langchain-chroma, "
        "entity-hop, llamaindex-vector, llamaindex-entity-hop, llamaindex-fusion",
    )
    bench.add_argument("--k", type=int, default=None, help="results per question; metrics at k (default 5)")
    bench.add_argument("--plot", help="also draw recall@k against p50 latency into this PNG")
    bench.add_argument("--no-ragas", action="store_true", help="skip the RAGAS metrics")
    bench.add_argument(
        "--depths", type=_positive_ints, default=None, help="--suite bridge: Bridge depths (default 1,2,3)"
    )
    bench.add_argument("--seed", type=int, default=0, help="corpus shuffle seed (default 0)")
    bench.add_argument("--sample", type=int, default=None, help="use a seeded sample of N questions")
    bench.add_argument(
        "--suite",
        choices=["all", "bridge", "umg", "bubble"],
        default="all",
        help="all: every strategy and the peers (default); bridge: dense and Bridge-RAG; umg: BM25, dense, "
        "SPLADE, RRF, UMG and UMGP; bubble: dense, Bridge-RAG and BubbleRAG (no LLM), graph size",
    )
    bench.add_argument(
        "--grow",
        default=None,
        help="--suite bubble: also index this folder's corpus.jsonl (e.g. ../shared/data/2wiki) and compare "
        "BubbleRAG's p50 latency on the grown graph (the localisation check)",
    )
    bench.add_argument("--splade", action="store_true", help="umg suite: add the SPLADE expert (slow on CPU)")
    bench.add_argument(
        "--titles",
        choices=["meta", "text", "none"],
        default="meta",
        help="where each passage's title goes: meta = metadata and the text's first line (default), "
        "text = the first line only, none = nowhere (most users' documents)",
    )
    bench.add_argument(
        "--documents",
        choices=["passages", "grouped", "own"],
        default="passages",
        help="passages = each passage its own document (default); grouped = the shuffled passages as the "
        "consecutive sections of long documents (--sections each, source = the document; needs --titles "
        "text or none); own = a corpus of documents (reports: lines with document and position) read as "
        "its documents, each whole, the default for such a corpus; gold stays the passage id, a unit "
        "counting for the passages it contains",
    )
    bench.add_argument(
        "--sections", type=int, default=20, help="--documents grouped: passages per document (default 20)"
    )
    bench.add_argument(
        "--questions",
        default="questions.jsonl",
        help="questions file, a path or a name inside DATASET_DIR (default questions.jsonl; e.g. "
        "singlehop.jsonl: musique's single-hop questions over the same corpus)",
    )
    _out_and_run(bench, _cmd_bench)
    _add_scale_and_reliability(sub)
    _add_index_and_query(sub)
    _add_examples(parser, sub)
    return parser


#: What each command's ``--help`` shows under "examples".
EXAMPLES: dict[str, tuple[str, ...]] = {
    "demo": ("bridge-rag demo", "bridge-rag demo --persist ./demo-index --k 5"),
    "index": (
        "bridge-rag index my-notes --index my-index",
        "bridge-rag index my-notes --index my-index --update",
        "bridge-rag index reports manuals --index docs-index --strategy umg --glob '*.md'",
        "bridge-rag index my-notes --index my-index --chroma-host 127.0.0.1 --chroma-port 8000",
    ),
    "query": (
        'bridge-rag query my-index "Who founded the Halden Institute?" -k 3',
        'bridge-rag query my-index "Who founded it?" --filter \'{"tenant": "acme"}\' --json',
    ),
    "serve": (
        "bridge-rag serve my-index",
        "bridge-rag serve my-index --port 8080 --max-k 20",
    ),
    "bench": (
        "bridge-rag bench ../shared/data/musique --out musique.json --plot musique.png",
        "bridge-rag bench my_eval --strategies dense,bridge,langchain-ensemble --no-ragas",
        "bridge-rag bench ../shared/data/hotpotqa --titles none --no-ragas --out hotpotqa_none.json",
        "bridge-rag bench ../shared/data/musique --suite bridge",
    ),
    "bench-table": (
        "bridge-rag bench-table musique.json musique_none.json hotpotqa.json hotpotqa_none.json",
    ),
    "bench-filter": ("bridge-rag bench-filter --sizes 10000,100000 --out filter.json",),
    "bench-filtered": (
        "bridge-rag bench-filtered ../shared/data/musique ../shared/data/hotpotqa --out filtered.json",
    ),
    "bench-scale": (
        "bridge-rag bench-scale --chunks 10000 --queries 50",
        "bridge-rag bench-scale --chunks 20000 --compare-workers 1,2",
        "bridge-rag bench-scale --chunks 1000000 --precomputed",
    ),
    "bench-workers": ("bridge-rag bench-workers --chunks 10000 --workers 2 --index ./workers-index",),
    "bench-reliability": ("bridge-rag bench-reliability --queries 1000 --strategies bridge",),
}


def _add_examples(parser: argparse.ArgumentParser, sub: Any) -> None:
    """Puts each command's examples under its ``--help`` (and a few under the top-level one)."""
    for name, command in sub.choices.items():
        command.formatter_class = argparse.RawDescriptionHelpFormatter
        command.description = textwrap.fill(command.description or "", 100)
        command.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "examples:\n"
        + "\n".join(f"  {EXAMPLES[name][0]}" for name in ("demo", "index", "query", "bench"))
        + "\n\nEvery command's --help shows its options and examples."
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bridge-rag`` command."""
    from core.app.indexing import CommandError
    from core.app.terminal import strip_terminal_controls
    from core.writer_lock import CatchUpError, IndexLockedError

    args = build_parser().parse_args(argv)
    try:  # OSError: a file not found or already there, a full disk, a permission
        return int(args.func(args))
    except (CommandError, ValueError, TypeError, OSError, IndexLockedError, CatchUpError) as exc:
        print(strip_terminal_controls(f"bridge-rag {args.command}: error: {exc}"), file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
