"""Tests for core.evaluation: dataset loading, answer matching, recall and run summaries."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.evaluation import (
    Dataset,
    Question,
    RunResult,
    answer_found,
    doc_ids_of,
    load_dataset,
    markdown_table,
    normalize_answer,
    passage_recall,
    run_strategy,
    summarize_runs,
)
from core.types import Document, Retrieved

CORPUS = [
    {"id": "p1", "title": "Ilse Varga", "text": "Ilse Varga founded the Marrowick Observatory in 1874."},
    {"id": "p2", "title": "Tomas Brel", "text": "Tomas Brel directed the Halden Institute."},
    {"id": "p3", "title": "Corvane", "text": "Corvane is a city on the River Tessel."},
]
QUESTIONS = [
    {
        "id": "q1",
        "question": "Who founded the observatory?",
        "answer": "Ilse Varga",
        "answer_aliases": ["Varga"],
        "supporting_ids": ["p1"],
    },
    {"id": "q2", "question": "When?", "answer": 1874, "supporting_ids": ["p1", "p2"]},
]


def _write(path: Path, rows: list[Any], *, raw_lines: dict[int, str] | None = None) -> None:
    """Writes JSON lines; ``raw_lines`` inserts verbatim lines at the given 0-based positions."""
    lines = [json.dumps(r) for r in rows]
    for pos, text in sorted((raw_lines or {}).items()):
        lines.insert(pos, text)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _dataset(tmp_path: Path, corpus: list[Any] | None = None, questions: list[Any] | None = None) -> Path:
    root = tmp_path / "mini"
    root.mkdir(exist_ok=True)
    _write(root / "corpus.jsonl", CORPUS if corpus is None else corpus)
    _write(root / "questions.jsonl", QUESTIONS if questions is None else questions)
    return root


# ---------------------------------------------------------------- load_dataset: valid


def test_load_valid_dataset(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    ds = load_dataset(root)
    assert isinstance(ds, Dataset)
    assert ds.name == "mini"
    assert [p["id"] for p in ds.passages] == ["p1", "p2", "p3"]
    assert ds.questions[0] == Question(
        id="q1",
        question="Who founded the observatory?",
        answer="Ilse Varga",
        aliases=("Varga",),
        supporting_ids=("p1",),
    )
    assert ds.questions[1].answer == "1874", "numeric answers become strings"
    assert ds.questions[1].aliases == ()
    assert ds.questions[1].supporting_ids == ("p1", "p2")


def test_blank_lines_and_extra_fields_are_ignored(tmp_path: Path) -> None:
    root = tmp_path / "blank"
    root.mkdir()
    rows = [dict(p, extra=1) for p in CORPUS]
    _write(root / "corpus.jsonl", rows, raw_lines={0: "", 2: "   "})
    _write(root / "questions.jsonl", QUESTIONS, raw_lines={1: ""})
    ds = load_dataset(str(root))
    assert len(ds.passages) == 3
    assert "extra" not in ds.passages[0]
    assert len(ds.questions) == 2


def test_documents_are_shuffled_deterministically(tmp_path: Path) -> None:
    ds = load_dataset(_dataset(tmp_path))
    docs = ds.documents()
    assert all(isinstance(d, Document) for d in docs)
    assert sorted(d.id for d in docs if d.id) == ["p1", "p2", "p3"]
    assert [d.id for d in ds.documents(seed=0)] == [d.id for d in docs]
    by_id = {d.id: d for d in docs}
    assert by_id["p2"].text == "Tomas Brel\nTomas Brel directed the Halden Institute."
    assert by_id["p2"].metadata == {"title": "Tomas Brel"}
    orders = {tuple(d.id for d in ds.documents(seed=s)) for s in range(20)}
    assert len(orders) > 1, "different seeds give different orders"


# ---------------------------------------------------------------- load_dataset: errors


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_dataset(tmp_path / "nope")


@pytest.mark.parametrize("missing", ["corpus.jsonl", "questions.jsonl"])
def test_missing_file(tmp_path: Path, missing: str) -> None:
    root = _dataset(tmp_path)
    (root / missing).unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
        load_dataset(root)


CORPUS_ERRORS = [
    ("not json", '{"id": "p9", "title": ', "not valid JSON"),
    ("array", "[1, 2, 3]", "expected a JSON object"),
    ("missing id", json.dumps({"title": "T", "text": "x"}), "missing field 'id'"),
    ("missing text", json.dumps({"id": "p9", "title": "T"}), "missing field 'text'"),
    ("int id", json.dumps({"id": 9, "title": "T", "text": "x"}), "field 'id' has the wrong type (int)"),
    ("null title", json.dumps({"id": "p9", "title": None, "text": "x"}), "field 'title' has the wrong type"),
]


@pytest.mark.parametrize(("case", "line", "message"), CORPUS_ERRORS, ids=[c[0] for c in CORPUS_ERRORS])
def test_malformed_corpus_line_names_file_line_and_field(
    tmp_path: Path, case: str, line: str, message: str
) -> None:
    root = tmp_path / "bad"
    root.mkdir()
    # the bad row is the 3rd line of the file (after one good row and one blank line)
    _write(root / "corpus.jsonl", [CORPUS[0], CORPUS[1]], raw_lines={1: "", 2: line})
    _write(root / "questions.jsonl", QUESTIONS[:1])
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        load_dataset(root)
    assert "corpus.jsonl:3: " in str(info.value)


QUESTION_ERRORS = [
    ("missing question", {"id": "q9", "answer": "a", "supporting_ids": ["p1"]}, "missing field 'question'"),
    ("list answer", {"id": "q9", "question": "?", "answer": ["a"], "supporting_ids": []}, "field 'answer'"),
    (
        "str supporting ids",
        {"id": "q9", "question": "?", "answer": "a", "supporting_ids": "p1"},
        "field 'supporting_ids' has the wrong type (str)",
    ),
]


@pytest.mark.parametrize(("case", "row", "message"), QUESTION_ERRORS, ids=[c[0] for c in QUESTION_ERRORS])
def test_malformed_question_line_names_file_line_and_field(
    tmp_path: Path, case: str, row: dict[str, Any], message: str
) -> None:
    root = _dataset(tmp_path, questions=[])
    _write(root / "questions.jsonl", [QUESTIONS[0], row])
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        load_dataset(root)
    assert "questions.jsonl:2: " in str(info.value)


def test_aliases_must_be_a_list(tmp_path: Path) -> None:
    bad = dict(QUESTIONS[0], id="q9", answer_aliases="Varga")
    root = _dataset(tmp_path, questions=[QUESTIONS[0], bad])
    with pytest.raises(ValueError, match=r"questions\.jsonl:2: field 'answer_aliases' must be a list"):
        load_dataset(root)


def test_aliases_error_names_the_file_line_after_blank_lines(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    bad = dict(QUESTIONS[0], id="q9", answer_aliases="Varga")
    # file lines: 1 blank, 2 blank, 3 good row, 4 the bad row
    _write(root / "questions.jsonl", [QUESTIONS[0], bad], raw_lines={0: "", 1: ""})
    with pytest.raises(ValueError, match=r"questions\.jsonl:4: field 'answer_aliases'"):
        load_dataset(root)


def test_empty_file_is_rejected(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    (root / "questions.jsonl").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"questions\.jsonl holds no rows"):
        load_dataset(root)


def test_duplicate_passage_id(tmp_path: Path) -> None:
    root = _dataset(tmp_path, corpus=[*CORPUS, dict(CORPUS[1], text="again")])
    with pytest.raises(ValueError, match="duplicate passage id 'p2'"):
        load_dataset(root)


def test_unknown_supporting_id(tmp_path: Path) -> None:
    bad = dict(QUESTIONS[0], id="q7", supporting_ids=["p1", "p404"])
    root = _dataset(tmp_path, questions=[bad])
    with pytest.raises(ValueError, match="question 'q7' cites unknown passage 'p404'"):
        load_dataset(root)


# ---------------------------------------------------------------- answers and recall


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("The Halden Institute!", "halden institute"),
        ("  A   river, an Observatory  ", "river observatory"),
        ("Twenty-three", "twenty three"),
        ("O'Brien's", "o brien s"),
        ("theatre", "theatre"),
        ("", ""),
        ("...", ""),
    ],
)
def test_normalize_answer(raw: str, normalised: str) -> None:
    assert normalize_answer(raw) == normalised


def _q(answer: str, aliases: tuple[str, ...] = (), gold: tuple[str, ...] = ()) -> Question:
    return Question(id="q", question="?", answer=answer, aliases=aliases, supporting_ids=gold)


@pytest.mark.parametrize(
    ("answer", "aliases", "texts", "found"),
    [
        ("Halden Institute", (), ["He directed the halden institute."], True),
        ("Halden Institute", (), ["He directed the Halden", "Institute later."], True),  # texts are joined
        ("Corvane", (), ["The Corvane Conservatory"], True),
        ("1881", (), ["in 18812 years"], False),  # whole words only
        ("Art", (), ["the article"], False),
        ("Twenty-three", (), ["twenty three people died"], True),
        ("Ilse Varga", ("Varga",), ["Professor Varga spoke"], True),
        ("The", (), ["the the the"], False),  # answers that normalise to nothing never match
        ("Anton Falk", (), [], False),
    ],
)
def test_answer_found(answer: str, aliases: tuple[str, ...], texts: list[str], found: bool) -> None:
    assert answer_found(_q(answer, aliases), texts) is found


def test_passage_recall() -> None:
    q = _q("x", gold=("a", "b", "c", "d"))
    assert passage_recall(q, []) == 0.0
    assert passage_recall(q, ["a"]) == 0.25
    assert passage_recall(q, ["a", "a", "b", "zzz"]) == 0.5, "repeats count once"
    assert passage_recall(q, ["d", "c", "b", "a"]) == 1.0
    assert passage_recall(_q("x"), ["a"]) == 0.0, "no gold passages"


def test_doc_ids_of_prefers_metadata() -> None:
    results = [
        Retrieved(id="ignored::0", text="", score=1.0, metadata={"doc_id": "real"}),
        Retrieved(id="doc-b::3", text="", score=0.5),
        Retrieved(id="plain", text="", score=0.1),
    ]
    assert doc_ids_of(results) == ["real", "doc-b", "plain"]


# ---------------------------------------------------------------- summaries


def _r(doc: str, text: str) -> Retrieved:
    return Retrieved(id=f"{doc}::0", text=text, score=0.0, metadata={"doc_id": doc})


def test_summarize_runs_on_hand_made_results() -> None:
    questions = [_q("Varga", gold=("a", "b")), _q("Halden", gold=("c",))]
    good = RunResult(
        name="good",
        results=[
            [_r("a", "Ilse Varga founded it"), _r("x", "one two"), _r("b", "three")],
            [_r("c", "the Halden Institute"), _r("y", "w " * 10)],
        ],
        latency_ms=[10.0, 30.0],
        latency_no_embed_ms=[1.0, 3.0],
        build_seconds=2.5,
        extra={"entities": 7},
    )
    bad = RunResult(
        name="bad",
        results=[[_r("x", "nothing here")], []],
        latency_ms=[5.0, 5.0],
    )
    rows = summarize_runs(questions, [good, bad], ks=[1, 2, 5])
    assert [r["strategy"] for r in rows] == ["good", "bad"]
    g, b = rows
    assert g["recall@1"] == pytest.approx((0.5 + 1.0) / 2)
    assert g["recall@2"] == pytest.approx((0.5 + 1.0) / 2)
    assert g["recall@5"] == pytest.approx((1.0 + 1.0) / 2)
    assert g["answer_recall@5"] == 1.0
    assert g["context_words@5"] == pytest.approx(((4 + 2 + 1) + (3 + 10)) / 2)
    assert g["p50_ms"] == pytest.approx(20.0)
    assert g["p95_ms"] == pytest.approx(29.0)
    assert g["p50_no_embed_ms"] == pytest.approx(2.0)
    assert g["build_s"] == 2.5
    assert g["entities"] == 7
    assert b["recall@5"] == 0.0
    assert b["answer_recall@5"] == 0.0
    assert b["context_words@5"] == pytest.approx(1.0)
    assert "p50_no_embed_ms" not in b
    table = markdown_table(rows, ["strategy", "recall@5", "p50_no_embed_ms"])
    assert table.splitlines()[0] == "| strategy | recall@5 | p50_no_embed_ms |"
    assert "| bad | 0.000 | - |" in table


def test_summarize_runs_rejects_mismatched_lengths() -> None:
    run = RunResult(name="short", results=[[]], latency_ms=[1.0])
    with pytest.raises(ValueError, match="zip"):
        summarize_runs([_q("a"), _q("b")], [run], ks=[1])


def test_run_strategy_collects_results_in_question_order() -> None:
    questions = [_q("a"), Question(id="q2", question="second", answer="b", aliases=(), supporting_ids=())]
    seen: list[str] = []
    by_vector: list[tuple[str, float]] = []
    ticks: list[int] = []

    def retrieve(text: str) -> list[Retrieved]:
        seen.append(text)
        return [_r(text, text)]

    def retrieve_by_vector(text: str, vec: np.ndarray) -> list[Retrieved]:
        by_vector.append((text, float(vec[0])))
        return []

    run = run_strategy(
        "fake",
        questions,
        retrieve,
        retrieve_by_vector,
        lambda text: np.array([len(text)], dtype=np.float32),
        build_seconds=1.5,
        progress=ticks.append,
    )
    assert seen == ["?", "second"]
    assert by_vector == [("?", 1.0), ("second", 6.0)]
    assert [r[0].text for r in run.results] == ["?", "second"]
    assert len(run.latency_ms) == len(run.latency_no_embed_ms) == 2
    assert run.build_seconds == 1.5
    assert ticks == [1, 1]


def test_sample_questions_is_seeded_and_bounded(tmp_path: Path) -> None:
    data = load_dataset(_dataset(tmp_path))
    everything = data.sample_questions(None)
    assert [q.id for q in everything] == [q.id for q in data.questions]
    one = data.sample_questions(1, seed=3)
    assert len(one) == 1
    assert one == data.sample_questions(1, seed=3)
    assert len(data.sample_questions(10_000)) == len(data.questions)
    with pytest.raises(ValueError, match="sample must be >= 1"):
        data.sample_questions(0)
