"""Abstract texts: extractive summaries by default, LLM summaries when an LLM is given."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from core.llm import LLM
from core.text import split_sentences

__all__ = ["AbstractWriter"]

_PROMPT = (
    "Summarise the following passages in at most {words} words. Keep the names of people, places, "
    "organisations, works and dates. Answer with the summary only.\n\n{body}"
)
_MAX_PROMPT_CHARS = 6000


#: How an extractive summary names its top entities (a parent's summary skips a child's).
_HEAD = "About: "


def _lead_sentence(text: str, *, after_head: bool = False) -> str:
    """The first sentence of ``text``; with ``after_head``, the first after its ``About: ...`` head."""
    spans = split_sentences(text)
    if not spans:
        return text.strip()
    s, e = spans[1] if after_head and len(spans) > 1 and text.startswith(_HEAD) else spans[0]
    return text[s:e]


def _truncate_words(text: str, words: int) -> str:
    parts = text.split()
    if len(parts) <= words:
        return " ".join(parts)
    return " ".join(parts[:words]) + " ..."


class AbstractWriter:
    """Writes the text of an abstract from the texts it covers.

    Without an LLM the summary is extractive and deterministic: the lead sentence of each
    covered text, in order, cut to ``max_words``; upper levels also name their most
    frequent entities. With an LLM the texts are summarised by it; an LLM failure (an
    exception or an empty answer) falls back to the extractive summary and is counted in
    :attr:`llm_failures`.

    Args:
        max_words: Longest summary, in words.
        llm: Optional LLM (see :mod:`core.llm`).
    """

    def __init__(self, max_words: int = 60, llm: LLM | None = None) -> None:
        if max_words < 5:
            raise ValueError(f"max_words must be >= 5, got {max_words}")
        self.max_words = max_words
        self.llm = llm
        self.llm_calls = 0
        self.llm_failures = 0

    def extractive(
        self, texts: Sequence[str], entities: Sequence[str] = (), *, of_summaries: bool = False
    ) -> str:
        """Deterministic summary: optional top entities, then lead sentences.

        With ``of_summaries`` the texts are summaries this writer made (a parent's children):
        each one's lead is the sentence after its own ``About: ...`` head, so heads never nest.
        """
        head = ""
        if entities:
            top = [name for name, _ in Counter(entities).most_common(5)]
            head = _HEAD + ", ".join(top) + ". "
        body = " ".join(_lead_sentence(t, after_head=of_summaries) for t in texts if t.strip())
        return _truncate_words(head + body, self.max_words)

    def write(self, texts: Sequence[str], entities: Sequence[str] = (), *, of_summaries: bool = False) -> str:
        """The abstract of ``texts`` (LLM summary when an LLM is set, else extractive).

        With ``of_summaries`` the texts are a parent's children's summaries, nearest first: the
        extractive fallback (no LLM, or a failed call) reads the nearest one after its head,
        as :meth:`extractive` does for a parent.
        """
        if self.llm is None:
            return self._fallback(texts, entities, of_summaries)
        body = "\n\n".join(t.strip() for t in texts if t.strip())[:_MAX_PROMPT_CHARS]
        self.llm_calls += 1
        try:
            answer = self.llm.complete(_PROMPT.format(words=self.max_words, body=body)).strip()
        except Exception:  # an optional LLM must never break an index build
            answer = ""
        if not answer:
            self.llm_failures += 1
            return self._fallback(texts, entities, of_summaries)
        return _truncate_words(answer, self.max_words * 2)

    def _fallback(self, texts: Sequence[str], entities: Sequence[str], of_summaries: bool) -> str:
        return self.extractive(texts[:1] if of_summaries else texts, entities, of_summaries=of_summaries)
