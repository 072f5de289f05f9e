"""End-to-end tests of the comparison run (`bridge-rag bench DATASET_DIR`) on a tiny dataset, real model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import core.evaluation.runner
from core.app.cli import main
from core.embed import SentenceTransformerEmbedder
from core.evaluation.comparison import ComparisonResult, run_comparison
from core.evaluation.registry import STRATEGIES, StrategySpec
from core.evaluation.runner import run_suite, suite_output
from core.evaluation.suite import Suite

CORPUS = [
    ("p-varga", "Ilse Varga", "Ilse Varga was an astronomer who founded the Marrowick Observatory in 1874."),
    ("p-brel", "Tomas Brel", "Tomas Brel studied under Ilse Varga and later directed the Halden Institute."),
    (
        "p-halden",
        "Halden Institute",
        "The Halden Institute is a research institute in Corvane, founded in 1901.",
    ),
    ("p-tessel", "River Tessel", "The River Tessel flows past Marrowick and Corvane to the northern sea."),
    ("p-flood", "1911 flood", "The 1911 flood swept away the timber quays of Marrowick Harbour."),
    ("p-wren", "Jakob Wren", "Jakob Wren founded the Tessel Line shipping company in 1850."),
    ("p-harbour", "Marrowick Harbour", "Marrowick Harbour was built by the Tessel Line in 1868."),
    (
        "p-bread",
        "Rye bread",
        "Rye bread is a dense bread made with flour from rye grain, common in the north.",
    ),
    ("p-chess", "Chess openings", "The Sicilian Defence is a chess opening that begins with the move c5."),
    ("p-moss", "Peat moss", "Sphagnum moss grows in bogs and holds many times its weight in water."),
]
QUESTIONS = [
    ("q1", "Who founded the Marrowick Observatory?", "Ilse Varga", ["p-varga"]),
    (
        "q2",
        "Which institute did the student of Ilse Varga direct?",
        "Halden Institute",
        ["p-brel", "p-halden"],
    ),
    ("q3", "Who founded the company that built Marrowick Harbour?", "Jakob Wren", ["p-harbour", "p-wren"]),
    ("q4", "Which chess opening begins with c5?", "Sicilian Defence", ["p-chess"]),
]
RUN = [
    "dense",
    "bm25",
    "hybrid",
    "bridge",
    "umg",
    "umgp",
    "langchain-ensemble",
    "llamaindex-fusion",
    "uncertainty-fusion",
    "entity-hop",
    "llamaindex-entity-hop",
]
#: Framework rows: a peer, or one of our composable pieces after a framework retriever.
FRAMEWORK_ROWS = (
    "langchain-ensemble",
    "llamaindex-fusion",
    "uncertainty-fusion",
    "entity-hop",
    "llamaindex-entity-hop",
)


def write_dataset(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in CORPUS), encoding="utf-8"
    )
    (root / "questions.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "question": q, "answer": a, "answer_aliases": [], "supporting_ids": s})
            + "\n"
            for i, q, a, s in QUESTIONS
        ),
        encoding="utf-8",
    )
    return root


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("cmp") / "tiny")


@pytest.fixture(scope="module")
def result(dataset_dir: Path, st_embedder: SentenceTransformerEmbedder) -> ComparisonResult:
    ghost = StrategySpec("ghost", "not written yet", lambda ctx: None, requires=("core.no_such_module_xyz",))
    notices: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(STRATEGIES, "ghost", ghost)
        out = run_comparison(
            dataset_dir,
            strategies=[*RUN, "ghost"],
            k=3,
            embedder=st_embedder,
            show_progress=False,
            notice=notices.append,
        )
    assert any(n.startswith("skipping ghost: core.no_such_module_xyz does not import") for n in notices)
    return out


def test_every_strategy_gets_a_row_in_order(result: ComparisonResult) -> None:
    assert [r["strategy"] for r in result.rows] == RUN
    assert result.failed == {}
    assert set(result.skipped) == {"ghost"}
    assert (result.dataset, result.questions, result.passages, result.k) == ("tiny", 4, 10, 3)
    assert result.chunks == 10, "every passage is shorter than one chunk"


def test_metrics_are_sane_and_easy_questions_are_answered(result: ComparisonResult) -> None:
    for row in result.rows:
        assert 0.0 <= row["recall@3"] <= 1.0
        assert 0.0 <= row["answer_recall@3"] <= 1.0
        assert row["context_words@3"] > 0
        assert 0 < row["p50_ms"] <= row["p95_ms"]
        assert row["build_alone_s"] >= row["build_s"] >= 0
        assert row["peak_rss_mib"] > 0
    by_name = {r["strategy"]: r for r in result.rows}
    for name in ("dense", "hybrid", "bridge", "langchain-ensemble", "llamaindex-fusion"):
        found = result.per_question[name]
        assert found[0]["passage_recall"] == 1.0, f"{name} misses the one-hop question q1"
        assert found[3]["answer_found"], f"{name} misses the chess question"
    assert by_name["umg"]["build_s"] == by_name["umgp"]["build_s"], "UMG and UMGP share one build"
    # After a base retriever of 2k results (Bridge-RAG's own dense pool), the composable step
    # ranks as Bridge-RAG does.
    bridge_ids = [entry["doc_ids"] for entry in result.per_question["bridge"]]
    for name in ("entity-hop", "llamaindex-entity-hop"):
        assert [entry["doc_ids"] for entry in result.per_question[name]] == bridge_ids, name


def test_build_alone_adds_the_shared_work_each_strategy_reused(result: ComparisonResult) -> None:
    by_name = {r["strategy"]: r for r in result.rows}
    shared = result.shared
    assert shared["build_s"] == pytest.approx(sum(shared["seconds"].values()))
    for name in ("dense", "hybrid", "bridge", "langchain-ensemble", "llamaindex-fusion"):
        assert by_name[name]["build_alone_s"] == pytest.approx(by_name[name]["build_s"] + shared["build_s"])
    assert by_name["bm25"]["build_alone_s"] == pytest.approx(
        by_name["bm25"]["build_s"] + shared["seconds"]["chunk"]
    )
    assert by_name["dense"]["embedded_texts"] == 0, "dense reads the shared vectors"
    umg = by_name["umg"]
    assert umg["cached_texts"] > 0, "one-sentence passages: UMG's windows are the shared chunks' texts"
    assert umg["build_alone_s"] == pytest.approx(umg["build_s"] + umg["cached_embed_s"])
    assert umg["cached_embed_s"] > 0


def test_ragas_id_recall_agrees_with_passage_recall(result: ComparisonResult) -> None:
    """Two independent implementations of the same quantity must agree (per question)."""
    for name, per_q in result.per_question.items():
        for entry in per_q:
            assert entry["ragas"]["id_based_context_recall"] == pytest.approx(entry["passage_recall"]), name
        row = next(r for r in result.rows if r["strategy"] == name)
        for metric in (
            "id_based_context_precision",
            "non_llm_context_recall",
            "non_llm_context_precision_with_reference",
        ):
            assert 0.0 <= row[metric] <= 1.0


def test_reports_json_and_plot(result: ComparisonResult, tmp_path: Path) -> None:
    report = result.report()
    assert "tiny: 4 questions, 10 passages as 10 chunks" in report
    assert (
        "| strategy | R@1 | R@2 | R@3 | R@10 | AR@3 | words@3 | R@3 - dense | R@3 - two-hop "
        "| words@3 / dense | p50 / dense | p50 ms | p95 ms | build s (shared corpus) "
        "| build s (alone) |" in report
    )
    assert (
        "| strategy | ragas ID recall | ragas ID precision | ragas text recall | ragas text precision |"
        in report
    )
    assert "- llamaindex-fusion: LlamaIndex QueryFusionRetriever" in report
    assert "skipped ghost: core.no_such_module_xyz does not import" in report
    data = json.loads(json.dumps(result.to_json()))
    assert [r["strategy"] for r in data["rows"]] == RUN
    assert data["machine"]["cpus"] >= 1
    assert len(data["per_question"]["bridge"]) == 4
    png = tmp_path / "p.png"
    result.plot(png)
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_peer_results_carry_corpus_document_ids(result: ComparisonResult) -> None:
    ids = {i for i, _, _ in CORPUS}
    for name in FRAMEWORK_ROWS:
        for entry in result.per_question[name]:
            assert entry["doc_ids"], name
            assert set(entry["doc_ids"]) <= ids, name


def test_a_failing_strategy_is_reported_and_the_others_still_run(
    dataset_dir: Path, st_embedder: SentenceTransformerEmbedder
) -> None:
    def broken(ctx: Any) -> Any:
        raise RuntimeError("boom")

    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(STRATEGIES, "broken", StrategySpec("broken", "raises", broken))
        out = run_comparison(
            dataset_dir,
            strategies=["broken", "bm25"],
            k=2,
            embedder=st_embedder,
            ragas=False,
            show_progress=False,
            notice=lambda m: None,
        )
    assert out.failed == {"broken": "build raised RuntimeError: boom"}
    assert [r["strategy"] for r in out.rows] == ["bm25"]
    assert "FAILED broken: build raised RuntimeError: boom" in out.report()
    assert "ragas ID recall" not in out.report()


# ---------------------------------------------------------------- the per-strategy suites

SUITE_HEAD = (
    "| strategy | recall@2 | recall@5 | recall@10 | answer_recall@5 | context_words@5 | p50_ms | p95_ms "
    "| p50_no_embed_ms |"
)


def _run(dataset_dir: Path, suite: Suite, embedder: SentenceTransformerEmbedder) -> dict[str, Any]:
    return suite_output(run_suite(dataset_dir, suite, embedder=embedder, show_progress=False), suite)


def _rows(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["strategy"]: r for r in out["rows"]}


@pytest.fixture(scope="module")
def bridge_out(dataset_dir: Path, st_embedder: SentenceTransformerEmbedder) -> dict[str, Any]:
    from core.evaluation.bridge_suite import bridge_suite

    return _run(dataset_dir, bridge_suite((1, 2)), st_embedder)


def test_bridge_suite_rows_columns_and_build(bridge_out: dict[str, Any]) -> None:
    names = [
        "dense",
        "paper: filter only (d=0)",
        "paper: + forest d=1",
        "paper: + forest d=2",
        "+ entity evidence, second filter hop (no walk)",
        "+ entity-hop walk, 1 hop(s)",
        "+ entity-hop walk, 2 hop(s)",
        "+ entity-hop walk, 3 hop(s)",
        "bridge (default)",
        "default without the dense prior",
        "default at d=0",
        "default at d=1",
        "default at d=2",
    ]
    assert [r["strategy"] for r in bridge_out["rows"]] == names
    assert bridge_out["table"].splitlines()[0] == (
        SUITE_HEAD + " p95_no_embed_ms | build_s | recall@5 vs dense | words@5 / dense | p50 / dense p50 |"
    )
    rows = _rows(bridge_out)
    assert "recall@5 vs dense" not in rows["dense"], "the reference row gets no comparison"
    for name in names[1:]:
        row = rows[name]
        assert row["recall@5 vs dense"] == pytest.approx(row["recall@5"] - rows["dense"]["recall@5"])
        assert row["p50 / dense p50"] == pytest.approx(row["p50_ms"] / rows["dense"]["p50_ms"])
        assert 0 < row["p50_no_embed_ms"] <= row["p95_no_embed_ms"]
        assert row["build_s"] == rows["bridge (default)"]["build_s"], "one Bridge build serves every row"
    assert (bridge_out["dataset"], bridge_out["questions"], bridge_out["passages"]) == ("tiny", 4, 10)
    build = bridge_out["build"]
    assert build["bridge_build_s"] == pytest.approx(rows["bridge (default)"]["build_alone_s"])
    assert build["bridge_build_s"] > build["embed_corpus_once_s"] > 0
    assert build["build_over_embed"] == pytest.approx(build["bridge_build_s"] / build["embed_corpus_once_s"])
    assert {"chunk", "embed", "store", "entities"} <= set(build["steps_s"]), "shared steps + its own"
    assert build["counts"]
    assert rows["dense"]["build_alone_s"] == pytest.approx(
        rows["dense"]["build_s"] + bridge_out["shared_corpus"]["build_s"]
    )


@pytest.fixture(scope="module")
def umg_out(dataset_dir: Path, st_embedder: SentenceTransformerEmbedder) -> dict[str, Any]:
    from core.evaluation.umg_suite import umg_suite

    return _run(dataset_dir, umg_suite(), st_embedder)


def test_umg_suite_rows_columns_and_baseline_builds(umg_out: dict[str, Any]) -> None:
    rrf = "hybrid RRF dense+bm25 (g=8, k=60)"
    off = "without the bridging expert"
    names = ["bm25 (g=8)", "dense (g=8)", rrf, f"umg {off}", "umg", f"umgp {off}", "umgp"]
    assert [r["strategy"] for r in umg_out["rows"]] == names
    assert umg_out["table"].splitlines()[0] == (
        SUITE_HEAD + " build_s | R@5 - RRF | AR@5 - RRF | words@5 / RRF | p50 / RRF p50 |"
    )
    rows = _rows(umg_out)
    assert "p50_no_embed_ms" not in rows["bm25 (g=8)"], "BM25 needs no query vector"
    assert rows["dense (g=8)"]["p50_no_embed_ms"] > 0
    assert rows[rrf]["AR@5 - RRF"] == 0.0
    assert rows[rrf]["words@5 / RRF"] == rows[rrf]["p50 / RRF p50"] == 1.0
    for name in names:
        assert rows[name]["p50 / RRF p50"] == pytest.approx(rows[name]["p50_ms"] / rows[rrf]["p50_ms"])
    steps = umg_out["build"]["steps_s"]
    assert rows["bm25 (g=8)"]["build_alone_s"] == pytest.approx(steps["units"] + steps["sparse"])
    assert rows[rrf]["build_alone_s"] == pytest.approx(
        steps["units"] + steps["embed"] + steps["store"] + steps["sparse"]
    )
    assert rows["umg"]["build_alone_s"] == rows["umgp"]["build_alone_s"] == umg_out["build"]["umg_build_s"]
    assert rows["umg"]["build_alone_s"] >= sum(steps.values()) - 1e-9


@pytest.fixture(scope="module")
def bubble_out(
    dataset_dir: Path, tmp_path_factory: pytest.TempPathFactory, st_embedder: SentenceTransformerEmbedder
) -> dict[str, Any]:
    from core.evaluation.bubble_suite import bubble_suite

    grow = tmp_path_factory.mktemp("grow")
    extra = [
        ("p-varga", "Ilse Varga", "Already indexed: this passage is skipped."),
        ("g-1", "Orrin Vale", "Orrin Vale was a cartographer who mapped the coast north of Corvane."),
        ("g-2", "Vale Atlas", "The Vale Atlas, printed in 1890, shows the River Tessel in detail."),
    ]
    (grow / "corpus.jsonl").write_text(
        "".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in extra), encoding="utf-8"
    )
    return _run(dataset_dir, bubble_suite(grow_with=str(grow)), st_embedder)


def test_bubble_suite_rows_graph_and_localisation(bubble_out: dict[str, Any]) -> None:
    assert [r["strategy"] for r in bubble_out["rows"]] == [
        "dense",
        "bridge",
        "bubble: evidence graphs only (no walk, no dense pool)",
        "bubble: + dense pool of 20 (no walk)",
        "bubble: + walk + dense pool of 20",
        "bubble (no LLM)",
    ]
    assert bubble_out["table"].splitlines()[0] == (
        SUITE_HEAD + " build_s | recall@5 - dense | words@5 / dense | p50 / dense p50 |"
    )
    rows = _rows(bubble_out)
    assert rows["dense"]["recall@5 - dense"] == 0.0
    assert rows["bubble (no LLM)"]["build_alone_s"] == bubble_out["build"]["bubble_build_s"]
    graph = bubble_out["graph"]
    assert graph["nodes"] > 0
    assert graph["chunks"] == 10
    loc = bubble_out["localisation"]
    assert loc["added_passages"] == 2, "the passage already indexed is left out"
    assert loc["small_nodes"] == graph["nodes"]
    assert loc["grown_nodes"] >= loc["small_nodes"]
    assert loc["growth"] == pytest.approx(loc["grown_nodes"] / loc["small_nodes"])
    assert loc["small_p50_ms"] == pytest.approx(rows["bubble (no LLM)"]["p50_ms"])
    assert loc["p50_ratio"] == pytest.approx(loc["grown_p50_ms"] / loc["small_p50_ms"])
    assert 0.0 <= loc["grown_recall@5"] <= 1.0
    assert loc["grown_build_s"] > 0
    assert loc["graph"]["nodes"] == loc["grown_nodes"]


def test_bubble_suite_checks_the_grow_folder_before_the_run(tmp_path: Path) -> None:
    from core.evaluation.bubble_suite import bubble_suite

    with pytest.raises(FileNotFoundError, match=r"--grow needs a folder with a corpus\.jsonl"):
        bubble_suite(grow_with=str(tmp_path))


# ---------------------------------------------------------------- the command line


@pytest.fixture
def session_model(monkeypatch: pytest.MonkeyPatch, st_embedder: SentenceTransformerEmbedder) -> None:
    """The command loads the default model; hand it the session's instance instead (same model)."""
    monkeypatch.setattr(core.evaluation.runner, "as_embedder", lambda obj: st_embedder)


