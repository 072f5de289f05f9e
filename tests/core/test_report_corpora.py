"""Corpora of long documents (reports) in the benchmark: reading, shaping, per-type recall."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.evaluation.metrics import (
    MULTI_DOCUMENT,
    Question,
    load_dataset,
    load_passages,
    question_groups,
    recall_by_group,
)
from core.evaluation.shapes import CorpusShape, shaped_documents
from core.types import Retrieved

PARAGRAPHS = [
    {"id": "b-1", "document": "beta", "position": 1, "text": "Beta Ltd paid a dividend of 3 million."},
    {"id": "a-0", "document": "alpha", "position": 0, "text": "Alpha Corp makes bicycles."},
    {"id": "b-0", "document": "beta", "position": 0, "text": "Beta Ltd sells tea."},
    {"id": "a-1", "document": "alpha", "position": 1, "text": "Alpha Corp paid no dividend."},
]
QUESTIONS = [
    {
        "id": "q1",
        "question": "What does Alpha make?",
        "answer": "bicycles",
        "supporting_ids": ["a-0"],
        "type": "Factual",
        "documents": ["alpha"],
    },
    {
        "id": "q2",
        "question": "Compare the dividends.",
        "answer": "x",
        "supporting_ids": ["a-1", "b-1"],
        "type": "Comparison",
        "documents": ["alpha", "beta"],
    },
    {
        "id": "q3",
        "question": "What does Beta sell?",
        "answer": "tea",
        "supporting_ids": ["b-0"],
        "type": "Factual",
        "documents": ["beta"],
    },
]


def _write(folder: Path, passages: list[dict[str, object]], questions: list[dict[str, object]]) -> Path:
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps(p) + "\n" for p in passages))
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    return folder


def test_a_corpus_of_documents_reads_each_in_paragraph_order(tmp_path: Path) -> None:
    data = load_dataset(_write(tmp_path / "reports", PARAGRAPHS, QUESTIONS))
    assert data.has_documents
    assert [p["id"] for p in data.passages] == ["b-0", "b-1", "a-0", "a-1"]
    assert all(p["title"] == "" for p in data.passages)
    assert data.questions[1].type == "Comparison"
    assert data.questions[1].documents == ("alpha", "beta")


def test_mixed_or_ambiguous_corpora_are_refused(tmp_path: Path) -> None:
    mixed = [*PARAGRAPHS, {"id": "t", "title": "T", "text": "x"}]
    path = _write(tmp_path / "mixed", mixed, QUESTIONS) / "corpus.jsonl"
    with pytest.raises(ValueError, match="one kind of line"):
        load_passages(path)
    twice = [*PARAGRAPHS, {"id": "a-9", "document": "alpha", "position": 0, "text": "again"}]
    path = _write(tmp_path / "twice", twice, QUESTIONS) / "corpus.jsonl"
    with pytest.raises(ValueError, match="two paragraphs at one position"):
        load_passages(path)


def test_each_report_is_one_document_and_gold_follows_its_paragraphs(tmp_path: Path) -> None:
    data = load_dataset(_write(tmp_path / "reports", PARAGRAPHS, QUESTIONS))
    docs, attribution = shaped_documents(data.passages, CorpusShape.of_documents(), seed=0)
    by_id = {str(d.id): d for d in docs}
    assert set(by_id) == {"alpha", "beta"}
    assert by_id["beta"].text == "Beta Ltd sells tea.\n\nBeta Ltd paid a dividend of 3 million."
    assert by_id["beta"].metadata == {"source": "beta"}
    chunk = Retrieved(
        id="beta::1", text="Beta Ltd paid a dividend of 3 million.", score=1.0, metadata={"doc_id": "beta"}
    )
    assert attribution([chunk]) == ["b-1"]
    with pytest.raises(ValueError, match="documents 'own'"):
        shaped_documents(data.passages, CorpusShape("none"), seed=0)
    with pytest.raises(ValueError, match="name their document"):
        shaped_documents([{"id": "p", "title": "T", "text": "x"}], CorpusShape.of_documents(), seed=0)
    with pytest.raises(ValueError, match="no titles"):
        CorpusShape("meta", "own")


def _questions() -> list[Question]:
    return [
        Question(
            id=str(q["id"]),
            question=str(q["question"]),
            answer="",
            aliases=(),
            supporting_ids=tuple(q["supporting_ids"]),
            type=str(q["type"]),
            documents=tuple(q["documents"]),
        )
        for q in QUESTIONS
    ]


def _hit(pid: str) -> Retrieved:
    return Retrieved(id=pid, text="", score=1.0, metadata={"doc_id": pid})


def test_recall_by_type_and_over_multi_document_questions() -> None:
    questions = _questions()
    assert question_groups(questions) == {"Factual": [0, 2], "Comparison": [1], MULTI_DOCUMENT: [1]}

    results = [[_hit("a-0")], [_hit("a-1"), _hit("x")], [_hit("x")]]
    got = recall_by_group(questions, results, 5)
    assert got["Factual"] == {"questions": 2.0, "recall": 0.5}
    assert got["Comparison"]["recall"] == 0.5
    assert got[MULTI_DOCUMENT]["recall"] == 0.5
    untyped = [Question(id="u", question="?", answer="", aliases=(), supporting_ids=("a",))]
    assert recall_by_group(untyped, [[_hit("a")]], 5) == {}


def test_the_report_prints_recall_by_question_type() -> None:
    from core.evaluation.metrics import RunResult, summarize_runs
    from core.evaluation.result import ComparisonResult

    questions = _questions()

    runs = [
        RunResult(name="dense", results=[[_hit("a-0")], [_hit("a-1")], [_hit("b-0")]], latency_ms=[1.0] * 3),
        RunResult(
            name="bridge",
            results=[[_hit("x")], [_hit("a-1"), _hit("b-1")], [_hit("b-0")]],
            latency_ms=[1.0] * 3,
        ),
    ]
    rows = summarize_runs(questions, runs, ks=[5], answer_k=5)
    result = ComparisonResult(
        dataset="reports", questions=3, passages=4, chunks=2, seed=0, k=5, embedder="e", date="d", rows=rows
    )
    table = result.type_table().splitlines()
    assert table[0] == "| question type (R@5) | n | dense | bridge |"
    assert "| Factual | 2 | 100.0 | 50.0 |" in table
    assert "| Comparison | 1 | 50.0 | 100.0 |" in table
    assert f"| {MULTI_DOCUMENT} | 1 | 50.0 | 100.0 |" in table
