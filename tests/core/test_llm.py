"""Tests for core.llm: adapters, as_llm dispatch, JSON extraction and complete_json retries."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from llama_index.core.llms import MockLLM

from core.llm import (
    LLM,
    CallableLLM,
    LangChainLLM,
    LlamaIndexLLM,
    LLMOutputError,
    as_llm,
    complete_json,
    parse_json,
)


class ScriptedLLM:
    """Returns the scripted answers in order and records the prompts it was given."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def complete(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.answers.pop(0)


# --- parse_json -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('["a", "b"]', ["a", "b"]),
        ('{"a": 1, "b": [true, null]}', {"a": 1, "b": [True, None]}),
        ('```json\n["a", "b"]\n```', ["a", "b"]),
        ('```\n{"k": "v"}\n```', {"k": "v"}),
        ("Sure! Here is the list:\n```JSON\n[1, 2]\n```\nLet me know if you need more.", [1, 2]),
        ('Here are the entities: ["Paris", "France"]. These are all.', ["Paris", "France"]),
        ('The answer is {"score": 0.5} as requested', {"score": 0.5}),
        ("[1, 2, 3,]", [1, 2, 3]),
        ('{"a": [1, 2, ], "b": {"c": 3 , },\n}', {"a": [1, 2], "b": {"c": 3}}),
        ("['x', 'y']", ["x", "y"]),
        ("{'name': 'it\\'s', 'quote': 'say \"hi\"'}", {"name": "it's", "quote": 'say "hi"'}),
        ("{'ok': True, 'bad': False, 'missing': None}", {"ok": True, "bad": False, "missing": None}),
        ('{"text": "True None False stay as they are"}', {"text": "True None False stay as they are"}),
        ('{"text": "don\'t [panic] {ever}", "n": 1}', {"text": "don't [panic] {ever}", "n": 1}),
        ('{"text": "escaped \\" quote ] inside"}', {"text": 'escaped " quote ] inside'}),
        ('{"text": "line one\nline two"}', {"text": "line one\nline two"}),
        ('[see note] then the data: {"x": "[}"}', {"x": "[}"}),
        ("Mr Smith's list: ['a']", ["a"]),
    ],
)
def test_parse_json_extracts_values(text: str, expected: Any) -> None:
    assert parse_json(text) == expected


def test_parse_json_prefers_the_fenced_block() -> None:
    text = 'Options [1] and [2] were considered.\n```json\n{"choice": 2}\n```'
    assert parse_json(text) == {"choice": 2}
    assert parse_json(text, expect=dict) == {"choice": 2}


def test_parse_json_returns_the_first_balanced_value() -> None:
    assert parse_json("[1] and later [2]") == [1]
    assert parse_json('{"a": [1], "b": [2]} [3]', expect=list) == [3]


def test_parse_json_expect_list_unwraps_a_single_key_dict() -> None:
    assert parse_json('{"entities": ["a", "b"]}', expect=list) == ["a", "b"]
    assert parse_json('{"entities": ["a"]}', expect=dict) == {"entities": ["a"]}
    assert parse_json('{"entities": ["a"]}') == {"entities": ["a"]}


def test_parse_json_expect_skips_values_of_the_wrong_type() -> None:
    assert parse_json('{"note": "first"} then ["second"]', expect=list) == ["second"]
    assert parse_json('[1, 2] then {"k": 1}', expect=dict) == {"k": 1}


@pytest.mark.parametrize(
    ("text", "expect", "wanted"),
    [
        ('{"a": [1], "b": [2]}', list, "array"),
        ("[1, 2]", dict, "object"),
        ('[{"a": 1}]', dict, "object"),
    ],
)
def test_parse_json_type_mismatch_is_an_error(text: str, expect: Any, wanted: str) -> None:
    with pytest.raises(LLMOutputError, match=f"expected a JSON {wanted}"):
        parse_json(text, expect=expect)


def test_parse_json_scalars_only_without_expect() -> None:
    assert parse_json(" 42 ") == 42
    assert parse_json('"yes"') == "yes"
    with pytest.raises(LLMOutputError, match="no valid JSON"):
        parse_json("42", expect=list)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I cannot help with that.",
        "Sure! [1, 2",
        '{"a": NoneSuch}',
        "{'a': 'it's'}",
        "```json\n```",
        "[" * 5000,
    ],
)
def test_parse_json_garbage_raises_with_excerpt(text: str) -> None:
    with pytest.raises(LLMOutputError, match="no valid JSON found in LLM output") as info:
        parse_json(text)
    assert len(str(info.value)) < 250


def test_parse_json_error_is_a_value_error_with_an_excerpt() -> None:
    with pytest.raises(ValueError, match="I cannot help") as info:
        parse_json("I cannot help with that, sorry. " * 20)
    assert isinstance(info.value, LLMOutputError)
    assert "..." in str(info.value)


def test_parse_json_too_deep_nesting_is_an_output_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(LLMOutputError, match="no valid JSON"):
        parse_json(deep)
    assert parse_json(f"{deep} then [1]") == [1]


def test_parse_json_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match="str"):
        parse_json(b"[1]")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expect"):
        parse_json("[1]", expect=tuple)  # type: ignore[arg-type]


# --- adapters ---------------------------------------------------------------------------------


def test_langchain_llm_with_fake_list_llm() -> None:
    llm = LangChainLLM(FakeListLLM(responses=['["a"]', "second"]))
    assert llm.complete("q1") == '["a"]'
    assert llm.complete("q2") == "second"


def test_langchain_llm_with_fake_chat_model() -> None:
    llm = LangChainLLM(FakeListChatModel(responses=['{"k": 1}']))
    assert llm.complete("q") == '{"k": 1}'