@pytest.mark.usefixtures("session_model")
def test_cli_bench_writes_table_json_and_plot(dataset_dir: Path, tmp_path: Path, capsys: Any) -> None:
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    code = main(
        [
            "bench",
            str(dataset_dir),
            "--strategies",
            "dense,bm25",
            "--k",
            "2",
            "--sample",
            "3",
            "--out",
            str(out),
            "--plot",
            str(png),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "| strategy | R@1 | R@2 | R@10 | AR@2 |" in text
    assert "| dense |" in text
    assert "| bm25 |" in text
    assert "ragas ID recall" in text
    data = json.loads(out.read_text())
    assert data["questions"] == 3
    assert [r["strategy"] for r in data["rows"]] == ["dense", "bm25"]
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.usefixtures("session_model")
def test_cli_bench_suite_prints_the_table_and_build_and_writes_json(
    dataset_dir: Path, tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "bridge.json"
    assert main(["bench", str(dataset_dir), "--suite", "bridge", "--depths", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert (
        "tiny: 4 questions, 10 passages, titles in metadata and text, one document per passage, "
        "indexed in shuffled order (seed 0)" in text
    )
    assert SUITE_HEAD in text
    assert "| default at d=2 |" in text
    assert "| paper: + forest d=2 |" in text
    assert "\nbuild: bridge index " in text
    assert "build steps (s): chunk " in text
    assert "\nindex: " in text
    data = json.loads(out.read_text())
    assert "table" not in data
    rows = [r["strategy"] for r in data["rows"]]
    assert rows[:3] == ["dense", "paper: filter only (d=0)", "paper: + forest d=2"]
    assert rows[-2:] == ["default at d=0", "default at d=2"]


def test_cli_bench_names_the_line_and_field_of_a_malformed_dataset(tmp_path: Path, capsys: Any) -> None:
    root = write_dataset(tmp_path / "bad")
    lines = (root / "questions.jsonl").read_text().splitlines()
    lines[2] = json.dumps({"id": "q3", "question": "Who?", "supporting_ids": ["p-wren"]})
    (root / "questions.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["bench", str(root), "--strategies", "dense"]) == 2
    err = capsys.readouterr().err
    assert f"{root / 'questions.jsonl'}:3: missing field 'answer'" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--strategies", "dense,nope"], "unknown strategy 'nope'; choose from dense, bm25"),
        (
            ["--suite", "bridge", "--plot", "x.png"],
            "--plot: only for the all-strategies comparison (--suite all); drop it or --suite bridge",
        ),
        (["--depths", "1"], "--depths and --splade apply to --suite bridge / --suite umg only"),
        (["--k", "0", "--strategies", "bm25"], "k must be >= 1"),
    ],
)
def test_cli_bench_rejects_bad_options(dataset_dir: Path, argv: list[str], message: str, capsys: Any) -> None:
    assert main(["bench", str(dataset_dir), *argv]) == 2
    assert message in capsys.readouterr().err
