from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.text import (
    chunk_document,
    make_doc_id,
    normalize_entity,
    query_ngrams,
    sentence_windows,
    split_sentences,
)
from core.types import Document


def sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


# --------------------------------------------------------------------------- split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("   \n\t  ", []),
        ("One sentence", ["One sentence"]),
        ("Hello world. How are you? Fine!", ["Hello world.", "How are you?", "Fine!"]),
        ("Mr. Smith met Dr. Jones. They talked.", ["Mr. Smith met Dr. Jones.", "They talked."]),
        ("Pi is 3.14 today. Yes.", ["Pi is 3.14 today.", "Yes."]),
        ("J. R. R. Tolkien wrote books. He died.", ["J. R. R. Tolkien wrote books.", "He died."]),
        ("The U.S. Army marched. It rained.", ["The U.S. Army marched.", "It rained."]),
        ("He moved to the U.S. The next year was good.", ["He moved to the U.S.", "The next year was good."]),
        ("Use fruit, e.g. Apples and Pears. Done.", ["Use fruit, e.g. Apples and Pears.", "Done."]),
        ("Apples, pears, etc. are fruit. Done.", ["Apples, pears, etc. are fruit.", "Done."]),
        ("Visit St. Louis now. Then go.", ["Visit St. Louis now.", "Then go."]),
        ("See No. 5 here. Fine.", ["See No. 5 here.", "Fine."]),
        ("Wait... what? OK.", ["Wait... what?", "OK."]),
        ("I wonder... The answer is no.", ["I wonder...", "The answer is no."]),
        ('She said "Stop." Then he left.', ['She said "Stop."', "Then he left."]),
        ('"Stop." he said.', ['"Stop." he said.']),
        ("It ended (finally.) Next one.", ["It ended (finally.)", "Next one."]),
        ("Really?! Yes.", ["Really?!", "Yes."]),
        (
            "A title\nFirst line. Second line.\n\n  Last para  ",
            ["A title", "First line.", "Second line.", "Last para"],
        ),
        ("Windows\r\nline endings", ["Windows", "line endings"]),
        ("Visit example.com today. Done.", ["Visit example.com today.", "Done."]),
        ("In 1999. 2000 was next.", ["In 1999.", "2000 was next."]),
    ],
)
def test_split_sentences_examples(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


def test_split_sentences_offsets_are_exact() -> None:
    text = "  First one.   Second one!\n\nThird  "
    spans = split_sentences(text)
    assert spans == [(2, 12), (15, 26), (28, 33)]


@given(st.text(alphabet=st.sampled_from(list("ab A.!?\n'\")(3 \u2026\t")), max_size=200))
def test_split_sentences_properties(text: str) -> None:
    spans = split_sentences(text)
    prev_end = 0
    covered: set[int] = set()
    for s, e in spans:
        assert prev_end <= s < e <= len(text)
        piece = text[s:e]
        assert piece == piece.strip()
        assert "\n" not in piece
        covered.update(range(s, e))
        prev_end = e
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


# --------------------------------------------------------------------------- chunk_document


def check_chunks(doc: Document, doc_id: str, size: int, overlap: int) -> None:
    chunks = chunk_document(doc, doc_id=doc_id, chunk_size=size, chunk_overlap=overlap)
    text = doc.text
    covered: set[int] = set()
    for i, c in enumerate(chunks):
        assert c.order == i
        assert c.id == f"{doc_id}::{i}"
        assert c.doc_id == doc_id
        assert c.text == text[c.start : c.end]
        assert 0 < c.end - c.start <= size
        assert c.text == c.text.strip()
        assert c.metadata == dict(doc.metadata)
        covered.update(range(c.start, c.end))
        if i:
            prev = chunks[i - 1]
            assert prev.start < c.start
            assert prev.end < c.end
            assert prev.end - c.start <= overlap  # shared characters (negative when disjoint)
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
    again = chunk_document(doc, doc_id=doc_id, chunk_size=size, chunk_overlap=overlap)
    assert again == chunks


@given(
    text=st.text(
        alphabet=st.one_of(
            st.sampled_from(list("  .!?\n\"'")),
            st.sampled_from(list("abcXYZ")),
            st.characters(codec="utf-8"),
        ),
        max_size=400,
    ),
    size=st.integers(1, 120),
    data=st.data(),
)
def test_chunk_invariants_random(text: str, size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(0, size - 1))
    check_chunks(Document(text=text, metadata={"k": 1}), "doc", size, overlap)


PROSE = (
    "Marie Curie was a physicist. She worked in Paris with Pierre Curie. "
    "Dr. Curie won two Nobel prizes, in 1903 and 1911. "
    "Her work on radioactivity changed science forever!\n\n"
    "The U.S. honoured her in 1921. She died in 1934."
)


@pytest.mark.parametrize(("size", "overlap"), [(1, 0), (10, 3), (40, 0), (60, 30), (80, 79), (512, 64)])
def test_chunk_invariants_prose(size: int, overlap: int) -> None:
    check_chunks(Document(text=PROSE * 3), "p", size, overlap)


def test_chunks_pack_whole_sentences_and_overlap() -> None:
    text = "Aaaa aaa. Bbbb bbb. Cccc ccc. Dddd ddd."
    chunks = chunk_document(Document(text=text), doc_id="d", chunk_size=20, chunk_overlap=10)
    assert [c.text for c in chunks] == [
        "Aaaa aaa. Bbbb bbb.",
        "Bbbb bbb. Cccc ccc.",
        "Cccc ccc. Dddd ddd.",
    ]


@pytest.mark.parametrize(
    ("overlap", "second"), [(9, "Bbbb bbb. Cccc ccc."), (8, "Cccc ccc."), (1, "Cccc ccc.")]
)
def test_overlap_budget_is_exact(overlap: int, second: str) -> None:
    # "Bbbb bbb." is 9 characters: it is repeated only when the budget allows 9 characters.
    text = "Aaaa aaa. Bbbb bbb. Cccc ccc."
    chunks = chunk_document(Document(text=text), doc_id="d", chunk_size=20, chunk_overlap=overlap)
    assert [c.text for c in chunks] == ["Aaaa aaa. Bbbb bbb.", second]


def test_chunks_without_overlap_are_disjoint() -> None:
    text = "Aaaa aaa. Bbbb bbb. Cccc ccc. Dddd ddd."
    chunks = chunk_document(Document(text=text), doc_id="d", chunk_size=20, chunk_overlap=0)
    assert [c.text for c in chunks] == ["Aaaa aaa. Bbbb bbb.", "Cccc ccc. Dddd ddd."]


def test_long_sentence_is_split_at_words_and_long_word_hard() -> None:
    text = "alpha beta gamma delta " + "x" * 25 + " omega."
    chunks = chunk_document(Document(text=text), doc_id="d", chunk_size=12, chunk_overlap=0)
    assert [c.text for c in chunks] == ["alpha beta", "gamma delta", "x" * 12, "x" * 12, "x omega."]


def test_whole_document_in_one_chunk_and_metadata_copied() -> None:
    meta = {"source": "wiki"}
    doc = Document(text="One. Two.", metadata=meta)
    chunks = chunk_document(doc, doc_id="abc")
    assert len(chunks) == 1
    chunk = chunks[0]
    assert (chunk.id, chunk.text, chunk.start, chunk.end) == ("abc::0", "One. Two.", 0, 9)
    assert chunk.metadata == meta
    assert chunk.metadata is not meta


def test_chunks_follow_sections_and_whole_paragraphs() -> None:
    text = (
        "Falcon\nFalcon is a rocket. It flies.\n\n"  # a section: heading and paragraph
        "Zeta\nZeta is a project. It costs money.\n\n"  # the next section starts a chunk
        "Aaaa aaa aaa. Bbbb bbb bbb.\n\nCccc ccc ccc ccc ccc ccc."  # paragraphs of no heading
    )
    chunks = chunk_document(Document(text=text), doc_id="d", chunk_size=60, chunk_overlap=20)
    assert [c.text for c in chunks] == [
        "Falcon\nFalcon is a rocket. It flies.",
        "Zeta\nZeta is a project. It costs money.",  # the next paragraph would not fit whole
        "Aaaa aaa aaa. Bbbb bbb bbb.\n\nCccc ccc ccc ccc ccc ccc.",  # paragraphs that fit share one
    ]
    # a paragraph that fits a chunk is never cut: the chunk ends before it
    text = "Aaaa aaa. Bbbb bbb.\n\nCccc ccc ccc. Dddd ddd ddd."
    chunks = chunk_document(Document(text=text), doc_id="d", chunk_size=30, chunk_overlap=10)
    assert [c.text for c in chunks] == ["Aaaa aaa. Bbbb bbb.", "Cccc ccc ccc. Dddd ddd ddd."]


@pytest.mark.parametrize("text", ["", "   \n\n  "])
def test_empty_document_gives_no_chunks(text: str) -> None:
    assert chunk_document(Document(text=text), doc_id="d") == []


@pytest.mark.parametrize(
    ("size", "overlap", "match"),
    [(0, 0, "chunk_size must be >= 1"), (10, 10, "lower chunk_overlap"), (10, -1, "chunk_overlap")],
)
def test_chunk_argument_validation(size: int, overlap: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        chunk_document(Document(text="x"), doc_id="d", chunk_size=size, chunk_overlap=overlap)


# --------------------------------------------------------------------------- sentence_windows


def test_sentence_windows_examples() -> None:
    assert sentence_windows(0, 4) == []
    assert sentence_windows(3, 4) == [(0, 3)]
    assert sentence_windows(4, 4) == [(0, 4)]
    assert sentence_windows(10, 4) == [(0, 4), (2, 6), (4, 8), (6, 10)]
    assert sentence_windows(9, 4, 3) == [(0, 4), (3, 7), (5, 9)]
    assert sentence_windows(3, 1) == [(0, 1), (1, 2), (2, 3)]


@given(n=st.integers(0, 200), size=st.integers(1, 30), data=st.data())
def test_sentence_windows_properties(n: int, size: int, data: st.DataObject) -> None:
    stride = data.draw(st.one_of(st.none(), st.integers(1, size)))
    windows = sentence_windows(n, size, stride)
    if n == 0:
        assert windows == []
        return
    step = max(1, size // 2) if stride is None else stride
    assert windows[0][0] == 0
    assert windows[-1][1] == n
    assert len(set(windows)) == len(windows)
    covered: set[int] = set()
    for i, (a, b) in enumerate(windows):
        assert 0 <= a < b <= n
        assert b - a == min(size, n)
        covered.update(range(a, b))
        if i:
            assert a > windows[i - 1][0]
            if i < len(windows) - 1:
                assert a - windows[i - 1][0] == step
    assert covered == set(range(n))


@pytest.mark.parametrize(
    ("n", "size", "stride", "match"),
    [(-1, 2, None, "n_sentences"), (5, 0, None, "size must"), (5, 2, 0, "stride"), (5, 2, 3, "<= size")],
)
def test_sentence_windows_validation(n: int, size: int, stride: int | None, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sentence_windows(n, size, stride)


# --------------------------------------------------------------------------- normalize_entity


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("The Beatles'", "beatles"),
        ("Marie Curie's", "marie curie"),
        ("Marie Curie\u2019s", "marie curie"),
        ("  U.S.  ", "us"),
        ("the U.S.A.", "usa"),
        ("Jean-Paul  Sartre", "jean-paul sartre"),
        ("- dash -", "dash"),
        ("O'Brien", "o brien"),
        ("University of Paris", "university of paris"),
        ("A Tribe Called Quest", "tribe called quest"),
        ("An", "an"),
        ("the", "the"),
        ("Stra\u00dfe", "strasse"),
        ("\ufb01nance", "finance"),
        ("New_York!!", "new york"),
        ("", ""),
        ("...", ""),
    ],
)
def test_normalize_entity(name: str, expected: str) -> None:
    assert normalize_entity(name) == expected


@given(st.text(max_size=60))
def test_normalize_entity_is_idempotent_and_clean(name: str) -> None:
    once = normalize_entity(name)
    assert once == once.strip()
    assert "  " not in once
    assert not re.search(r"[^\w\s-]|_", once)
    if once not in ("the", "a", "an"):
        assert normalize_entity(once) == once


# --------------------------------------------------------------------------- query_ngrams


def test_query_ngrams_order_and_content() -> None:
    grams = query_ngrams("Who was Marie Curie's husband?", max_n=3)
    assert grams == [
        "who was marie",
        "was marie curie",
        "marie curie husband",
        "who was",
        "was marie",
        "marie curie",
        "curie husband",
        "who",
        "was",
        "marie",
        "curie",
        "husband",
    ]


def test_query_ngrams_unique_and_bounded() -> None:
    grams = query_ngrams("the cat and the cat and the cat", max_n=2)
    assert len(grams) == len(set(grams))
    assert grams == ["the cat", "cat and", "and the", "the", "cat", "and"]
    assert query_ngrams("", 4) == []
    assert query_ngrams("?!", 4) == []
    assert query_ngrams("U.S. army", 4) == ["us army", "us", "army"]


@given(st.text(max_size=80), st.integers(1, 5))
def test_query_ngrams_properties(text: str, max_n: int) -> None:
    grams = query_ngrams(text, max_n)
    assert len(grams) == len(set(grams))
    lengths = [len(g.split(" ")) for g in grams]
    assert lengths == sorted(lengths, reverse=True)
    assert all(1 <= n <= max_n for n in lengths)
    assert grams == query_ngrams(text, max_n)


def test_query_ngrams_validation() -> None:
    with pytest.raises(ValueError, match="max_n"):
        query_ngrams("x", 0)


# --------------------------------------------------------------------------- make_doc_id


def test_make_doc_id() -> None:
    assert make_doc_id("hello") == hashlib.sha1(b"hello").hexdigest()[:16] == "aaf4c61ddcc5e8a2"
    assert make_doc_id("hello") != make_doc_id("hello!")
    assert re.fullmatch(r"[0-9a-f]{16}", make_doc_id("\u00e9t\u00e9"))
