"""Security: nothing in the package can execute code from an index, and indexes stay inside their directory.

- Source scan (AST) of every module of ``core``, ``langchain_bridge`` and ``llama_index_bridge``:
  no pickle-family modules (pickle, marshal, shelve, dill, cloudpickle, joblib), no
  ``eval`` / ``exec`` / ``compile`` / ``__import__``, no ``allow_pickle=True``, every
  ``.load(...)`` of arrays says ``allow_pickle=False``, no ``torch.load`` or ``yaml.load``.
- Paths: a manifest naming ``../x``, an absolute path or a nested path is refused by every
  strategy's ``load``; a file linked to outside the directory is refused; a recorded Chroma
  location outside the directory without Chroma data is refused and nothing is written there.
- Document metadata is data: strings that look like code come back verbatim from the core
  strategy, both framework retrievers and a reloaded index; an object whose pickling would
  run code is stored as its text and never pickled.
- Terminal output is text: ``bridge-rag query`` prints chunk texts, metadata and the question
  without escape sequences or control characters; its ``--json`` keeps every character, escaped.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.app import querying
from core.app.querying import results_json, run_query
from core.app.terminal import strip_terminal_controls
from core.types import Document, Retrieved
from tests.reliability.cases import StrategyCase, synthetic_documents, wiring_embedder

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "langchain_bridge", "llama_index_bridge")

FORBIDDEN_MODULES = frozenset(
    {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "marshal", "shelve"}
)
FORBIDDEN_CALLS = frozenset({"eval", "exec", "compile", "__import__"})


# --------------------------------------------------------------------------- source scan


def findings(source: str, filename: str = "<source>") -> Iterator[str]:
    """Every construct of ``source`` that could execute code from data."""
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FORBIDDEN_MODULES:
                    yield f"{where}: import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
                yield f"{where}: from {node.module} import ..."
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_CALLS | FORBIDDEN_MODULES:
            yield f"{where}: uses {node.id}"
        elif isinstance(node, ast.keyword) and node.arg == "allow_pickle":
            if not (isinstance(node.value, ast.Constant) and node.value.value is False):
                yield f"{where}: allow_pickle={ast.unparse(node.value)}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = ast.unparse(node.func.value)
            if (
                node.func.attr in {"load", "read_array"}
                and owner in {"np", "numpy", "np.lib.format"}
                and not any(k.arg == "allow_pickle" for k in node.keywords)
            ):
                yield f"{where}: {ast.unparse(node.func)} without allow_pickle=False"
            if node.func.attr == "load" and owner in {"torch", "yaml"}:
                yield f"{where}: {ast.unparse(node.func)}"
            if node.func.attr in {"loads", "load", "Unpickler"} and owner in FORBIDDEN_MODULES:
                yield f"{where}: {ast.unparse(node.func)}"


def package_sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_the_scan_covers_every_module() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in package_sources()}
    assert {
        "core/persist.py",
        "core/strategies/umg/sparse.py",
        "core/strategies/bridge/strategy.py",
        "core/strategies/umg/strategy.py",
        "core/strategies/bubble/strategy.py",
        "core/strategies/table.py",
        "core/vector_index.py",
    } <= names
    assert {"langchain_bridge/retrievers.py", "llama_index_bridge/retrievers.py"} <= names


@pytest.mark.parametrize(
    "snippet",
    [
        "import pickle",
        "from marshal import loads",
        "import shelve as s",
        "x = eval('1')",
        "exec(code)",
        "np.load(path)",
        "np.load(path, allow_pickle=True)",
        "torch.load(path)",
        "yaml.load(text)",
        "joblib.load(path)",
    ],
)
def test_the_scan_catches_code_execution(snippet: str) -> None:
    assert list(findings(snippet)), snippet


def test_no_load_path_can_execute_code() -> None:
    found = [f for path in package_sources() for f in findings(path.read_text(encoding="utf-8"), str(path))]
    assert not found, "\n".join(found)


# --------------------------------------------------------------------------- paths


@pytest.fixture
def saved(case: StrategyCase, wiring_build: Callable[..., Any], tmp_path: Path) -> tuple[Any, Path]:
    strategy = wiring_build(6)
    path = tmp_path / "index"
    strategy.save(path)
    return strategy, path


def _generation(path: Path) -> Path:
    return path / (path / "CURRENT").read_text().strip()


def _load(case: StrategyCase, path: Path, store: Any) -> Any:
    return case.load(path, embedder=wiring_embedder(), store=store, **case.wiring_kwargs())


@pytest.mark.parametrize(
    "name", ["../outside.bin", "/etc/hostname", "sub/../../outside.bin", "..", "a\\..\\b"]
)
def test_manifest_paths_outside_the_directory_are_refused(
    case: StrategyCase, saved: tuple[Any, Path], tmp_path: Path, name: str
) -> None:
    strategy, path = saved
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"not part of the index")
    manifest_path = _generation(path) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["files"][name] = {"sha256": hashlib.sha256(outside.read_bytes()).hexdigest(), "bytes": 21}
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="invalid index file name"):
        _load(case, path, strategy.store)


def test_an_index_file_linked_outside_is_refused(
    case: StrategyCase, saved: tuple[Any, Path], tmp_path: Path
) -> None:
    strategy, path = saved
    generation = _generation(path)
    victim = sorted(json.loads((generation / "manifest.json").read_text())["files"])[0]
    outside = tmp_path / "elsewhere.bin"
    shutil.move(generation / victim, outside)
    (generation / victim).symlink_to(outside)
    with pytest.raises(ValueError, match="points outside"):
        _load(case, path, strategy.store)


def test_a_current_file_naming_a_path_outside_is_ignored(case: StrategyCase, saved: tuple[Any, Path]) -> None:
    strategy, path = saved
    expected = [r.id for r in strategy.retrieve("salt and copper", k=2)]
    (path / "CURRENT").write_text("../../../etc\n")
    assert [r.id for r in _load(case, path, strategy.store).retrieve("salt and copper", k=2)] == expected


def test_a_recorded_chroma_location_outside_without_data_is_refused_untouched(
    case: StrategyCase, wiring_build: Callable[..., Any], tmp_path: Path
) -> None:
    persist = tmp_path / "persist"
    wiring_build(4, persist_directory=persist)
    index_dir = persist / case.name
    generation = _generation(index_dir)
    manifest = json.loads((generation / "manifest.json").read_text())
    outside = tmp_path / "somewhere-else"
    outside.mkdir()
    manifest["meta"]["store"]["location"] = {"kind": "persistent", "path": str(outside)}
    (generation / "manifest.json").write_text(json.dumps(manifest))
    (persist / "chroma").rename(tmp_path / "moved-chroma")
    with pytest.raises(FileNotFoundError, match="no Chroma data"):
        case.load(persist, embedder=wiring_embedder(), **case.wiring_kwargs())
    assert list(outside.iterdir()) == [], "nothing was written outside the index directory"


# --------------------------------------------------------------------------- metadata is data

MARKER = "PWNED-marker"
PAYLOADS = {
    "python": f"__import__('os').system('touch {MARKER}')",
    "template": "{{ 7*7 }} ${7*7} #{7*7} <%= 7*7 %>",
    "yaml": f"!!python/object/apply:os.system ['touch {MARKER}']",
    "pickle": "cos\nsystem\n(S'touch PWNED-marker'\ntR.",
    "formula": "=cmd|' /C calc'!A0",
    "json": '{"__class__": "os.system", "args": ["touch x"]}',
}


class Booby:
    """Pickling (or copying through pickle) this object would create the marker file."""

    def __init__(self, where: Path) -> None:
        self.where = where

    def __reduce__(self) -> tuple[Any, ...]:
        (self.where / MARKER).touch()
        return (str, ("reduced",))

    def __str__(self) -> str:
        return "a booby-trapped object"


def test_metadata_is_data_never_code(
    case: StrategyCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wiring_build: Callable[..., Any]
) -> None:
    monkeypatch.chdir(tmp_path)
    docs = [
        Document(d.text, id=d.id, metadata={**d.metadata, **PAYLOADS, "object": Booby(tmp_path)})
        for d in synthetic_documents(3)
    ]
    strategy = case.build(
        docs, embedder=wiring_embedder(), persist_directory=tmp_path / "persist", **case.wiring_kwargs()
    )
    reloaded = case.load(tmp_path / "persist", embedder=wiring_embedder(), **case.wiring_kwargs())
    views = {
        "core": [r.metadata for r in strategy.retrieve("Who founded the guild?", k=3)],
        "reloaded": [r.metadata for r in reloaded.retrieve("Who founded the guild?", k=3)],
        "langchain": [d.metadata for d in case.langchain(strategy, 3).invoke("Who founded the guild?")],
        "llama_index": [
            n.node.metadata for n in case.llama_index(reloaded, 3, {}).retrieve("Who founded the guild?")
        ],
    }
    for view, metadatas in views.items():
        assert metadatas, view
        for metadata in metadatas:
            for key, payload in PAYLOADS.items():
                assert metadata[key] == payload, (view, key)
            value = metadata["object"]  # the caller's own object in process; its text once stored
            assert value == "a booby-trapped object" or (
                view in {"core", "langchain"} and isinstance(value, Booby)
            )
    assert not list(tmp_path.rglob(MARKER)), "no metadata value was ever executed or pickled"


# --------------------------------------------------------------------------- terminal output

HOSTILE = "Clear\x1b[2J the screen,\x1b]0;pwn\x07 retitle,\x9b31m recolour\x7f\r and ring\x07\u202e."
#: What a terminal acts on: ESC, BEL, CR, DEL and every other C0 (but newline and tab) or C1
#: character, and the bidi controls that reorder what is shown.
ACTED_ON = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[31mred\x1b[0m plain", "red plain"),
        ("\x1b[2J\x1b]0;pwn\x07after", "after"),
        ("\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\", "link"),  # OSC ended by ST
        ("a\x9bb\x9dc\x85d", "abcd"),  # C1 controls, 8-bit CSI and OSC included
        ("bell\x07 nul\x00 cr\r del\x7f esc\x1b(B.", "bell nul cr del esc."),
        (
            "tab\tand\nnewline stay; café, 東京, \u2014 kept",
            "tab\tand\nnewline stay; café, 東京, \u2014 kept",
        ),
        ("\x1b]0;unterminated title", "0;unterminated title"),
        ("\u202etxt.exe\u2066.txt\u2069 \u200fmark", "txt.exe.txt \u200fmark"),  # a mark is kept
    ],
    ids=["csi", "osc-bel", "osc-st", "c1", "c0-del-esc", "kept", "unterminated-osc", "bidi"],
)
def test_strip_terminal_controls(text: str, shown: str) -> None:
    assert strip_terminal_controls(text) == shown


class HostileIndex:
    """A loaded index whose one result carries escape sequences in its text and metadata."""

    name = "bridge"
    provenance_keys = frozenset({"found_by", "matched_entities"})

    def retrieve(self, query: str, k: int | None = None, **options: Any) -> list[Retrieved]:
        metadata = {
            "source": "notes/\x1b[8mhidden\u202e.md",
            "title": "Title\x1b]0;pwn\x07\x9b",
            "found_by": "entity\x1b[2J",
            "matched_entities": ["a\x9bb", "c\x1b[1Ad"],
        }
        return [Retrieved("c1", HOSTILE, 0.5, metadata)]

    def close(self) -> None:
        pass


def _query(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, question: str, *, as_json: bool) -> str:
    monkeypatch.setattr(querying, "load_index_dir", lambda *_, **__: HostileIndex())
    out = io.StringIO()
    assert run_query(str(tmp_path), question, k=1, as_json=as_json, out=out) == 1
    return out.getvalue()


def test_query_prints_no_terminal_controls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    shown = _query(monkeypatch, tmp_path, "who\x1b[2J\x1b]0;pwn\x07 \x9bclears?", as_json=False)
    assert not ACTED_ON.findall(shown.replace("\n", "")), repr(shown)
    assert "pwn" not in shown
    assert "[2J" not in shown
    lines = shown.splitlines()
    assert lines[0] == "1 result from bridge for 'who clears?'"
    assert lines[2] == "1. [0.500] notes/hidden.md - Title"
    assert lines[3] == "   how: found_by: entity; matched_entities: ab, cd"
    assert lines[4] == "   Clear the screen, retitle,31m recolour and ring."


def test_query_json_keeps_every_character_escaped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    question = "who\x1b[2J\x1b]0;pwn\x07 \x9bclears?"
    text = _query(monkeypatch, tmp_path, question, as_json=True)
    assert not ACTED_ON.findall(text.replace("\n", "")), "json.dumps leaves DEL and C1 raw; they are escaped"
    data = json.loads(text)
    assert data["query"] == question
    (result,) = data["results"]
    assert result["text"] == HOSTILE
    assert result["metadata"] == HostileIndex().retrieve("")[0].metadata
    assert "\\u009b" in text
    assert "\\u202e" in text
    assert "\\u001b" in text
    plain = results_json("café 東京", "bridge", 1, [])
    assert '"café 東京"' in plain  # other characters stay readable
