"""The scale and reliability benchmarks: their corpus, their measurements' plumbing and the CLI.

The benchmarks themselves run for minutes (``bridge-rag bench-scale`` / ``bench-reliability``);
these tests check what can be checked quickly: the synthetic corpus is deterministic, a
prefix of itself at every size, and chunks exactly as designed; the GIL-scaling and RSS
figures are computed and reported; the command line validates its arguments and wires the
results to stdout and ``--out`` (with the long runs replaced by stubs: wiring only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import core.evaluation.reliability as reliability
import core.evaluation.scale as scale
from core.app.cli import main
from core.text import chunk_document, normalize_entity


def test_synthetic_corpus_is_deterministic_and_a_prefix_of_itself() -> None:
    small = list(scale.synthetic_corpus(500))
    large = list(scale.synthetic_corpus(2_000))
    assert len(small) == 100
    assert len(large) == 400
    assert large[:100] == small
    assert list(scale.synthetic_corpus(500, seed=1)) != small
    assert len({d.id for d in large}) == len(large)


def test_synthetic_documents_chunk_into_five_short_chunks() -> None:
    for doc in scale.synthetic_corpus(1_000):
        assert doc.id is not None
        chunks = chunk_document(doc, doc_id=doc.id, chunk_size=scale.CHUNK_SIZE, chunk_overlap=0)
        assert len(chunks) == scale.CHUNKS_PER_DOCUMENT
        for chunk in chunks:
            assert 25 <= len(chunk.text.split()) <= 40
        assert doc.metadata["title"] in chunks[0].text  # each document is about its own person


def test_synthetic_queries_ask_about_indexed_entities() -> None:
    docs = list(scale.synthetic_corpus(250))
    questions = scale.synthetic_queries(len(docs), 40)
    assert questions == scale.synthetic_queries(len(docs), 40)
    corpus = normalize_entity(" ".join(d.text for d in docs))
    asked = [q for q in questions if "founded the" in q]
    assert asked
    for q in asked:
        org = q.removeprefix("Who founded the ").removesuffix("?")
        assert normalize_entity(org) in corpus, q


def test_scale_benchmark_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="chunks must be >= 100"):
        scale.run_scale_benchmark(50)
    with pytest.raises(ValueError, match="queries must be >= 1"):
        scale.run_scale_benchmark(1_000, queries=0)
    with pytest.raises(ValueError, match="chunks must be >= 1"):
        list(scale.synthetic_corpus(0))


def test_gil_scaling_measures_both_runs() -> None:
    result = reliability.run_gil_scaling(2_000, batch=500, batches=4, repeat=1, touch=True)
    assert result.one_thread_lookups_per_s > 0
    assert result.parallel_lookups_per_s > 0
    assert result.ratio == result.parallel_lookups_per_s / result.one_thread_lookups_per_s
    with pytest.raises(ValueError, match="must all be >= 1"):
        reliability.run_gil_scaling(0)


def test_leak_check_growth_and_report() -> None:
    check = reliability.LeakCheck("bridge", 10_000, 60, rss_mib={1_000: 800.0, 5_000: 804.0, 10_000: 808.0})
    assert check.growth == pytest.approx(0.01)
    scaling = reliability.GilScaling(100, 10, 4, False, 2, 1e6, 1.8e6)
    report = reliability.format_report([scaling], [check])
    assert "1.80x" in report
    assert "+1.00%" in report
    with pytest.raises(ValueError, match="unknown strategies"):
        reliability.run_leak_check(1_000, strategies=["nope"])
    with pytest.raises(ValueError, match="queries must be >="):
        reliability.run_leak_check(10, first_checkpoint=100)


# --------------------------------------------------------------------------- command line


def test_bench_scale_prints_and_writes_the_figures(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[Any, ...]] = []

    def fake(chunks: int, *, queries: int, seed: int) -> dict[str, Any]:
        calls.append((chunks, queries, seed))
        return {"seed": seed, "embedder": "fake", "rows": [], "p50_ratio": 1.2, "report": "THE TABLE"}

    monkeypatch.setattr(scale, "run_scale_benchmark", fake)
    out = tmp_path / "scale.json"
    assert main(["bench-scale", "--chunks", "20_000", "--queries", "7", "--out", str(out)]) == 0
    assert calls == [(20_000, 7, 0)]
    assert "THE TABLE" in capsys.readouterr().out
    assert json.loads(out.read_text()) == {"seed": 0, "embedder": "fake", "rows": [], "p50_ratio": 1.2}


def test_bench_reliability_prints_and_writes_the_figures(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def fake(*, queries: int, entities: int, strategies: list[str], embed_queries: bool) -> dict[str, Any]:
        report = f"{queries} {entities} {strategies} {embed_queries}"
        return {"gil_scaling": [{"ratio": 1.7}], "leak_check": [], "report": report}

    monkeypatch.setattr(reliability, "run_reliability_benchmark", fake)
    out = tmp_path / "rel.json"
    argv = [
        "bench-reliability",
        "--queries",
        "2000",
        "--strategies",
        "umg",
        "--embed-queries",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    assert "2000 200000 ['umg'] True" in capsys.readouterr().out
    assert json.loads(out.read_text()) == {"gil_scaling": [{"ratio": 1.7}], "leak_check": []}
