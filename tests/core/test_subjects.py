"""What a unit is about without a title (core.strategies.subjects) and the text rules under it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.strategies.subjects import aliases, lead_subject, name_variants, unit_subjects
from core.text import heading_text, longest_names


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("By the Beautiful Sea is a popular song written in 1914.", "By the Beautiful Sea"),
        (
            "Harry Carroll (November 28, 1892 - December 26, 1962) was an American songwriter.",
            "Harry Carroll",
        ),
        ("The Beatles were an English rock band.", "The Beatles"),
        ("Comedians in Cars Getting Coffee is an American web series.", "Comedians in Cars Getting Coffee"),
        (
            "A Maori Maid's Love (originally titled The Surveyor's Daughter) is a 1916 film.",
            "A Maori Maid's Love",
        ),
        ("Taylor Field, now an industrial park, was an airport.", "Taylor Field"),
        ("The Atbarah River (Nahr 'Atbarah) in northeast Africa rises in Ethiopia.", "Atbarah River"),
        ("Conall mac Comgaill was king of Dal Riata.", "Conall mac Comgaill"),
        ("Acme builds Falcon rockets in Ohio.", "Acme"),
        ("The climate of New Delhi is a monsoon-influenced humid subtropical climate.", "New Delhi"),
        ("Apollo 11 was the first crewed landing.", "Apollo 11"),
        # no name opens these sentences
        ("In 1990, he moved to Paris.", None),
        ("He was born in Paris.", None),
        ("It was a cold winter.", None),
        ("The station is licensed to the town.", None),
        ("On 6 April the Committee of Public Safety was created.", None),
        ("After Charles II of England was restored to the throne, he rewarded them.", None),
        ("Harker's fiancee, Mina Murray, is staying with her friend.", None),
        ("Similarly, movies often revert to clichés.", None),
        ("1984 is a novel by George Orwell.", None),
        ("", None),
    ],
)
def test_lead_subject(sentence: str, expected: str | None) -> None:
    assert lead_subject(sentence) == expected


def test_aliases_and_name_variants() -> None:
    assert aliases(
        "Eric Marlon Bishop (born December 13, 1967), known professionally as Jamie Foxx, is an actor."
    ) == ["Jamie Foxx"]
    assert aliases("Mel Stuart (born Stuart Solomon; September 2, 1928) was a director.") == [
        "Stuart Solomon"
    ]
    assert aliases("Paris is the capital of France.") == []
    assert name_variants("Stephen T. Kay") == ["Stephen Kay"]
    assert name_variants("Harry Jack Revier") == ["Harry Revier", "Jack Revier"]
    assert name_variants("Ada Lovelace") == []
    assert name_variants("University of Paris") == []  # a connector: not a personal name


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Ned Kelly (1970 film)", "Ned Kelly (1970 film)"),
        ("## Getting started", "Getting started"),
        ("Installation", "Installation"),
        ("This line is a sentence.", None),
        ("- a list item", None),
        ("1. Numbered item", None),
        ("lowercase start", None),
        ("One two three four five six seven eight nine ten eleven twelve thirteen", None),
        ("", None),
    ],
)
def test_heading_text(line: str, expected: str | None) -> None:
    assert heading_text(line) == expected


def test_a_title_or_heading_says_what_a_document_is_about() -> None:
    docs = ["a", "b", "b", "c"]
    texts = [
        "Falcon\nFalcon is a rocket built in Ohio.",  # first line heads the document
        "Annual report\n\nSales rose by a third.",
        "Costs\nCosts fell. Acme Corp hired staff.",  # a section heading further on
        "Plain text that names nobody at its start. Then Dana Reyes arrived.",
    ]
    metas = [{}, {"title": "Acme 2024"}, {"title": "Acme 2024"}, {}]
    falcon, report, costs, plain = unit_subjects(docs, texts, metas)
    assert falcon.title == "Falcon"
    assert falcon.about == ("Falcon",)
    assert report.title == "Acme 2024"
    assert "Sales" not in report.about
    assert costs.about == ("Acme 2024", "Costs"), "the section heading, not its paragraphs' leads"
    assert plain.title is None
    assert plain.about == ()


def test_lead_subjects_without_titles_or_headings() -> None:
    docs = ["a", "a", "b"]
    texts = [
        "Marie Curie was a physicist and chemist.\n\nPierre Curie was her husband.",
        "She won two Nobel prizes. The Sorbonne honoured her.",  # continues the document mid-paragraph
        "Revenue was up.\nRevenue grew in the north. The revenue of Acme rose.",
    ]
    first, rest, other = unit_subjects(docs, texts, [{}] * 3, [["Marie Curie"], [], []])
    assert first.title == "Marie Curie"
    assert first.about == ("Marie Curie", "Pierre Curie")
    assert rest.about == ("Marie Curie",), "a unit that continues its document shares its subject"
    assert other.title is None, "'Revenue' occurs in lowercase: a common noun, not a name"


def test_single_word_leads_need_the_extractor_or_no_lowercase_use() -> None:
    texts = ["Garbo is a 1992 comedy film.", "Sales rose in May. Our sales team grew."]
    garbo, sales = unit_subjects(["g", "s"], texts, [{}, {}])
    assert garbo.title == "Garbo"
    assert sales.title is None
    (known,) = unit_subjects(["p"], ["Paris is a city with many parks."], [{}], [["Paris"]])
    assert known.title == "Paris"


def test_unit_subjects_checks_lengths() -> None:
    with pytest.raises(ValueError, match="2 document ids, 1 texts and 1 metadatas"):
        unit_subjects(["a", "b"], ["x"], [{}])
    with pytest.raises(ValueError, match="and 0 entity lists"):
        unit_subjects(["a"], ["x"], [{}], [])


def test_longest_names_prefers_the_longer_name_at_each_place() -> None:
    names = {"oklahoma", "oklahoma city", "city"}
    assert longest_names("Oklahoma City lies in Oklahoma.", names.__contains__) == [
        "oklahoma city",
        "oklahoma",
    ]
    assert longest_names("", names.__contains__) == []
    with pytest.raises(ValueError, match="max_n must be >= 1"):
        longest_names("x", names.__contains__, 0)


@given(st.text(max_size=200))
def test_subject_rules_never_fail_on_any_text(text: str) -> None:
    lead = lead_subject(text)
    assert lead is None or (lead and len(lead.split()) <= 10)
    heading_text(text)
    aliases(text)
    (unit,) = unit_subjects(["d"], [text], [{}])
    assert all(isinstance(a, str) and a for a in unit.about)


def test_a_documents_units_need_not_be_neighbours() -> None:
    texts = ["Falcon\nFalcon is a rocket.", "Zeta is a project.", "It flies."]
    first, other, rest = unit_subjects(["a", "b", "a"], texts, [{}] * 3)
    assert first.title == rest.title == "Falcon"
    assert other.title == "Zeta"
