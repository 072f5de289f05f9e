"""Corpus shapes of the benchmarks (core.evaluation.shapes): titles moved or removed, passages grouped."""

from __future__ import annotations

import pytest

from core.evaluation.shapes import CorpusShape, PassageAttribution, shaped_documents
from core.types import Retrieved

PASSAGES = [
    {"id": f"p{i}", "title": f"Title {i}", "text": f"Subject {i} is a thing. It has property {i}."}
    for i in range(7)
]


def test_titles_meta_text_and_none() -> None:
    meta, _ = shaped_documents(PASSAGES, CorpusShape("meta"), seed=3)
    text, _ = shaped_documents(PASSAGES, CorpusShape("text"), seed=3)
    none, attribution = shaped_documents(PASSAGES, CorpusShape("none"), seed=3)
    assert [d.id for d in meta] == [d.id for d in text] == [d.id for d in none], "same shuffled order"
    assert sorted(d.id for d in meta) == sorted(p["id"] for p in PASSAGES)
    by_id = {p["id"]: p for p in PASSAGES}
    for m, t, n in zip(meta, text, none, strict=True):
        p = by_id[str(m.id)]
        assert m.metadata == {"title": p["title"]}
        assert m.text == f"{p['title']}\n{p['text']}"
        assert t.metadata == {}
        assert t.text == m.text
        assert n.metadata == {}
        assert n.text == p["text"]
    hit = Retrieved(id="p3::0", text="x", score=1.0, metadata={"doc_id": "p3"})
    assert attribution([hit]) == ["p3"]


def test_grouped_documents_and_the_passages_a_unit_stands_for() -> None:
    docs, attribution = shaped_documents(PASSAGES, CorpusShape("text", "grouped", sections=3), seed=0)
    assert [len(d.text.split("\n\n")) for d in docs] == [3, 3, 1]
    assert all(d.metadata == {"source": d.id} for d in docs)
    first = docs[0]
    sections = first.text.split("\n\n")
    assert all(s.startswith("Title ") for s in sections), "each section starts with its heading"
    ids = [next(p["id"] for p in PASSAGES if s.startswith(p["title"] + "\n")) for s in sections]
    # a unit holding one whole section and half a sentence of the next counts for the first only
    unit = Retrieved(id=f"{first.id}::0", text=sections[0] + "\n\n" + sections[1][:12], score=1.0)
    assert attribution([unit]) == [ids[0]]
    both = Retrieved(id=f"{first.id}::1", text=sections[1] + "\n\n" + sections[2], score=1.0)
    assert attribution([unit, both]) == ids
    tiny = Retrieved(id=f"{first.id}::2", text=sections[2].split("\n")[1].split(". ")[0] + ".", score=1.0)
    assert attribution([tiny]) == [ids[2]], "a unit that is mostly one passage counts for it"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"titles": "body"}, "titles must be one of meta, text, none"),
        ({"documents": "pages"}, "documents must be one of passages, grouped"),
        ({"documents": "grouped", "sections": 1}, "sections must be an int >= 2"),
        ({"documents": "grouped"}, "use titles 'text'"),
    ],
)
def test_bad_shapes_say_what_to_do(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CorpusShape(**kwargs)  # type: ignore[arg-type]


def test_labels() -> None:
    assert CorpusShape().label() == "titles in metadata and text, one document per passage"
    assert CorpusShape("none", "grouped", 20).label() == "titles removed, 20-section documents"
    assert PassageAttribution()([]) == []
