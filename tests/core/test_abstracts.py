"""Tests for core.strategies.bridge.abstracts.AbstractWriter and LLM summaries inside a Bridge-RAG build."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from core.entities import EntityExtractor
from core.llm import CallableLLM
from core.store import ChunkStore
from core.strategies.bridge import BridgeRAG
from core.strategies.bridge.abstracts import AbstractWriter
from core.types import Document
from tests.core.conftest import hash_embedder

TEXTS = [
    "Ilse Varga founded the Marrowick Observatory in 1874. She discovered a comet in 1881.",
    "Anton Falk built the telescope. It was ground in Corvane.",
    "   ",
    "Tomas Brel studied under Varga! He later directed the Halden Institute.",
]


class ScriptedLLM:
    """Answers from a script: str answers are returned, exceptions raised; records prompts."""

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> Any:
        self.prompts.append(prompt)
        answer = self.script[(len(self.prompts) - 1) % len(self.script)]
        if isinstance(answer, BaseException):
            raise answer
        return answer


# ---------------------------------------------------------------- extractive


def test_extractive_takes_lead_sentences_in_order() -> None:
    w = AbstractWriter(max_words=60)
    summary = w.extractive(TEXTS)
    assert summary == (
        "Ilse Varga founded the Marrowick Observatory in 1874. Anton Falk built the telescope. "
        "Tomas Brel studied under Varga!"
    )
    assert w.llm_calls == 0
    assert w.llm_failures == 0


def test_extractive_is_deterministic() -> None:
    a = AbstractWriter(max_words=12)
    b = AbstractWriter(max_words=12)
    ents = ["varga", "corvane", "varga"]
    assert a.extractive(TEXTS, ents) == a.extractive(TEXTS, ents) == b.extractive(list(TEXTS), tuple(ents))
    assert a.write(TEXTS) == b.extractive(TEXTS)


@pytest.mark.parametrize("max_words", [5, 8, 13, 60])
def test_extractive_respects_word_cap(max_words: int) -> None:
    summary = AbstractWriter(max_words=max_words).extractive(TEXTS * 5, ["marrowick"] * 3)
    words = summary.split()
    if words[-1] == "...":
        assert len(words) == max_words + 1
    else:
        assert len(words) <= max_words


def test_word_cap_marks_truncation() -> None:
    summary = AbstractWriter(max_words=5).extractive(["one two three four five six seven."])
    assert summary == "one two three four five ..."
    exact = AbstractWriter(max_words=5).extractive(["one two three four five."])
    assert exact == "one two three four five."


def test_entities_head_lists_the_most_frequent_first() -> None:
    ents = ["corvane", "varga", "varga", "halden institute", "aa", "bb", "cc", "varga", "corvane"]
    summary = AbstractWriter(max_words=60).extractive(["Short text."], ents)
    assert summary == "About: varga, corvane, halden institute, aa, bb. Short text."  # only the top five


def test_whitespace_collapses_and_empty_input() -> None:
    w = AbstractWriter(max_words=10)
    assert w.extractive(["  Alpha   beta\n\ngamma.  "]) == "Alpha beta"
    assert w.extractive([]) == ""
    assert w.extractive(["   ", ""]) == ""


def test_text_without_sentence_end_is_kept_whole() -> None:
    assert AbstractWriter().extractive(["no terminator here"]) == "no terminator here"


@pytest.mark.parametrize("max_words", [4, 0, -1])
def test_max_words_below_five_is_rejected(max_words: int) -> None:
    with pytest.raises(ValueError, match="max_words must be >= 5"):
        AbstractWriter(max_words=max_words)


# ---------------------------------------------------------------- with an LLM


def test_llm_summary_is_used_and_prompt_carries_the_texts() -> None:
    llm = ScriptedLLM(["  Varga founded an observatory; Falk built its telescope.  "])
    w = AbstractWriter(max_words=20, llm=CallableLLM(llm))
    assert w.write(TEXTS) == "Varga founded an observatory; Falk built its telescope."
    assert (w.llm_calls, w.llm_failures) == (1, 0)
    prompt = llm.prompts[0]
    assert "at most 20 words" in prompt
    assert "Anton Falk built the telescope." in prompt
    assert "Tomas Brel studied under Varga!" in prompt


def test_llm_answer_is_capped_at_twice_max_words() -> None:
    w = AbstractWriter(max_words=5, llm=CallableLLM(lambda _: " ".join(f"w{i}" for i in range(50))))
    out = w.write(TEXTS).split()
    assert out[-1] == "..."
    assert len(out) == 11


def test_prompt_body_is_bounded() -> None:
    llm = ScriptedLLM(["ok summary"])
    w = AbstractWriter(llm=CallableLLM(llm))
    w.write(["word " * 5000])
    assert len(llm.prompts[0]) < 6500


@pytest.mark.parametrize(
    "bad",
    [
        RuntimeError("rate limited"),
        TimeoutError("slow"),
        ValueError("bad request"),
        "",
        "   \n\t",
        None,  # not text: CallableLLM raises TypeError
        42,
        {"summary": "a dict is not text"},
    ],
    ids=["runtime", "timeout", "value", "empty", "blank", "none", "int", "dict"],
)
def test_llm_failure_falls_back_to_extractive(bad: Any) -> None:
    w = AbstractWriter(max_words=30, llm=CallableLLM(ScriptedLLM([bad])))
    out = w.write(TEXTS, ["varga"])
    assert out == AbstractWriter(max_words=30).extractive(TEXTS, ["varga"])
    assert (w.llm_calls, w.llm_failures) == (1, 1)


def test_mixed_script_counts_calls_and_failures() -> None:
    llm = ScriptedLLM(["first summary", RuntimeError("down"), "", "fourth summary", 3.5])
    w = AbstractWriter(max_words=10, llm=CallableLLM(llm))
    outs = [w.write([f"Text number {i}. More."]) for i in range(5)]
    assert outs[0] == "first summary"
    assert outs[1] == "Text number 1."
    assert outs[2] == "Text number 2."
    assert outs[3] == "fourth summary"
    assert outs[4] == "Text number 4."
    assert (w.llm_calls, w.llm_failures) == (5, 3)


def test_keyboard_interrupt_is_not_swallowed() -> None:
    w = AbstractWriter(llm=CallableLLM(ScriptedLLM([KeyboardInterrupt()])))
    with pytest.raises(KeyboardInterrupt):
        w.write(TEXTS)


# ---------------------------------------------------------------- inside a build


DOCS = [
    Document(
        "Ilse Varga founded the Marrowick Observatory. Anton Falk built its telescope in Corvane.", id="a"
    ),
    Document("Tomas Brel studied under Ilse Varga. He later directed the Halden Institute.", id="b"),
    Document("Clara Penhallow collected orchids in the Tessel Valley. She married Tomas Brel.", id="c"),
    Document("The Great Flood of 1911 drowned Marrowick. Agnes Moor built the Moor Embankment.", id="d"),
    Document("Pieter Ashby was mayor of Marrowick. He started the Lantern Festival.", id="e"),
]


def _build(llm: Any, extractor: EntityExtractor, new_store: Callable[[], ChunkStore]) -> BridgeRAG:
    return BridgeRAG.from_documents(
        DOCS,
        embedder=hash_embedder(),
        entity_extractor=extractor,
        store=new_store(),
        llm=llm,
        branching=2,
        show_progress=False,
    )


def test_build_with_llm_reports_summaries_and_failures(
    extractor: EntityExtractor, new_store: Callable[[], ChunkStore]
) -> None:
    script = ScriptedLLM(["LLM SUMMARY", RuntimeError("boom"), ""])
    rag = _build(script, extractor, new_store)
    n_abstracts = rag.num_abstracts
    # every abstract (level 0 and the upper levels) is written by the LLM once
    assert len(script.prompts) == n_abstracts
    failures = sum(1 for i in range(n_abstracts) if i % 3 != 0)
    assert rag.report.counts["llm failures"] == failures
    assert rag.report.counts["llm summaries"] == n_abstracts - failures
    summaries = [rag.abstract(i)["summary"] for i in range(n_abstracts)]
    assert summaries.count("LLM SUMMARY") == n_abstracts - failures
    assert all(s.strip() for s in summaries), "failed calls fall back to non-empty extractive text"
    # a broken LLM never breaks retrieval
    assert rag.retrieve("Who built the telescope of the Marrowick Observatory?", k=2)


def test_build_without_llm_has_no_llm_counts(
    extractor: EntityExtractor, new_store: Callable[[], ChunkStore]
) -> None:
    rag = _build(None, extractor, new_store)
    assert "llm summaries" not in rag.report.counts
    assert "llm failures" not in rag.report.counts
    first = rag.abstract(0)
    assert first["level"] == 0
    assert first["summary"] == "Ilse Varga founded the Marrowick Observatory."
    top = rag.abstract(rag.num_abstracts - 1)
    assert top["level"] >= 1
    assert top["summary"].startswith("About: ")


def test_llm_accepts_plain_callable(extractor: EntityExtractor, new_store: Callable[[], ChunkStore]) -> None:
    rag = _build(lambda prompt: "plain callable summary", extractor, new_store)
    assert rag.report.counts["llm summaries"] == rag.num_abstracts
    assert rag.abstract(0)["summary"] == "plain callable summary"


def test_a_head_is_skipped_only_in_a_parents_reading_of_a_childs_summary() -> None:
    writer = AbstractWriter(max_words=60)
    chunk = "About: Marrowick Observatory was founded by Ilse Varga in 1889. Visitors tour it on Sundays."
    assert writer.extractive([chunk]).startswith(
        "About: Marrowick Observatory was founded"
    )  # a chunk's own text
    child = writer.extractive(
        ["Ilse Varga founded the observatory. She was born in Corvane."], ["Ilse Varga"]
    )
    assert child.startswith("About: Ilse Varga. ")
    parent = writer.extractive([child], ["Ilse Varga"], of_summaries=True)
    assert parent == "About: Ilse Varga. Ilse Varga founded the observatory."  # one head, the child's lead


def test_an_llm_writes_the_summaries_a_change_rewrites_while_queries_still_run() -> None:
    """The LLM is slow: it runs after the change's exclusive block, so a query meanwhile is served."""
    import threading

    from core.entities import RuleBasedEntityExtractor
    from tests.reliability.cases import synthetic_documents

    served: list[bool] = []
    rag: Any = None

    def llm(prompt: str) -> str:
        if rag is not None:  # a change is under way: another thread's query must not wait for it
            query = threading.Thread(target=lambda: rag.retrieve("Who founded the guild?", k=2))
            query.start()
            query.join(timeout=60)
            served.append(not query.is_alive())
        return "LLM SUMMARY"

    rag = None
    built = BridgeRAG.from_documents(
        synthetic_documents(12),
        embedder=hash_embedder(),
        store=ChunkStore.ephemeral("llm-after-change"),
        entity_extractor=RuleBasedEntityExtractor(),
        llm=CallableLLM(llm),
        exact_search_max_rows=5,  # queries use the dense index, which a change may rebuild
        show_progress=False,
    )
    rag = built
    rag.add_documents(synthetic_documents(2, prefix="late"))
    rag.delete_documents([rag.chunk_table.doc_ids[0]])
    assert served
    assert all(served)
    parents = {rag.forest.parent(n) for n in range(len(rag.forest)) if rag.abstract(n)["level"] == 0} - {-1}
    assert all(rag.abstract(p)["summary"] == "LLM SUMMARY" for p in parents if rag.abstract(p)["alive"])


