"""Optional LLMs: a one-method protocol, framework adapters and robust JSON extraction.

LangChain and LlamaIndex models are duck-typed; this module never imports either framework.
:func:`parse_json` pulls the first usable JSON array or object out of free-form model output
using only :mod:`json` and a few small textual repairs (no ``eval``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Protocol

__all__ = [
    "LLM",
    "CallableLLM",
    "LLMOutputError",
    "LangChainLLM",
    "LlamaIndexLLM",
    "as_llm",
    "complete_json",
    "parse_json",
]

JsonType = type[list[Any]] | type[dict[str, Any]]

_MAX_CANDIDATES = 200  # bracket positions tried per text region; bounds the work on garbage
_EXCERPT_CHARS = 120
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_CLOSERS = {"[": "]", "{": "}"}
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_NO_MATCH = object()


class LLM(Protocol):
    """A text-completion model."""

    def complete(self, prompt: str) -> str:
        """Completes a prompt.

        Args:
            prompt: The full prompt.

        Returns:
            The model's answer as plain text.
        """
        ...


class LLMOutputError(ValueError):
    """The LLM's output could not be used (e.g. no valid JSON of the expected shape)."""


def _join_blocks(blocks: list[Any]) -> str:
    """Concatenates the text parts of a list of content blocks, skipping other kinds."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            if block.get("type", "text") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
        elif getattr(block, "type", "text") == "text" and isinstance(getattr(block, "text", None), str):
            parts.append(block.text)
    return "".join(parts)


def _text_of(result: Any, source: str) -> str:
    """The text of a str, a message with ``.content`` (str or content blocks) or a response with ``.text``."""
    if isinstance(result, str):
        return result
    content = getattr(result, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return _join_blocks(content)
    text = getattr(result, "text", None)
    if isinstance(text, str):
        return text
    raise TypeError(f"{source} returned {type(result).__name__}, expected a str or a message with text")


def _require_method(obj: Any, method: str, what: str) -> None:
    if not callable(getattr(obj, method, None)):
        raise TypeError(f"expected {what} with a callable {method}(); got {type(obj).__name__}")


class _FrameworkLLM:
    """Wraps a framework's model: ``complete(prompt)`` calls its ``method`` and returns the text.

    Attributes:
        model: The wrapped model.
    """

    #: The model's method that answers a prompt, and what the model is (for the error).
    method: ClassVar[str]
    kind: ClassVar[str]

    def __init__(self, model: Any) -> None:
        """Wraps ``model``.

        Raises:
            TypeError: If ``model`` has no callable ``method``.
        """
        _require_method(model, self.method, self.kind)
        self.model = model

    def complete(self, prompt: str) -> str:
        """Calls the model's ``method(prompt)`` and returns the answer's text.

        Returns:
            The text: a str, a message's ``.content`` (content-block lists: the text blocks
            joined together) or a response's ``.text``.

        Raises:
            TypeError: If the result carries no text.
        """
        answer = getattr(self.model, self.method)(prompt)
        return _text_of(answer, f"{type(self.model).__name__}.{self.method}")


class LangChainLLM(_FrameworkLLM):
    """Wraps a LangChain LLM or chat model (anything with ``invoke``).

    Attributes:
        model: The wrapped model: ``invoke(prompt)`` returns a str or a message with ``.content``.
    """

    method: ClassVar[str] = "invoke"
    kind: ClassVar[str] = "a LangChain model"


class LlamaIndexLLM(_FrameworkLLM):
    """Wraps a LlamaIndex LLM (``complete(prompt).text``).

    Attributes:
        model: The wrapped model: ``complete(prompt)`` returns a response with ``.text``.
    """

    method: ClassVar[str] = "complete"
    kind: ClassVar[str] = "a LlamaIndex LLM"


class CallableLLM:
    """Wraps a function from prompt to answer.

    Attributes:
        fn: The wrapped function.
    """

    def __init__(self, fn: Callable[[str], Any]) -> None:
        """Wraps ``fn``.

        Args:
            fn: Maps a prompt to a str (or a message/response carrying text).

        Raises:
            TypeError: If ``fn`` is not callable.
        """
        if not callable(fn):
            raise TypeError(f"CallableLLM needs a callable, got {type(fn).__name__}")
        self.fn = fn

    def complete(self, prompt: str) -> str:
        """Returns ``fn(prompt)`` as text.

        Args:
            prompt: The full prompt.

        Returns:
            The answer.
        """
        return _text_of(self.fn(prompt), "the LLM function")


def _from_package(obj: Any, package: str) -> bool:
    """Whether any class in ``obj``'s MRO is defined in ``package`` (no import needed)."""
    return any((getattr(cls, "__module__", None) or "").split(".")[0] == package for cls in type(obj).__mro__)