def test_langchain_llm_joins_text_content_blocks() -> None:
    class BlockModel:
        def invoke(self, prompt: str) -> AIMessage:
            return AIMessage(
                content=[
                    {"type": "reasoning", "reasoning": "thinking..."},
                    {"type": "text", "text": '["a", '},
                    '"b"]',
                ]
            )

    assert LangChainLLM(BlockModel()).complete("q") == '["a", "b"]'


def test_langchain_llm_rejects_results_without_text() -> None:
    class Weird:
        def invoke(self, prompt: str) -> int:
            return 3

    with pytest.raises(TypeError, match=r"Weird\.invoke returned int"):
        LangChainLLM(Weird()).complete("q")
    with pytest.raises(TypeError, match="invoke"):
        LangChainLLM(object())


def test_llama_index_llm_with_mock_llm() -> None:
    llm = LlamaIndexLLM(MockLLM())
    assert llm.complete('echo ["x"]') == 'echo ["x"]'  # MockLLM echoes the prompt
    assert llm.complete("") == ""


def test_llama_index_llm_reads_the_text_attribute() -> None:
    class Response:
        text = "hello"

    class Model:
        metadata = "llama-like"

        def complete(self, prompt: str) -> Response:
            return Response()

    assert LlamaIndexLLM(Model()).complete("q") == "hello"
    with pytest.raises(TypeError, match="complete"):
        LlamaIndexLLM(object())


def test_callable_llm() -> None:
    llm = CallableLLM(lambda prompt: prompt.upper())
    assert llm.complete("abc") == "ABC"
    with pytest.raises(TypeError, match="callable"):
        CallableLLM("nope")  # type: ignore[arg-type]


# --- as_llm -----------------------------------------------------------------------------------


def test_as_llm_dispatch() -> None:
    assert as_llm(None) is None
    scripted = ScriptedLLM("x")
    assert as_llm(scripted) is scripted
    wrapped = CallableLLM(str)
    assert as_llm(wrapped) is wrapped
    assert isinstance(as_llm(MockLLM()), LlamaIndexLLM)
    assert isinstance(as_llm(FakeListLLM(responses=["a"])), LangChainLLM)
    assert isinstance(as_llm(FakeListChatModel(responses=["a"])), LangChainLLM)
    assert isinstance(as_llm(lambda prompt: "a"), CallableLLM)


def test_as_llm_treats_complete_plus_metadata_as_llama_index() -> None:
    class Response:
        text = "from .text"

    class LlamaLike:
        metadata = object()

        def complete(self, prompt: str) -> Response:
            return Response()

    llm = as_llm(LlamaLike())
    assert isinstance(llm, LlamaIndexLLM)
    assert llm.complete("q") == "from .text"


@pytest.mark.parametrize("bad", [42, "a string", object()])
def test_as_llm_rejects_other_objects(bad: Any) -> None:
    with pytest.raises(TypeError, match="as an LLM"):
        as_llm(bad)


# --- complete_json ----------------------------------------------------------------------------


def test_complete_json_first_answer_ok() -> None:
    llm = ScriptedLLM('```json\n["a"]\n```')
    assert complete_json(llm, "List things.", expect=list) == ["a"]
    assert llm.prompts == ["List things."]


def test_complete_json_retries_once_with_a_json_only_suffix() -> None:
    llm = ScriptedLLM("I think the answer is a and b.", '{"things": ["a", "b"]}')
    assert complete_json(llm, "List things.", expect=list) == ["a", "b"]
    assert len(llm.prompts) == 2
    assert llm.prompts[1].startswith("List things.")
    assert "Answer with valid JSON only (a JSON array)" in llm.prompts[1]


def test_complete_json_retries_on_type_mismatch() -> None:
    llm = ScriptedLLM("[1, 2]", '{"k": 1}')
    assert complete_json(llm, "Give an object.", expect=dict) == {"k": 1}
    assert "(a JSON object)" in llm.prompts[1]


def test_complete_json_gives_up_after_retries() -> None:
    llm = ScriptedLLM("garbage", "more garbage", '["never reached"]')
    with pytest.raises(LLMOutputError, match="after 2 attempt") as info:
        complete_json(llm, "p")
    assert isinstance(info.value.__cause__, LLMOutputError)
    assert len(llm.prompts) == 2


@pytest.mark.parametrize(("retries", "calls"), [(0, 1), (2, 3)])
def test_complete_json_retry_count(retries: int, calls: int) -> None:
    llm = ScriptedLLM(*["nope"] * 5)
    with pytest.raises(LLMOutputError):
        complete_json(llm, "p", retries=retries)
    assert len(llm.prompts) == calls
    with pytest.raises(ValueError, match="retries"):
        complete_json(llm, "p", retries=-1)


def test_complete_json_through_langchain_and_llama_index_adapters() -> None:
    chat = as_llm(FakeListChatModel(responses=["no json here", "Sure: ['x', 'y',]"]))
    assert chat is not None
    assert complete_json(chat, "p", expect=list) == ["x", "y"]
    mock = as_llm(MockLLM())  # echoes the prompt, so the JSON in the prompt comes back
    assert mock is not None
    assert complete_json(mock, 'Return {"ok": True}', expect=dict) == {"ok": True}


def test_protocol_is_satisfied_by_adapters() -> None:
    llms: list[LLM] = [ScriptedLLM("a"), CallableLLM(str), LangChainLLM(FakeListLLM(responses=["a"]))]
    assert [llm.complete("a") for llm in llms] == ["a", "a", "a"]