def _llm_bridge(llm: Callable[[str], str], name: str, **kwargs: Any) -> BridgeRAG:
    from core.entities import RuleBasedEntityExtractor
    from tests.reliability.cases import synthetic_documents

    return BridgeRAG.from_documents(
        synthetic_documents(12),
        embedder=hash_embedder(),
        store=ChunkStore.ephemeral(name),
        entity_extractor=RuleBasedEntityExtractor(),
        llm=CallableLLM(llm),
        show_progress=False,
        **kwargs,
    )


def test_a_failed_llm_call_falls_back_to_the_summary_a_parent_gets_without_one() -> None:
    """One head and the nearest child's lead, at build and after a change; never nested heads."""
    rag = _llm_bridge(lambda prompt: "", "llm-empty")
    rag.delete_documents([rag.chunk_table.doc_ids[0]])
    summaries = [rag.abstract(a)["summary"] for a in range(len(rag.forest))]
    assert all(summary.count("About: ") <= 1 for summary in summaries), summaries


def test_an_interrupted_llm_rewrite_keeps_the_delete_saved_and_its_work_queued(tmp_path: Any) -> None:
    calls: list[int] = []

    def llm(prompt: str) -> str:
        calls.append(1)
        if len(calls) == 1 and interrupt:
            raise KeyboardInterrupt  # Ctrl-C during a slow call
        return "LLM SUMMARY"

    interrupt = False
    rag = _llm_bridge(llm, "llm-interrupt", persist_directory=tmp_path)
    interrupt, calls[:] = True, []
    gone = rag.chunk_table.doc_ids[0]
    with pytest.raises(KeyboardInterrupt):
        rag.delete_documents([gone])
    assert rag._llm_pending  # the rewrite not done is still due
    reopened = BridgeRAG.load(tmp_path / "bridge", embedder=hash_embedder(), store=rag.store)
    assert gone not in reopened.chunk_table.doc_rows  # the delete itself was saved
    from tests.reliability.cases import synthetic_documents

    rag.add_documents(synthetic_documents(1, prefix="next"))  # the next change finishes it
    assert not rag._llm_pending
    parents = {rag.forest.parent(n) for n in range(len(rag.forest)) if rag.abstract(n)["level"] == 0} - {-1}
    assert all(rag.abstract(q)["summary"] == "LLM SUMMARY" for q in parents if rag.abstract(q)["alive"])