def as_llm(obj: Any | None) -> LLM | None:
    """Turns whatever the user passed into an :class:`LLM` (or None).

    Args:
        obj: None, an :class:`LLM`, a LlamaIndex LLM, a LangChain LLM or chat model, or a
            callable from prompt to text.

    Returns:
        The LLM, or None when ``obj`` is None.

    Raises:
        TypeError: If ``obj`` is none of the accepted kinds.
    """
    if obj is None:
        return None
    if isinstance(obj, (LangChainLLM, LlamaIndexLLM, CallableLLM)):
        return obj
    has_complete = callable(getattr(obj, "complete", None))
    if _from_package(obj, "llama_index") or (has_complete and hasattr(obj, "metadata")):
        return LlamaIndexLLM(obj)
    if has_complete:
        llm: LLM = obj
        return llm
    if callable(getattr(obj, "invoke", None)):
        return LangChainLLM(obj)
    if callable(obj):
        return CallableLLM(obj)
    raise TypeError(
        f"cannot use {type(obj).__name__} as an LLM; pass None, an object with complete(prompt) -> str, "
        "a LlamaIndex LLM, a LangChain LLM or chat model, or a callable from prompt to text"
    )


# --- JSON extraction -------------------------------------------------------------------------


def _string_end(text: str, start: int) -> int:
    """Index one past the string literal opened by the quote at ``start`` (``len(text)`` if unclosed)."""
    quote, escaped = text[start], False
    for i in range(start + 1, len(text)):
        if escaped:
            escaped = False
        elif text[i] == "\\":
            escaped = True
        elif text[i] == quote:
            return i + 1
    return len(text)


def _balanced_end(text: str, start: int) -> int | None:
    """Index one past the bracket matching ``text[start]``, skipping string literals; None if unbalanced."""
    stack: list[str] = []
    i = start
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            i = _string_end(text, i)
            continue
        if ch in _CLOSERS:
            stack.append(_CLOSERS[ch])
        elif ch in "]}":
            if stack.pop() != ch:
                return None
            if not stack:
                return i + 1
        i += 1
    return None


def _requote(body: str) -> str:
    """Turns the body of a single-quoted string into a JSON double-quoted string."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append("'" if nxt == "'" else ch + nxt)
            i += 2
            continue
        out.append('\\"' if ch == '"' else ch)
        i += 1
    return '"' + "".join(out) + '"'


def _relax(text: str) -> str:
    """Repairs trailing commas, single-quoted strings and Python literals outside strings."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            end = _string_end(text, i)
            closed = end - i >= 2 and text[end - 1] == ch
            out.append(_requote(text[i + 1 : end - 1]) if ch == "'" and closed else text[i:end])
            i = end
        elif ch == ",":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j >= n or text[j] not in "]}":
                out.append(ch)
            i += 1
        elif ch.isalpha() or ch == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append(_PY_LITERALS.get(word, word))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class _TooDeepError(ValueError):
    """Nesting exceeds what :mod:`json` can parse; nested candidates are not worth trying."""


def _loads(candidate: str) -> Any:
    """Parses ``candidate`` as JSON, then as relaxed JSON; raises ValueError if neither works."""
    try:
        try:
            return json.loads(candidate, strict=False)
        except ValueError:
            return json.loads(_relax(candidate), strict=False)
    except RecursionError as exc:
        raise _TooDeepError("JSON nested too deeply") from exc


