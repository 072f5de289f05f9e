"""The bad-input matrix: every public entry point, every kind of bad input, one table.

Entry points: the core strategy's ``retrieve``; the LangChain retriever's ``invoke`` /
``ainvoke`` and constructor; the LlamaIndex retriever's ``retrieve`` / ``aretrieve`` and
constructor; the builders (core ``from_documents``, LangChain ``from_documents``,
LlamaIndex ``from_defaults``); ``save`` / ``load`` (core and both frameworks); and the
``bridge-rag`` command line. Inputs: empty, whitespace, 1 MB, invalid UTF-8, None, wrong
types, NaN/inf embeddings, wrong dimensions, k out of range and unknown strategy names.

Every row must raise the given exception type with a message matching the given pattern,
and afterwards the strategy must still answer exactly as before. The table runs for every
strategy of :data:`tests.reliability.cases.STRATEGIES`, over a small index built with the
fake embedder (these are wiring checks). Known library bugs in files other engineers own are
strict xfails (``KNOWN_BUGS``), so fixing them turns the suite red until the entry is removed.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import DeterministicFakeEmbedding
from llama_index.core import Document as LIDocument
from llama_index.core.embeddings import MockEmbedding

from core.embed import CallableEmbedder
from core.entities import RuleBasedEntityExtractor
from core.store import ChunkStore
from core.strategies.base import MAX_K
from core.types import Document
from tests.core.conftest import HASH_DIM, unique_name
from tests.reliability.cases import STRATEGIES, StrategyCase, synthetic_documents, wiring_embedder

QUERY = "Who founded the Quellmoor Guild?"
ONE_MB = "x" * 1_000_000
SURROGATE = "Who founded caf\udce9 Quellmoor?"
SURROGATE_DOC = "The caf\udce9 of Quellmoor sold bread. Arvel founded it in 1801. It closed in 1850."


@dataclass
class Ctx:
    """One strategy's small index, its two retrievers, and a saved copy."""

    case: StrategyCase
    strategy: Any
    langchain: Any
    llama_index: Any
    saved: Path
    other_kind: Path
    scratch: Path
    baseline: list[Any] = field(default_factory=list)

    def signature(self) -> list[Any]:
        return [
            [(r.id, r.score) for r in self.strategy.retrieve(QUERY, k=3)],
            [d.id for d in self.langchain.invoke(QUERY)],
            [n.node.node_id for n in self.llama_index.retrieve(QUERY)],
        ]

    def build(self, documents: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("embedder", wiring_embedder())
        kwargs.setdefault("store", ChunkStore.ephemeral(unique_name("bad")))
        return self.case.build(documents, **{**self.case.wiring_kwargs(), **kwargs})

    def empty_directory(self) -> Path:
        path = self.scratch / "empty"
        path.mkdir(exist_ok=True)
        return path

    def load(self, path: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("embedder", wiring_embedder())
        kwargs.setdefault("store", self.strategy.store)
        return self.case.load(path, **{**self.case.wiring_kwargs(), **kwargs})

    @contextmanager
    def query_embedder(self, embedder: Any) -> Iterator[None]:
        """Swaps the strategy's query embedder for one call (restored even when it raises)."""
        original = self.strategy.embedder
        self.strategy.embedder = embedder
        try:
            yield
        finally:
            self.strategy.embedder = original


@pytest.fixture(scope="module", params=STRATEGIES, ids=str)
def ctx(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Ctx:
    case: StrategyCase = request.param
    scratch = tmp_path_factory.mktemp(f"bad-{case.name}")
    strategy = case.build(
        synthetic_documents(12),
        embedder=wiring_embedder(),
        store=ChunkStore.ephemeral(unique_name(f"bad-{case.name}")),
        **case.wiring_kwargs(),
    )
    strategy.save(scratch / "saved")
    other = next((c for c in STRATEGIES if c.name != case.name), None)
    assert other is not None, "the table lists at least two strategies"
    other.build(
        synthetic_documents(3),
        embedder=wiring_embedder(),
        store=ChunkStore.ephemeral(unique_name("other")),
        **other.wiring_kwargs(),
    ).save(scratch / "other-kind")
    context = Ctx(
        case=case,
        strategy=strategy,
        langchain=case.langchain(strategy, 3),
        llama_index=case.llama_index(strategy, 3, {}),
        saved=scratch / "saved",
        other_kind=scratch / "other-kind",
        scratch=scratch,
    )
    context.baseline = context.signature()
    assert all(context.baseline), "the index answers before the bad inputs"
    return context


# --------------------------------------------------------------------------- embedders


def _constant(value: float, dim: int = HASH_DIM, name: str = "hash-32") -> CallableEmbedder:
    return CallableEmbedder(lambda texts: np.full((len(texts), dim), value), name=name, dimension=dim)


class RawNaNEmbedder:
    """Meets the Embedder protocol directly (no validating base class) and returns NaN."""

    name = "hash-32"
    dimension = HASH_DIM

    def embed_documents(self, texts: Any) -> Any:
        return np.full((len(texts), HASH_DIM), np.nan, dtype=np.float32)

    def embed_query(self, text: str) -> Any:
        return np.full(HASH_DIM, np.nan, dtype=np.float32)


def _with_query_embedder(embedder: Any) -> Callable[[Ctx], Any]:
    def call(c: Ctx) -> Any:
        with c.query_embedder(embedder):
            return c.strategy.retrieve(QUERY, k=3)

    return call


# --------------------------------------------------------------------------- the matrix

Row = tuple[str, str, Callable[[Ctx], Any], type[BaseException] | tuple[type[BaseException], ...], str]

BAD_QUERIES: list[tuple[str, Any, type[BaseException], str]] = [
    ("empty", "", ValueError, "query is empty"),
    ("whitespace", " \n\t  ", ValueError, "query is empty"),
    ("1 MB", ONE_MB, ValueError, "1,000,000 characters long, above the limit of 10,000"),
    ("invalid UTF-8 (lone surrogate)", SURROGATE, ValueError, "query is not valid Unicode text"),
    ("invalid UTF-8 bytes", b"\xff\xfe caf\xe9", TypeError, "query must be a str.*got bytes"),
    ("None", None, TypeError, "query must be a str.*got NoneType"),
    ("int", 42, TypeError, "query must be a str.*got int"),
    ("list", [QUERY], TypeError, "query must be a str.*got list"),
]

BAD_K: list[tuple[str, Any, type[BaseException], str]] = [
    ("k=0", 0, ValueError, "k must be >= 1, got 0"),
    ("k=-1", -1, ValueError, "k must be >= 1, got -1"),
    ("k=2**63", 2**63, ValueError, f"k must be <= {MAX_K:,}"),
    ("k='3'", "3", TypeError, "k must be an int, got str"),
    ("k=2.5", 2.5, TypeError, "k must be an int, got float"),
    ("k=NaN", math.nan, TypeError, "k must be an int, got float"),
    ("k=True", True, TypeError, "k must be an int, got bool"),
]


def _on(target: str, method: str, *args: Any, **kwargs: Any) -> Callable[[Ctx], Any]:
    """A row's call: ``ctx.<target>.<method>(*args, **kwargs)``."""

    def call(c: Ctx) -> Any:
        return getattr(getattr(c, target), method)(*args, **kwargs)

    return call


def _construct(framework: str, k: Any) -> Callable[[Ctx], Any]:
    """A row's call: build the framework's retriever over the strategy with ``k``."""

    def call(c: Ctx) -> Any:
        if framework == "langchain":
            return c.case.langchain(c.strategy, k)
        return c.case.llama_index(c.strategy, k, {})

    return call


def _build_with(documents: Any) -> Callable[[Ctx], Any]:
    """A row's call: build the strategy over ``documents`` (fake embedder, fresh store)."""

    def call(c: Ctx) -> Any:
        return c.build(documents)

    return call


def _query_rows() -> Iterator[Row]:
    for label, q, exc, pattern in BAD_QUERIES:
        yield ("core retrieve", label, _on("strategy", "retrieve", q), exc, pattern)
        yield ("langchain invoke", label, _on("langchain", "invoke", q), exc, pattern)
        yield ("langchain ainvoke", label, _on("langchain", "ainvoke", q), exc, pattern)
        yield ("llama_index retrieve", label, _on("llama_index", "retrieve", q), exc, pattern)
        yield ("llama_index aretrieve", label, _on("llama_index", "aretrieve", q), exc, pattern)


def _k_rows() -> Iterator[Row]:
    for label, k, exc, pattern in BAD_K:
        yield ("core retrieve", label, _on("strategy", "retrieve", QUERY, k=k), exc, pattern)
        yield ("langchain invoke", label, _on("langchain", "invoke", QUERY, k=k), exc, pattern)
        yield ("langchain ainvoke", label, _on("langchain", "ainvoke", QUERY, k=k), exc, pattern)
        yield ("llama_index constructor", label, _construct("llama_index", k), exc, pattern)
        if k != 2**63:  # pydantic reports field errors as ValidationError, a ValueError
            yield ("langchain constructor", label, _construct("langchain", k), ValueError, "k must be")
    yield (
        "core retrieve",
        "unknown option",
        _on("strategy", "retrieve", QUERY, top_k=3),
        TypeError,
        r"unknown retrieve option\(s\): top_k",
    )


def _embedding_rows() -> Iterator[Row]:
    yield (
        "core retrieve",
        "NaN query embedding",
        _with_query_embedder(_constant(math.nan)),
        ValueError,
        "non-finite",
    )
    yield (
        "core retrieve",
        "inf query embedding",
        _with_query_embedder(_constant(math.inf)),
        ValueError,
        "non-finite",
    )
    yield (
        "core retrieve",
        "NaN query embedding from a raw Embedder",
        _with_query_embedder(RawNaNEmbedder()),
        ValueError,
        "NaN or infinity",
    )
    yield (
        "core retrieve",
        "query embedding of the wrong dimension",
        _with_query_embedder(_constant(1.0, dim=16)),
        ValueError,
        r"32-dimensional|32 values",
    )


def _builder_rows() -> Iterator[Row]:
    bad_corpora: list[tuple[str, Any, type[BaseException], str]] = [
        ("documents=None", None, TypeError, "NoneType"),
        ("no documents", [], ValueError, "empty corpus"),
        ("whitespace document", [Document("  \n ", id="blank")], ValueError, "has no text"),
        ("document text None", [Document(None, id="none")], ValueError, "has no text"),  # type: ignore[arg-type]
        ("invalid UTF-8 document", [Document(SURROGATE_DOC, id="bad")], ValueError, "not valid Unicode text"),
        ("a str, not a Document", ["just text"], TypeError, r"pass core\.types\.Document"),
        (
            "duplicate ids",
            [Document("One.", id="a"), Document("Two.", id="a")],
            ValueError,
            "duplicate document id",
        ),
    ]
    for label, docs, exc, pattern in bad_corpora:
        yield ("core build", label, _build_with(docs), exc, pattern)
    docs = synthetic_documents(3, prefix="extra")
    yield (
        "core build",
        "NaN embeddings",
        lambda c: c.build(docs, embedder=_constant(math.nan)),
        ValueError,
        "non-finite",
    )
    yield (
        "core build",
        "inf embeddings",
        lambda c: c.build(docs, embedder=_constant(-math.inf)),
        ValueError,
        "non-finite",
    )
    yield (
        "core build",
        "wrong dimension for the collection",
        lambda c: c.build(docs, embedder=_constant(1.0, dim=16, name="other"), store=c.strategy.store),
        ValueError,
        "embedding dimension 16 differs from the collection's 32",
    )
    yield (
        "core build",
        "unknown setting",
        lambda c: c.build(docs, not_a_setting=1),
        TypeError,
        "not_a_setting",
    )
    yield ("core build", "setting k=0", lambda c: c.build(docs, k=0), ValueError, "k must be >= 1")
    yield ("core build", "setting k='2'", lambda c: c.build(docs, k="2"), TypeError, "k must be an int")

    lc_embedding = DeterministicFakeEmbedding(size=HASH_DIM)
    li_embed_model = MockEmbedding(embed_dim=HASH_DIM)
    framework_corpora: list[tuple[str, Any, Any, type[BaseException], str]] = [
        ("no documents", [], [], ValueError, "empty corpus"),
        ("None items", [None], [None], TypeError, "got NoneType"),
        ("str items", ["text"], ["text"], TypeError, "got str"),
        (
            "whitespace document",
            [LCDocument(page_content=" ")],
            [LIDocument(text=" ")],
            ValueError,
            "has no text",
        ),
        (
            "invalid UTF-8 document",
            [LCDocument(page_content=SURROGATE_DOC)],
            [LIDocument(text=SURROGATE_DOC)],
            ValueError,
            "not valid Unicode text",
        ),
    ]

    def framework_build(framework: str, documents: Any) -> Callable[[Ctx], Any]:
        def call(c: Ctx) -> Any:
            if framework == "langchain":
                return c.case.langchain_build(documents, lc_embedding, **c.case.wiring_kwargs())
            return c.case.llama_index_build(documents, li_embed_model, **c.case.wiring_kwargs())

        return call

    for label, lc_docs, li_docs, exc, pattern in framework_corpora:
        yield ("langchain from_documents", label, framework_build("langchain", lc_docs), exc, pattern)
        yield ("llama_index from_defaults", label, framework_build("llama_index", li_docs), exc, pattern)


def _persistence_rows() -> Iterator[Row]:
    yield ("core load", "path None", lambda c: c.load(None), TypeError, "NoneType")
    yield (
        "core load",
        "missing directory",
        lambda c: c.load(c.scratch / "missing"),
        FileNotFoundError,
        "no index",
    )
    yield (
        "core load",
        "a file, not a directory",
        lambda c: c.load(c.saved / "CURRENT"),
        FileNotFoundError,
        "no index",
    )
    yield (
        "core load",
        "empty directory",
        lambda c: c.load(c.empty_directory()),
        FileNotFoundError,
        "no saved index",
    )
    yield (
        "core load",
        "another strategy's index (unknown strategy name)",
        lambda c: c.load(c.other_kind),
        ValueError,
        r"this directory holds a \w+ index, not \w+",
    )
    yield (
        "core load",
        "embedder of another dimension",
        lambda c: c.load(c.saved, embedder=_constant(1.0, dim=16)),
        ValueError,
        "built with 32-dimensional embeddings",
    )
    yield (
        "core load",
        "NaN embedder",
        lambda c: c.load(c.saved, embedder=CallableEmbedder(lambda t: np.full((len(t), HASH_DIM), np.nan))),
        ValueError,
        "non-finite",
    )
    yield ("core save", "path None", lambda c: c.strategy.save(None), TypeError, "NoneType")
    yield (
        "core save",
        "path under a file",
        lambda c: c.strategy.save(c.saved / "CURRENT" / "x"),
        OSError,
        "CURRENT",
    )
    yield (
        "langchain load",
        "missing directory",
        lambda c: c.case.langchain_load(c.scratch / "missing", DeterministicFakeEmbedding(size=HASH_DIM), 3),
        FileNotFoundError,
        "no index directory",
    )
    yield (
        "llama_index from_persist_dir",
        "missing directory",
        lambda c: c.case.llama_index_load(c.scratch / "missing", MockEmbedding(embed_dim=HASH_DIM), 3),
        FileNotFoundError,
        "no index directory",
    )


ROWS: list[Row] = [*_query_rows(), *_k_rows(), *_embedding_rows(), *_builder_rows(), *_persistence_rows()]

#: (strategy, entry point, input) -> why it fails today. Each is a real bug in a file being
#: edited by others right now (core/strategies/umg.py); strict, so a fix turns it red.
KNOWN_BUGS: dict[tuple[str, str, str], str] = {}


def _run(value: Any) -> Any:
    return asyncio.run(value) if inspect.iscoroutine(value) else value


@pytest.mark.parametrize(
    ("entry", "label", "call", "exc", "pattern"), ROWS, ids=[f"{r[0]}: {r[1]}" for r in ROWS]
)
def test_bad_input_gives_a_clear_error_and_the_index_still_works(
    request: pytest.FixtureRequest,
    ctx: Ctx,
    entry: str,
    label: str,
    call: Callable[[Ctx], Any],
    exc: type[BaseException],
    pattern: str,
) -> None:
    reason = KNOWN_BUGS.get((ctx.case.name, entry, label))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    with pytest.raises(exc) as info:
        _run(call(ctx))
    assert re.search(pattern, str(info.value)), f"unclear message: {info.value}"
    assert ctx.signature() == ctx.baseline, "the index answers as before"


def test_strategy_specific_bad_options(ctx: Ctx) -> None:
    assert ctx.case.bad_options, "every strategy lists its own bad options"
    for options, exc, message in ctx.case.bad_options:
        with pytest.raises(exc) as info:
            ctx.strategy.retrieve(QUERY, **options)
        assert message in str(info.value)
        with pytest.raises(exc):
            ctx.langchain.invoke(QUERY, **options)
    assert ctx.signature() == ctx.baseline


def test_huge_depth_and_k_are_answered(ctx: Ctx) -> None:
    """The largest accepted k returns every result; options above the forest's height are harmless."""
    everything = ctx.strategy.retrieve(QUERY, k=MAX_K)
    assert len(everything) >= 3
    assert len({r.id for r in everything}) == len(everything)
    for options, *_ in ctx.case.bad_options:
        if options.get("depth") == -1:  # this strategy takes a depth: a huge one is the whole forest
            assert ctx.strategy.retrieve(QUERY, k=3, depth=2**40)
    assert ctx.signature() == ctx.baseline


# --------------------------------------------------------------------------- the command line

CLI_USAGE_ERRORS: list[tuple[list[str], str]] = [
    ([], "the following arguments are required: COMMAND"),
    (["nope"], "invalid choice: 'nope'"),
    (["bench", "some/dataset", "--suite", "nope"], "invalid choice: 'nope'"),  # an unknown strategy name
    (["bench-scale", "--chunks", "0"], "expected positive integers, got '0'"),
    (["bench-scale", "--chunks", "-5"], "expected positive integers, got '-5'"),
    (["bench-scale", "--chunks", "many"], "expected comma-separated integers, got 'many'"),
    (["bench-scale", "--chunks", "1,2"], "expected one positive integer, got '1,2'"),
    (["bench-scale", "--chunks", "1\udcff"], "expected comma-separated integers"),
    (["bench-scale", "--chunks", ""], "expected positive integers, got ''"),
    (["bench-scale", "--queries", "1e9"], "expected comma-separated integers, got '1e9'"),
    (["bench-reliability", "--queries", "0"], "expected positive integers"),
    (["bench-reliability", "--strategies", " , "], "expected comma-separated strategy names"),
    (["bench-filter", "--sizes", "x"], "expected comma-separated integers"),
]


@pytest.mark.parametrize(
    ("argv", "message"), CLI_USAGE_ERRORS, ids=[" ".join(a) or "(none)" for a, _ in CLI_USAGE_ERRORS]
)
def test_cli_usage_errors_exit_2_with_a_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from core.app.cli import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


CLI_RUN_ERRORS: list[tuple[list[str], str]] = [
    (["bench-scale", "--chunks", "50"], "chunks must be >= 100"),
    (["bench-reliability", "--strategies", "bridge,nope"], "unknown strategies ['nope']"),
    (["bench-reliability", "--queries", "999"], "queries must be >= 1,000"),
]


@pytest.mark.parametrize(("argv", "message"), CLI_RUN_ERRORS, ids=[" ".join(a) for a, _ in CLI_RUN_ERRORS])
def test_cli_refuses_bad_runs_before_any_work(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from core.app.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"bridge-rag {argv[0]}: error:" in err
    assert message in err


# --------------------------------------------------------------------------- bounded sizes


def test_a_huge_k_through_the_vector_index_allocates_nothing_big() -> None:
    """k = 2**31 - 1 over the HNSW path once asked numpy for 32 GiB; it is clamped first."""
    from core.strategies.bridge import BridgeRAG
    from core.vector_index import VectorIndex

    rag = BridgeRAG.from_documents(
        synthetic_documents(12),
        embedder=wiring_embedder(),
        store=ChunkStore.ephemeral(unique_name("huge-k")),
        entity_extractor=RuleBasedEntityExtractor(),
        exact_search_max_rows=0,  # every dense search goes through VectorIndex
        show_progress=False,
    )
    found = rag.retrieve(QUERY, k=MAX_K)
    assert len(found) == rag.num_chunks
    matrix = np.asarray(rag._table.matrix)
    ids, scores = VectorIndex.build(matrix).search(matrix[:2], matrix, MAX_K)
    assert ids.shape == scores.shape == (2, matrix.shape[0])


def _saved_bridge(path: Path) -> Any:
    """A small Bridge-RAG index saved under ``path`` (closed: its files can be forged)."""
    from core.strategies.bridge import BridgeRAG

    rag = BridgeRAG.from_documents(
        synthetic_documents(6),
        embedder=wiring_embedder(),
        persist_directory=path,
        entity_extractor=RuleBasedEntityExtractor(),
        show_progress=False,
    )
    rag.close()
    return rag


def _forge(index: Path, name: str, blob: bytes) -> None:
    """Replaces one file of the saved generation and re-signs it in the manifest."""
    generation = next(p for p in (index / "bridge").iterdir() if p.name.startswith("gen-"))
    manifest = json.loads((generation / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)}
    (generation / name).write_bytes(blob)
    (generation / "manifest.json").write_text(json.dumps(manifest))


def test_a_forged_forest_range_is_refused(tmp_path: Path) -> None:
    """A forest whose chunk ranges reach past the saved rows (re-signed) does not load."""
    from core.native import AbstractForest
    from core.strategies.bridge import BridgeRAG

    arrays = _saved_bridge(tmp_path).forest.arrays()
    forged = AbstractForest()
    n = len(arrays["level"])
    forged.add_nodes(
        [int(x) for x in arrays["level"]], [0] * n, [2**31 - 2] * n, [int(x) for x in arrays["parent"]]
    )
    _forge(tmp_path, "forest.bin", forged.to_bytes())
    with pytest.raises(ValueError, match="disagree with each other"):
        BridgeRAG.load(tmp_path, embedder=wiring_embedder(), entity_extractor=RuleBasedEntityExtractor())


def test_a_forged_entity_filter_id_is_refused(tmp_path: Path) -> None:
    """An entity mapped to an abstract that does not exist (re-signed) does not load.

    It once loaded, and the first query naming the entity raised an IndexError.
    """
    from core.native import CuckooFilter
    from core.strategies.bridge import BridgeRAG

    rag = _saved_bridge(tmp_path)
    entity = rag._abs_entities[0][0]
    forged = CuckooFilter.from_bytes(rag._filter.to_bytes())
    forged.insert(entity, [10**6])
    _forge(tmp_path, "filter.bin", forged.to_bytes())
    with pytest.raises(ValueError, match="disagree with each other"):
        BridgeRAG.load(tmp_path, embedder=wiring_embedder(), entity_extractor=RuleBasedEntityExtractor())