def _coerce(value: Any, expect: JsonType | None) -> Any:
    """``value`` if it has the expected type (unwrapping ``{"key": [...]}`` for lists), else _NO_MATCH."""
    if expect is None or isinstance(value, expect):
        return value
    if expect is list and isinstance(value, dict) and len(value) == 1:
        (inner,) = value.values()
        if isinstance(inner, list):
            return inner
    return _NO_MATCH


def _regions(text: str) -> Iterator[str]:
    """The contents of fenced code blocks, in order, then the whole text."""
    for match in _FENCE.finditer(text):
        yield match.group(1)
    yield text


def _candidates(region: str) -> Iterator[Any]:
    """Values of the balanced JSON arrays/objects in ``region``, outermost first, left to right."""
    tried, pos = 0, 0
    while tried < _MAX_CANDIDATES:
        starts = [p for p in (region.find("[", pos), region.find("{", pos)) if p >= 0]
        if not starts:
            return
        start = min(starts)
        tried += 1
        end = _balanced_end(region, start)
        if end is None:
            pos = start + 1
            continue
        try:
            value = _loads(region[start:end])
        except _TooDeepError:
            pos = end
            continue
        except ValueError:
            pos = start + 1  # maybe a valid value is nested inside the bracketed prose
            continue
        yield value
        pos = end


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= _EXCERPT_CHARS else flat[: _EXCERPT_CHARS - 3] + "...")


def parse_json(text: str, expect: JsonType | None = None) -> Any:
    """Extracts a JSON value from free-form LLM output.

    Code fences are tried first, then the whole text; within each, the first balanced array or
    object (brackets inside strings are ignored) that parses and has the expected type wins.
    Trailing commas, single-quoted strings and the Python literals ``True``/``False``/``None``
    are repaired. Without ``expect``, a text that is only a JSON scalar is accepted as well.

    Args:
        text: The model's output.
        expect: ``list`` or ``dict`` to require that top-level type (a dict holding a single
            list counts as that list when ``expect`` is ``list``), or None for any.

    Returns:
        The parsed value.

    Raises:
        LLMOutputError: If no JSON value of the expected type can be found.
        TypeError: If ``text`` is not a str or ``expect`` is not list, dict or None.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_json expects a str, got {type(text).__name__}")
    if expect not in (None, list, dict):
        raise TypeError(f"expect must be list, dict or None, got {expect!r}")
    found_other = False
    for region in _regions(text):
        for value in _candidates(region):
            result = _coerce(value, expect)
            if result is not _NO_MATCH:
                return result
            found_other = True
    if expect is None:
        for region in _regions(text):
            try:
                return _loads(region.strip())
            except ValueError:
                continue
    if found_other:
        wanted = "array" if expect is list else "object"
        raise LLMOutputError(
            f"expected a JSON {wanted} in LLM output but found another type: {_excerpt(text)}"
        )
    raise LLMOutputError(f"no valid JSON found in LLM output: {_excerpt(text)}")


def complete_json(llm: LLM, prompt: str, expect: JsonType | None = None, retries: int = 1) -> Any:
    """Asks ``llm`` for JSON and parses the answer, re-asking when it is unusable.

    Args:
        llm: The model.
        prompt: The prompt (it should already ask for JSON).
        expect: ``list``, ``dict`` or None, as in :func:`parse_json`.
        retries: How many times to re-ask, with an "Answer with valid JSON only" suffix.

    Returns:
        The parsed value.

    Raises:
        LLMOutputError: If no answer parses after ``retries + 1`` attempts.
        ValueError: If ``retries`` is negative.
    """
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    shape = " (a JSON array)" if expect is list else " (a JSON object)" if expect is dict else ""
    retry_prompt = f"{prompt}\n\nAnswer with valid JSON only{shape}: no prose, no code fences."
    ask = prompt
    last_error: LLMOutputError | None = None
    for _ in range(retries + 1):
        try:
            return parse_json(llm.complete(ask), expect)
        except LLMOutputError as exc:
            last_error = exc
            ask = retry_prompt
    raise LLMOutputError(f"no usable JSON after {retries + 1} attempt(s): {last_error}") from last_error
