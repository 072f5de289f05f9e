"""``bridge-rag index`` and ``bridge-rag query`` over the user's own files.

Two kinds of tests:

- the command itself, run as a subprocess with the real embedder, spaCy and an embedded
  Chroma, over a small folder of invented people and organisations (.md, .txt, .jsonl and
  a PDF); the indexes are built once per module and every case reads their real output;
- the update planning, the journal in ``sources.json`` and the clean-up after a failed build,
  in-process over a tiny persisted fake strategy (no model), including crashes injected
  between the strategy's changes and the record's final write.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from core.app import indexing
from core.app.files import ReadFile, SourceFile, sha256_hex
from core.app.indexing import CommandError, IndexOptions, IndexSummary, plan_update, run_index
from core.app.querying import format_results
from core.app.sources import SOURCES_FILE, SourceEntry, read_sources
from core.persist import CorruptIndexError, json_from_bytes, json_to_bytes, load_index, save_index
from core.strategies.common import stage_lines, timed
from core.strategies.registry import register_strategy
from core.types import BuildReport, Document, Retrieved
from tests.pdf_bytes import minimal_pdf

REPO = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(
    r"(\d+) files? read; (\d+) documents? indexed \((\d+) added, (\d+) changed, (\d+) deleted, "
    r"(\d+) unchanged\); (\d+) skipped, (\d+) failed; [\d.]+ s"
)

HALDEN = (
    "# Oskar Halden\n\nOskar Halden was a Norwegian glaciologist who founded the Halden Institute for "
    "Polar Studies in Tromso in 1962. He spent eleven winters on the Svalbard ice cap.\n"
)
VARGA = (
    "# Ilona Varga\n\nIlona Varga is a Hungarian astronomer at the Marrowick Observatory. She discovered "
    "the comet Varga-Lind in 1987.\n"
)
BAKERY = (
    "The Brindle Street Bakery in Leeds bakes sourdough rye loaves every morning. Its owner, Tomas "
    "Quill, opened the shop in 2011.\n"
)
PEOPLE = [
    {
        "id": "p-ferro",
        "title": "Marco Ferro",
        "text": "Marco Ferro is an Italian violin maker in Cremona who restored the Aurelio violin.",
        "tenant": "acme",
    },
    {
        "title": "Saanvi Rao",
        "text": "Saanvi Rao chairs the Kestrel Robotics board and designed an underwater drone.",
        "tenant": "globex",
    },
]
PDF_LINES = [
    "Wenonah Castell designs tidal turbines at the Orkney Marine Works.",
    "She built the first in 2019.",
]


def _has_pypdf() -> bool:
    try:
        import pypdf  # noqa: F401
    except ImportError:
        return False
    return True


def write_corpus(root: Path, *, bad_file: bool = True, pdf: bool = True) -> Path:
    """A small folder of documents (and a file that cannot be read, and one that is skipped)."""
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "halden.md").write_text(HALDEN, encoding="utf-8")
    (root / "notes" / "varga.md").write_text(VARGA, encoding="utf-8")
    (root / "bakery.txt").write_text(BAKERY, encoding="utf-8")
    (root / "people.jsonl").write_text("\n".join(json.dumps(p) for p in PEOPLE) + "\n", encoding="utf-8")
    (root / "photo.png").write_bytes(b"\x89PNG\r\n")
    if bad_file:
        (root / "notes" / "latin1.txt").write_bytes(b"caf\xe9 au lait")
    if pdf and _has_pypdf():
        (root / "castell.pdf").write_bytes(minimal_pdf(PDF_LINES))
    return root


def cli(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Runs ``python -m core.app.cli ARGS`` offline, as a user would run ``bridge-rag``."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [sys.executable, "-m", "core.app.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or REPO,
        timeout=timeout,
        check=False,
    )


def summary_of(result: subprocess.CompletedProcess[str]) -> dict[str, int]:
    match = SUMMARY.search(result.stdout)
    assert match, f"no summary line in {result.stdout!r} (stderr: {result.stderr[-2000:]})"
    keys = ("files", "indexed", "added", "changed", "deleted", "unchanged", "skipped", "failed")
    return dict(zip(keys, map(int, match.groups()), strict=True))


def query_json(index: Path, question: str, *extra: str) -> dict[str, Any]:
    result = cli("query", str(index), question, "--json", *extra)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


# --------------------------------------------------------------------- real strategies, subprocesses


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """A Bridge-RAG index over the corpus: (corpus, index dir, the index command's result)."""
    base = tmp_path_factory.mktemp("cli-index")
    corpus = write_corpus(base / "docs")
    index = base / "index"
    return corpus, index, cli("index", str(corpus), "--index", str(index))  # the default: Bridge-RAG


def test_index_reads_every_file_names_the_unreadable_one_and_summarises(
    built: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    corpus, index, result = built
    assert result.returncode == 0, result.stderr
    assert "no --strategy given: building bridge (Bridge-RAG)" in result.stderr
    pdf = 1 if _has_pypdf() else 0
    assert summary_of(result) == {
        "files": 4 + pdf,
        "indexed": 5 + pdf,
        "added": 5 + pdf,
        "changed": 0,
        "deleted": 0,
        "unchanged": 0,
        "skipped": 1,
        "failed": 1,
    }
    assert f"cannot read {corpus / 'notes' / 'latin1.txt'}: not valid UTF-8" in result.stderr
    record = json.loads((index / SOURCES_FILE).read_text(encoding="utf-8"))
    assert record["strategy"] == "bridge"
    assert record["state"] == "complete"
    assert record["version"] == 1
    assert record["roots"] == [str(corpus.absolute())]
    assert record["sources"]["people.jsonl"]["ids"] == ["p-ferro", "people.jsonl#line2"]
    assert record["sources"]["notes/halden.md"]["sha256"] == sha256_hex(HALDEN)
    assert "notes/latin1.txt" not in record["sources"]
    assert (index / "bridge").is_dir()
    assert (index / "chroma").is_dir()
    # piped: no stage lines, no bars (the model loader's neither)
    assert "bridge-rag: chunking" not in result.stderr
    assert "Loading weights" not in result.stderr
    assert "it/s]" not in result.stderr


def test_a_build_with_progress_names_each_stage_as_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    run_index(IndexOptions(paths=[str(corpus)], index_dir=str(tmp_path / "index"), progress=True))
    err = capsys.readouterr().err
    stages = [
        line.removeprefix("bridge-rag: ") for line in err.splitlines() if line.startswith("bridge-rag: ")
    ]
    order = [
        "chunking ...",
        "embedding ...",
        "extracting entities ...",
        "structures: filling the cuckoo filter ...",
    ]
    assert [s for s in stages if s in order] == order, err[-2000:]
    assert "exporting the embedding model to ONNX for fast queries ..." in stages


def test_stage_lines_only_while_asked(capsys: pytest.CaptureFixture[str]) -> None:
    report = BuildReport()
    with stage_lines(False), timed(report, "chunk"):
        pass
    assert capsys.readouterr().err == ""
    with stage_lines(True), timed(report, "embed"):
        pass
    assert capsys.readouterr().err == "bridge-rag: embedding ...\n"
    with timed(report, "entities"):
        pass
    assert capsys.readouterr().err == ""  # only inside the block
    assert set(report.seconds) == {"chunk", "embed", "entities"}


def test_query_prints_ranked_results_with_their_provenance(
    built: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    _, index, _ = built
    result = cli(
        "query", str(index), "Which glaciologist founded the Halden Institute for Polar Studies?", "-k", "3"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("3 results from bridge for")
    first = next(i for i, line in enumerate(lines) if line.startswith("1. "))
    assert re.match(r"1\. \[\d+\.\d{3}\] notes/halden\.md - Oskar Halden$", lines[first])
    assert lines[first + 1].startswith("   how: found_by: ")
    assert "Oskar Halden was a Norwegian glaciologist" in result.stdout
    assert any(line.startswith("3. ") for line in lines)


def test_query_json_ranks_the_expected_document_first(
    built: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    _, index, _ = built
    data = query_json(index, "Who restored the Aurelio violin in Cremona?", "-k", "2")
    assert data["query"] == "Who restored the Aurelio violin in Cremona?"
    assert (data["strategy"], data["k"]) == ("bridge", 2)
    top = data["results"][0]
    assert set(top) == {"id", "score", "text", "metadata"}
    assert top["metadata"]["doc_id"] == "p-ferro"
    assert top["metadata"]["source"] == "people.jsonl"
    assert top["metadata"]["title"] == "Marco Ferro"
    assert top["metadata"]["tenant"] == "acme"
    assert top["metadata"]["found_by"] in {"entity", "hop", "tree", "bridge", "dense"}
    assert isinstance(top["score"], float)
    if _has_pypdf():
        pdf = query_json(index, "Who designs tidal turbines in Orkney?", "-k", "1")
        assert pdf["results"][0]["metadata"]["source"] == "castell.pdf"


def test_query_filter_keeps_only_matching_chunks(
    built: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    _, index, _ = built
    data = query_json(
        index,
        "Who restored the Aurelio violin in Cremona?",
        "-k",
        "5",
        "--filter",
        '{"source": "notes/varga.md"}',
    )
    assert data["results"], "the filter's document should still be returned"
    assert {r["metadata"]["source"] for r in data["results"]} == {"notes/varga.md"}


def test_index_into_an_existing_index_without_update_exits_2(
    built: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    corpus, index, _ = built
    before = (index / SOURCES_FILE).read_bytes()
    result = cli("index", str(corpus), "--strategy", "bridge", "--index", str(index))
    assert result.returncode == 2
    assert "bridge-rag index: error:" in result.stderr
    assert "already holds a bridge index" in result.stderr
    assert "--update" in result.stderr
    assert (index / SOURCES_FILE).read_bytes() == before


def test_index_into_a_directory_saved_by_the_library_exits_2(
    built: tuple[Path, Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """A folder that is itself a library ``save()`` is refused with a message, not a traceback."""
    from core.entities import RuleBasedEntityExtractor
    from core.strategies.bridge import BridgeRAG
    from tests.core.conftest import hash_embedder

    corpus, _, _ = built
    docs = [Document("Oskar Halden founded an institute in Tromso.", id="d1")]
    rag = BridgeRAG.from_documents(
        docs, embedder=hash_embedder(), entity_extractor=RuleBasedEntityExtractor()
    )
    rag.save(tmp_path / "saved")
    before = sorted(p.name for p in (tmp_path / "saved").iterdir())
    result = cli("index", str(corpus), "--index", str(tmp_path / "saved"))
    assert result.returncode == 2
    assert "is itself a saved bridge index" in result.stderr
    assert "Traceback" not in result.stderr
    update = cli("index", str(corpus), "--update", "--index", str(tmp_path / "saved"))
    query = cli("query", str(tmp_path / "saved"), "Who founded the institute?")
    for other in (update, query):  # neither sends the user back to the refused build
        assert other.returncode == 2
        assert "saved by the library (save())" in other.stderr
        assert "Traceback" not in other.stderr
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == before


def test_update_of_a_library_build_it_cannot_open_writes_nothing(
    built: tuple[Path, Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """``--update`` of a ``from_documents(persist_directory=...)`` made with another embedder."""
    from core.entities import RuleBasedEntityExtractor
    from core.strategies.bridge import BridgeRAG
    from tests.core.conftest import hash_embedder

    corpus, _, _ = built
    built_in_python = tmp_path / "lib"
    BridgeRAG.from_documents(
        [Document("Oskar Halden founded an institute in Tromso.", id="d1")],
        embedder=hash_embedder(),
        entity_extractor=RuleBasedEntityExtractor(),
        persist_directory=built_in_python,
    ).close()
    before = sorted(p.name for p in built_in_python.iterdir())
    options = IndexOptions(paths=[str(corpus)], index_dir=str(built_in_python), update=True, progress=False)
    for _ in range(2):  # the refusal leaves no journal behind, so the second run says the same
        with pytest.raises(CommandError, match=r"was built in Python .* 32-dimensional"):
            run_index(options)
        assert sorted(p.name for p in built_in_python.iterdir()) == before  # no sources.json
    assert BridgeRAG.load(built_in_python, embedder=hash_embedder()).retrieve("Halden", k=1)
    damaged = next((built_in_python / "bridge").glob("gen-*/filter.bin"))
    damaged.write_bytes(bytes(len(damaged.read_bytes())))
    with pytest.raises(CorruptIndexError, match=r"filter\.bin") as caught:  # damage is named, not advice
        run_index(options)
    assert "built in Python" not in str(caught.value)


def test_bad_filters_exit_2(built: tuple[Path, Path, subprocess.CompletedProcess[str]]) -> None:
    _, index, _ = built
    result = cli("query", str(index), "violin", "--filter", '{"source": ')
    assert result.returncode == 2
    assert "bridge-rag query: error: --filter is not valid JSON" in result.stderr


def test_strict_stops_before_anything_is_written(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "docs", pdf=False)
    index = tmp_path / "index"
    result = cli("index", str(corpus), "--strategy", "bridge", "--index", str(index), "--strict")
    assert result.returncode == 2
    assert "bridge-rag index: error: --strict" in result.stderr
    assert str(corpus / "notes" / "latin1.txt") in result.stderr
    assert not index.exists()


def test_empty_folder_exits_2_without_creating_the_index(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.rst").write_text("not supported", encoding="utf-8")
    index = tmp_path / "index"
    result = cli("index", str(tmp_path / "empty"), "--strategy", "umg", "--index", str(index))
    assert result.returncode == 2
    assert "bridge-rag index: error: no .txt, .md, .jsonl, .pdf files" in result.stderr
    assert "1 other file skipped" in result.stderr
    assert not index.exists()


def test_unknown_strategy_exits_2_listing_the_valid_ones(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    result = cli("index", str(corpus), "--strategy", "graphzilla", "--index", str(tmp_path / "index"))
    assert result.returncode == 2
    assert "no strategy named 'graphzilla'; choose one of: bridge, bubble, umg" in result.stderr
    assert not (tmp_path / "index").exists()


def test_query_on_a_directory_that_is_not_an_index_exits_2(tmp_path: Path) -> None:
    result = cli("query", str(tmp_path), "anything")
    assert result.returncode == 2
    assert (
        f"bridge-rag query: error: {tmp_path} is not a bridge-rag index; build one with "
        f"`bridge-rag index PATH --index {tmp_path}`"
    ) in result.stderr


def test_a_refused_build_never_announces_it(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    saved = tmp_path / "saved"
    (saved / "bridge").mkdir(parents=True)
    (saved / "sources.json").write_text("{}", encoding="utf-8")
    refusals = {
        "empty": ("index", str(tmp_path / "empty"), "--index", str(tmp_path / "i1")),
        "inside": ("index", str(corpus), "--index", str(corpus / "idx")),
        "existing": ("index", str(corpus), "--index", str(saved)),
    }
    for what, args in refusals.items():
        result = cli(*args)
        assert result.returncode == 2, (what, result.stderr)
        assert "error:" in result.stderr, what
        assert "building" not in result.stderr, (what, result.stderr)


def test_an_index_inside_the_documents_folder_is_refused_naming_a_place_beside_it(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    for inside in (corpus, corpus / "notes" / "idx"):
        result = cli("index", str(corpus), "--index", str(inside))
        assert result.returncode == 2
        assert f"--index {inside} is inside the folder {corpus} being indexed" in result.stderr
        assert f"--index {tmp_path / 'docs-index'}" in result.stderr
    assert not (corpus / "notes" / "idx").exists()
    assert not (corpus / "sources.json").exists()


def test_query_on_the_documents_folder_advises_an_index_beside_it(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    result = cli("query", str(corpus), "anything")
    assert result.returncode == 2
    place = tmp_path / "docs-index"
    assert f"`bridge-rag index {corpus} --index {place}`" in result.stderr
    assert f"`bridge-rag query {place} ...`" in result.stderr


def test_counts_are_written_in_the_right_number() -> None:
    assert IndexSummary(files_read=1, added=1).line().startswith("1 file read; 1 document indexed (1 added")
    assert IndexSummary(files_read=2, added=0).line().startswith("2 files read; 0 documents indexed")
    assert format_results("q", "bridge", [], frozenset()).startswith("0 results from bridge")
    one = Retrieved(id="a::0", text="t", score=0.5, metadata={"source": "a.txt"})
    assert format_results("q", "bridge", [one], frozenset()).startswith("1 result from bridge for 'q'")


def test_update_adds_changed_new_and_deletes_vanished_files(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    index = tmp_path / "index"
    first = cli("index", str(corpus), "--strategy", "bridge", "--index", str(index))
    assert first.returncode == 0, first.stderr
    (corpus / "notes" / "halden.md").write_text(
        HALDEN + "He retired in 1990 and bred Arctic foxes on the island of Senja.\n", encoding="utf-8"
    )
    (corpus / "bakery.txt").unlink()
    (corpus / "notes" / "ferries.md").write_text(
        "# Quill Ferries\n\nQuill Ferries runs the night boat from Hull to Rotterdam.\n", encoding="utf-8"
    )
    update = cli("index", "--index", str(index), "--update")  # PATHs default to the recorded ones
    assert update.returncode == 0, update.stderr
    assert summary_of(update) == {
        "files": 4,
        "indexed": 2,
        "added": 1,
        "changed": 1,
        "deleted": 1,
        "unchanged": 3,  # varga.md and the two people.jsonl lines: not re-embedded
        "skipped": 1,
        "failed": 0,
    }
    record = read_sources(index)
    assert record is not None
    assert record.state == "complete"
    assert set(record.sources) == {"notes/halden.md", "notes/varga.md", "people.jsonl", "notes/ferries.md"}
    foxes = query_json(index, "Who bred Arctic foxes on Senja?", "-k", "1")
    assert foxes["results"][0]["metadata"]["source"] == "notes/halden.md"
    assert "Arctic foxes" in foxes["results"][0]["text"]
    every = query_json(index, "sourdough bakery in Leeds", "-k", "10")
    sources = {r["metadata"]["source"] for r in every["results"]}
    assert "bakery.txt" not in sources
    assert "notes/ferries.md" in sources


# --------------------------------------------------------------------- in-process, over a fake strategy


class JournalFake:
    """A persisted word-overlap strategy (its documents saved as a generation under ``DIR/<name>``).

    ``fail`` makes the next matching call raise: ``"build"`` in :meth:`from_documents` after the
    index directory was written to, ``"add"`` in :meth:`add_documents` (after the deletions
    were saved: a crash between the two).
    """

    name: ClassVar[str] = "journal-fake"
    provenance_keys: ClassVar[frozenset[str]] = frozenset({"found_by"})
    fail: ClassVar[str | None] = None
    adds: ClassVar[list[list[str]]] = []

    def __init__(self, directory: Path, docs: dict[str, Document]) -> None:
        self.directory = directory
        self.docs = docs

    @property
    def default_k(self) -> int:
        return 4

    @classmethod
    def from_documents(
        cls, documents: Iterable[Document], *, persist_directory: Any = None, store: Any = None, **_: Any
    ) -> JournalFake:
        rag = cls(Path(persist_directory) / cls.name, {})
        rag.directory.mkdir(parents=True)
        if JournalFake.fail == "build":
            JournalFake.fail = None
            raise RuntimeError("simulated failure in the middle of a build")
        rag.add_documents(list(documents))
        return rag

    @classmethod
    def from_store(cls, store: Any, **_: Any) -> JournalFake:
        raise NotImplementedError

    @classmethod
    def load(cls, path: Any, *, store: Any = None, refresh_interval: float | None = 1.0) -> JournalFake:
        assert refresh_interval is None, "the CLI loads without following the writer"
        directory = Path(path) / cls.name
        data = json_from_bytes(load_index(directory, kind="fake", version=1)[1]["docs.json"])
        return cls(directory, {i: Document(text=t, id=i) for i, t in data.items()})

    def add_documents(self, documents: Sequence[Document]) -> list[str]:
        if JournalFake.fail == "add":
            JournalFake.fail = None
            raise RuntimeError("simulated crash between delete_documents and add_documents")
        ids = [str(d.id) for d in documents]
        clash = sorted(set(ids) & set(self.docs))
        if clash:
            raise ValueError(f"document ids already indexed: {clash}")
        self.docs.update({str(d.id): d for d in documents})
        JournalFake.adds.append(ids)
        self.save(self.directory)
        return ids

    def delete_documents(self, doc_ids: Sequence[str]) -> int:
        gone = [i for i in doc_ids if self.docs.pop(i, None) is not None]  # unknown ids: ignored
        self.save(self.directory)
        return len(gone)

    def save(self, path: Any) -> None:
        save_index(
            path,
            {"docs.json": json_to_bytes({i: d.text for i, d in self.docs.items()})},
            {},
            kind="fake",
            version=1,
        )

    def retrieve(self, query: str, k: int | None = None, **options: Any) -> list[Retrieved]:
        return []

    def retrieve_by_vector(
        self, query: str, query_vector: Any, k: int | None = None, **options: Any
    ) -> list[Retrieved]:
        return []


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[JournalFake]:
    import core.strategies.registry as registry

    # registered for this test only: other tests see the built-in strategies alone
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    name = f"journal-fake-{uuid.uuid4().hex[:8]}"
    cls = type("JournalFakeCopy", (JournalFake,), {"name": name})
    register_strategy(cls)  # type: ignore[arg-type]
    JournalFake.fail = None
    JournalFake.adds = []
    return cls  # type: ignore[return-value]


@pytest.fixture
def fake_index(tmp_path: Path, fake: type[JournalFake]) -> tuple[Path, Path]:
    """``(corpus, index)``: the small corpus, indexed with the fake strategy."""
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    _run(corpus, tmp_path / "index", fake.name)
    return corpus, tmp_path / "index"


def _run(
    corpus: Path,
    index: Path,
    strategy: str | None,
    *,
    update: bool = False,
    paths: Sequence[str] | None = None,
) -> indexing.IndexSummary:
    options = IndexOptions(
        paths=[str(corpus)] if paths is None else paths,
        index_dir=str(index),
        strategy=strategy,
        update=update,
        progress=False,
    )
    import io

    return run_index(options, out=io.StringIO(), err=io.StringIO())


def _stored(index: Path, fake: type[JournalFake]) -> dict[str, str]:
    data: dict[str, str] = json_from_bytes(
        load_index(index / fake.name, kind="fake", version=1)[1]["docs.json"]
    )
    return data


def test_failed_first_build_removes_the_directory_it_created(tmp_path: Path, fake: type[JournalFake]) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    JournalFake.fail = "build"
    with pytest.raises(RuntimeError, match="simulated failure"):
        _run(corpus, tmp_path / "new" / "index", fake.name)
    assert not (tmp_path / "new" / "index").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "mine.txt").write_text("the user's own file", encoding="utf-8")
    JournalFake.fail = "build"
    with pytest.raises(RuntimeError, match="simulated failure"):
        _run(corpus, kept, fake.name)
    assert sorted(p.name for p in kept.iterdir()) == ["mine.txt"]


def test_crash_between_delete_and_add_is_repaired_by_the_next_update(
    tmp_path: Path, fake: type[JournalFake], fake_index: tuple[Path, Path]
) -> None:
    corpus, index = fake_index
    (corpus / "bakery.txt").write_text("The bakery now sells bagels.", encoding="utf-8")
    JournalFake.fail = "add"
    with pytest.raises(RuntimeError, match="simulated crash"):
        _run(corpus, index, None, update=True)
    record = read_sources(index)
    assert record is not None
    assert record.state == "updating"
    assert record.sources["bakery.txt"].pending
    assert "bakery.txt" not in _stored(index, fake)  # deleted, not yet re-added
    (corpus / "bakery.txt").write_text(BAKERY, encoding="utf-8")  # even reverted, it is re-added
    summary = _run(corpus, index, None, update=True)
    assert (summary.changed, summary.added, summary.unchanged) == (1, 0, 4)
    assert _stored(index, fake)["bakery.txt"] == BAKERY
    record = read_sources(index)
    assert record is not None
    assert record.state == "complete"
    assert not record.sources["bakery.txt"].pending


def test_crash_after_the_strategy_saved_but_before_the_record_is_repaired(
    tmp_path: Path, fake: type[JournalFake], fake_index: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus, index = fake_index
    (corpus / "notes" / "new.md").write_text("# New\n\nA new note.", encoding="utf-8")
    (corpus / "notes" / "varga.md").unlink()
    calls = []

    def crash_on_final_write(directory: Any, record: Any) -> None:
        calls.append(record.state)
        if record.state == "complete":
            raise KeyboardInterrupt  # the process dies before the final record is written
        real_write(directory, record)

    real_write = indexing.write_sources
    monkeypatch.setattr(indexing, "write_sources", crash_on_final_write)
    with pytest.raises(KeyboardInterrupt):
        _run(corpus, index, None, update=True)
    monkeypatch.setattr(indexing, "write_sources", real_write)
    assert calls == ["updating", "complete"]
    assert "notes/new.md" in _stored(index, fake)  # the strategy has it, the record does not
    summary = _run(corpus, index, None, update=True)
    # the journal named both: the new note is re-indexed (its ids deleted first, so no "already
    # indexed" error), the vanished note's ids are deleted again (harmless)
    assert (summary.changed, summary.added, summary.deleted) == (1, 0, 1)
    stored = _stored(index, fake)
    assert "notes/new.md" in stored
    assert "notes/varga.md" not in stored
    assert _run(corpus, index, None, update=True).indexed == 0  # and now everything is recorded


def test_update_without_changes_writes_nothing_to_the_strategy(
    tmp_path: Path, fake: type[JournalFake]
) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    index = tmp_path / "index"
    first = _run(corpus, index, fake.name)
    assert (first.added, first.files_read, first.skipped) == (5, 4, 1)
    generation = (index / fake.name / "CURRENT").read_text()
    again = _run(corpus, index, None, update=True)
    assert (again.indexed, again.deleted, again.unchanged) == (0, 0, 5)
    assert (index / fake.name / "CURRENT").read_text() == generation
    assert len(JournalFake.adds) == 1  # the first build's only


def test_update_errors(tmp_path: Path, fake: type[JournalFake]) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    with pytest.raises(CommandError, match="is not a bridge-rag index, so there is nothing to --update"):
        _run(corpus, tmp_path / "none", None, update=True)
    index = tmp_path / "index"
    _run(corpus, index, fake.name)
    with pytest.raises(CommandError, match=f"holds a {fake.name} index, not bridge"):
        _run(corpus, index, "bridge", update=True)
    emptied = tmp_path / "emptied"
    emptied.mkdir()  # every file deleted, or the wrong folder: never read as "delete everything"
    with pytest.raises(indexing.NoFilesError, match=f"An update never empties an index: .*delete {index}"):
        _run(emptied, index, None, update=True)
    assert _stored(index, fake)  # nothing was deleted
    blanked = tmp_path / "blanked"  # the files are there, but every one reads as empty
    for source in corpus.rglob("*"):
        if source.is_file():
            target = blanked / source.relative_to(corpus)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("")
    with pytest.raises(indexing.NoFilesError, match=r"hold no text .*an update never empties an index"):
        _run(blanked, index, None, update=True)
    assert _stored(index, fake)
    path = index / SOURCES_FILE
    path.write_bytes(path.read_bytes().replace(b'"complete"', b'"building"'))
    with pytest.raises(ValueError, match="checksum does not match"):
        _run(corpus, index, None, update=True)


def test_plan_update_counts_and_journal() -> None:
    root = Path("/r")

    def rf(source: str, data: str, ids: Sequence[str]) -> ReadFile:
        return ReadFile(
            SourceFile(root / source, root, source), sha256_hex(data), [Document(data, id=i) for i in ids]
        )

    previous = {
        "same.md": SourceEntry("/r", sha256_hex("same"), ("same.md",)),
        "edit.jsonl": SourceEntry("/r", sha256_hex("old"), ("a", "b")),
        "gone.md": SourceEntry("/r", sha256_hex("gone"), ("gone.md",)),
        "broken.md": SourceEntry("/r", sha256_hex("broken"), ("broken.md",)),
        "pending.md": SourceEntry("/r", None, ("pending.md",)),
    }
    plan = plan_update(
        previous,
        [
            rf("same.md", "same", ["same.md"]),
            rf("edit.jsonl", "new", ["b", "c"]),
            rf("pending.md", "p", ["pending.md"]),
        ],
        failed={"broken.md"},
    )
    s = plan.summary
    assert (s.unchanged, s.changed, s.added, s.deleted) == (1, 2, 1, 2)
    assert sorted(plan.delete_ids) == ["a", "b", "c", "gone.md", "pending.md"]
    assert [d.id for d in plan.add] == ["b", "c", "pending.md"]
    assert plan.pending["edit.jsonl"] == SourceEntry("/r", None, ("a", "b", "c"))
    assert plan.pending["gone.md"].pending
    assert set(plan.entries) == {"same.md", "edit.jsonl", "pending.md", "broken.md"}
    assert plan.entries["edit.jsonl"].ids == ("b", "c")


def test_cli_main_maps_command_errors_to_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from core.app.cli import main

    assert (
        main(["index", str(tmp_path / "missing"), "--strategy", "bridge", "--index", str(tmp_path / "i")])
        == 2
    )
    assert "bridge-rag index: error: " in capsys.readouterr().err
    assert main(["query", str(tmp_path), "q", "--filter", "[1]"]) == 2
    assert "--filter must be a JSON object" in capsys.readouterr().err
    from core.writer_lock import CatchUpError

    def cannot_catch_up(*_: Any, **__: Any) -> None:
        raise CatchUpError("another worker's newer save cannot be loaded")

    def disk_full(*_: Any, **__: Any) -> None:
        raise OSError(28, "No space left on device")

    for failure, message in ((cannot_catch_up, "another worker's newer save"), (disk_full, "No space left")):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(indexing, "run_index", failure)
            assert main(["index", str(tmp_path), "--update", "--index", str(tmp_path / "i")]) == 2
        assert f"bridge-rag index: error: {message}" in capsys.readouterr().err.replace("[Errno 28] ", "")
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_a_first_build_killed_before_its_save_is_named_as_such(
    tmp_path: Path, fake: type[JournalFake], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record of a first build says so until the build completes, so a kill is not an update."""
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    index = tmp_path / "index"
    monkeypatch.setattr(indexing, "_remove_created", lambda *_: None)  # as if SIGKILLed: no clean-up
    JournalFake.fail = "build"
    with pytest.raises(RuntimeError, match="simulated failure"):
        _run(corpus, index, fake.name)
    record = read_sources(index)
    assert record is not None
    assert record.state == "building"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    server = {"kind": "http", "host": "127.0.0.1", "port": 8000, "collection": "notes"}
    elsewhere = {"pid": os.getpid(), "host": "buildbox-2", "started": "1"}  # cannot be checked from here
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, r"is being built by a running `bridge-rag index` \(pid"),  # its builder: this process
        ({"builder": {**(record.builder or {}), "pid": int(gone.stdout)}}, "first build that did not finish"),
        ({"store": server}, "its collection 'notes' on the Chroma server and run"),
        ({"builder": elsewhere}, r"may still be running as pid \d+ on buildbox-2\. If no"),
        ({"builder": None, "store": {}}, "first build that did not finish"),  # a record of an older version
    ]
    for change, message in cases:
        record = dataclasses.replace(record, **change)
        indexing.write_sources(index, record)
        for update in (False, True):
            with pytest.raises(CommandError, match=message):
                _run(corpus, index, fake.name, update=update)


def test_records_are_final_before_the_writer_lock_is_let_go(
    tmp_path: Path, fake: type[JournalFake], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command waiting on the lock reads the finished record, never the journal of one that let go."""
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    index = tmp_path / "index"
    states: list[str] = []

    def close(rag: Any) -> None:
        record = read_sources(index)
        states.append(record.state if record is not None else "none")

    monkeypatch.setattr(indexing, "_close", close)
    _run(corpus, index, fake.name)
    (corpus / "new.txt").write_text("Agnes Moor built the Greywater bridge.", encoding="utf-8")
    _run(corpus, index, None, update=True)
    assert states == ["complete", "complete"]


def test_an_update_with_nothing_to_do_never_writes_over_a_newer_record(
    tmp_path: Path, fake_index: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus, index = fake_index
    planned = indexing.plan_update
    first = [True]

    def another_update_lands(*args: Any) -> Any:
        plan = planned(*args)  # this update's plan: nothing changed
        if first:
            first.clear()
            (corpus / "new.txt").write_text("Agnes Moor built the Greywater bridge.", encoding="utf-8")
            _run(corpus, index, None, update=True)  # another update adds a file meanwhile
        return plan

    monkeypatch.setattr(indexing, "plan_update", another_update_lands)
    assert _run(corpus, index, None, update=True).unchanged == 5
    record = read_sources(index)
    assert record is not None
    assert "new.txt" in record.sources  # the newer record stands


def test_a_sources_file_that_is_not_a_file_is_named(tmp_path: Path, fake: type[JournalFake]) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    index = tmp_path / "index"
    (index / SOURCES_FILE).mkdir(parents=True)
    with pytest.raises(CommandError, match=r"damaged bridge-rag record \(sources\.json\)"):
        _run(corpus, index, fake.name)
    (index / SOURCES_FILE).rmdir()
    (index / SOURCES_FILE).symlink_to(tmp_path / "nowhere")
    with pytest.raises(CommandError, match="damaged"):
        _run(corpus, index, fake.name)


def test_an_update_refuses_when_another_finished_meanwhile(
    tmp_path: Path, fake_index: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another update's record, written while this one read the files, is kept: this one writes nothing."""
    corpus, index = fake_index
    (corpus / "new.txt").write_text("Agnes Moor built the Greywater bridge.", encoding="utf-8")
    opened = indexing._open_for_update
    first = [True]

    def other_update_first(*args: Any) -> Any:
        if first:
            first.clear()
            _run(corpus, index, None, update=True)  # the other update, which finishes first
        return opened(*args)

    monkeypatch.setattr(indexing, "_open_for_update", other_update_first)
    with pytest.raises(CommandError, match=r"changed .* while this one read the files; nothing was written"):
        _run(corpus, index, None, update=True)
    record = read_sources(index)
    assert record is not None
    assert record.state == "complete"
    assert JournalFake.adds[-1] == ["new.txt"]  # the other update's add, once


def test_an_update_is_refused_while_another_process_writes_the_index(
    built: tuple[Path, Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    from core.strategies.bridge import BridgeRAG
    from core.writer_lock import IndexLockedError

    corpus, index, _ = built
    shutil.copytree(corpus, tmp_path / "docs")
    shutil.copytree(index, tmp_path / "index")
    before = (tmp_path / "index" / SOURCES_FILE).read_bytes()
    (tmp_path / "docs" / "new.txt").write_text("Agnes Moor built the Greywater bridge.", encoding="utf-8")
    writer = BridgeRAG.load(tmp_path / "index")
    writer.add_documents([Document("Pieter Ashby drew the Corvane maps.", id="app-doc")])  # holds the lock
    docs, folder = str(tmp_path / "docs"), str(tmp_path / "index")
    options = IndexOptions(paths=[docs], index_dir=folder, update=True, progress=False)
    with pytest.raises(IndexLockedError, match="writer"):
        run_index(options)
    assert (tmp_path / "index" / SOURCES_FILE).read_bytes() == before  # no journal
    writer.close()
    assert run_index(options).added == 1


def test_a_build_that_meets_another_build_starting_there_writes_nothing(
    tmp_path: Path, fake: type[JournalFake], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two first builds into one new directory: the second to write its record leaves, touching nothing."""
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    index = tmp_path / "index"
    checked = indexing._already_indexed

    def other_build_starts(directory: Path) -> str | None:
        why = checked(directory)
        directory.mkdir()
        (directory / SOURCES_FILE).write_text("the other build's record", encoding="utf-8")
        (directory / "chroma").mkdir()  # and its store
        return why

    monkeypatch.setattr(indexing, "_already_indexed", other_build_starts)
    with pytest.raises(CommandError, match=r"started building into .* meanwhile; nothing was written"):
        _run(corpus, index, fake.name)
    assert (index / SOURCES_FILE).read_text(encoding="utf-8") == "the other build's record"
    assert sorted(p.name for p in index.iterdir()) == ["chroma", SOURCES_FILE]


def test_a_readable_strategy_folder_is_chosen_before_a_damaged_one(tmp_path: Path) -> None:
    (tmp_path / "bridge" / "gen-000001").mkdir(parents=True)  # a generation without a manifest
    save_index(tmp_path / "umg", {"docs.json": json_to_bytes({})}, {}, kind="umg", version=1)
    assert indexing.detect_strategy(tmp_path, None) == "umg"
    shutil.rmtree(tmp_path / "umg")
    assert indexing.detect_strategy(tmp_path, None) == "bridge"  # then the damage is named on load


def test_an_index_whose_current_file_is_lost_still_updates(
    tmp_path: Path, fake: type[JournalFake], fake_index: tuple[Path, Path]
) -> None:
    """The command finds a save as ``load`` finds it: without ``CURRENT``, the newest generation."""
    corpus, index = fake_index
    (index / fake.name / "CURRENT").unlink()
    (corpus / "new.txt").write_text("Agnes Moor built the Greywater bridge.", encoding="utf-8")
    summary = _run(corpus, index, None, update=True)
    assert summary.added == 1
    assert "new.txt" in _stored(index, fake)


# --------------------------------------------------------------------- hostile input folders

WARNING = "bridge-rag index: warning: "


def _index_main(*args: str) -> int:
    from core.app.cli import main

    return main(["index", *args, "--no-progress"])


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(WARNING)]


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX symlinks")
def test_index_skips_links_outside_and_large_files_with_one_line_warnings(
    tmp_path: Path, fake: type[JournalFake], capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    secret = tmp_path / "outside" / "secret.md"
    secret.parent.mkdir()
    secret.write_text("# Secret\n\nThe outside file.", encoding="utf-8")
    (corpus / "notes" / "link.md").symlink_to(secret)
    (corpus / "loop").symlink_to(corpus, target_is_directory=True)
    (corpus / "big.txt").write_text("word " * 5000, encoding="utf-8")  # 25,000 bytes
    index = tmp_path / "index"
    assert (
        _index_main(str(corpus), "--strategy", fake.name, "--index", str(index), "--max-file-mb", "0.02") == 0
    )
    out, err = capsys.readouterr()
    assert sorted(_warnings(err)) == [
        f"{WARNING}{str(corpus / 'big.txt')!r} skipped: 25,000 bytes (0.02 MB) is above --max-file-mb 0.02; "
        "pass --max-file-mb 1 to read it",
        f"{WARNING}{str(corpus / 'loop')!r} skipped: a symlink to {str(corpus)!r}, inside the folder; links "
        "inside the folder are not followed (what they point to is read at its own path)",
        f"{WARNING}{str(corpus / 'notes' / 'link.md')!r} skipped: a symlink to {str(secret)!r}, outside the "
        "folder; pass --follow-symlinks to read it",
    ]
    assert "4 files read; 5 documents indexed" in out
    assert "4 skipped, 0 failed" in out  # photo.png (not named), big.txt, loop, link.md
    assert set(_stored(index, fake)) == {
        "notes/halden.md",
        "notes/varga.md",
        "bakery.txt",
        "p-ferro",
        "people.jsonl#line2",
    }
    again = tmp_path / "again"
    assert _index_main(str(corpus), "--strategy", fake.name, "--index", str(again), "--follow-symlinks") == 0
    out, err = capsys.readouterr()
    assert "6 files read" in out  # the link and the large file too (the default limit, 100 MB)
    assert [w for w in _warnings(err) if "link.md" in w or "big.txt" in w] == []
    assert _stored(again, fake)["notes/link.md"] == "# Secret\n\nThe outside file."


def test_file_names_in_warnings_and_errors_reach_the_terminal_without_controls(
    tmp_path: Path, fake: type[JournalFake], capsys: pytest.CaptureFixture[str]
) -> None:
    """A file name is data: its escape sequences and bidi overrides are not printed."""
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    (corpus / "\x1b[31mred\x1b[0m.txt").write_bytes(b"\xff\xfe not UTF-8")
    (corpus / "\x1b]0;pwn\x07empty.txt").write_text("   \n", encoding="utf-8")
    (corpus / "\u202etxt.exe.txt").write_bytes(b"\xff")
    assert _index_main(str(corpus), "--strategy", fake.name, "--index", str(tmp_path / "index")) == 0
    err = capsys.readouterr().err
    assert not re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", err), ascii(err)
    assert f"cannot read {corpus / 'red.txt'}: not valid UTF-8" in err
    assert f"{corpus / 'empty.txt'}: no text, skipped" in err
    assert _index_main(str(corpus), "--strict", "--strategy", fake.name, "--index", str(tmp_path / "b")) == 2
    strict = capsys.readouterr().err
    assert "txt.exe.txt" in strict
    assert "\u202e" not in strict


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX symlinks")
def test_update_uses_the_same_rules(
    tmp_path: Path, fake: type[JournalFake], capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    index = tmp_path / "index"
    assert _index_main(str(corpus), "--strategy", fake.name, "--index", str(index)) == 0
    secret = tmp_path / "outside.md"
    secret.write_text("# Outside\n\nLinked in later.", encoding="utf-8")
    (corpus / "linked.md").symlink_to(secret)
    (corpus / "bakery.txt").write_text(BAKERY * 100, encoding="utf-8")  # now above 0.01 MB
    capsys.readouterr()
    assert _index_main("--index", str(index), "--update", "--max-file-mb", "0.01") == 0
    out, err = capsys.readouterr()
    warned = "\n".join(_warnings(err))
    assert "3 files read; 0 documents indexed (0 added, 0 changed, 1 deleted, 4 unchanged); 3 skipped" in out
    assert (
        f"{str(corpus / 'linked.md')!r} skipped: a symlink to {str(secret)!r}, outside the folder" in warned
    )
    assert f"{str(corpus / 'bakery.txt')!r} skipped: " in warned
    assert "is above --max-file-mb 0.01" in warned
    stored = _stored(index, fake)
    assert "bakery.txt" not in stored  # the index mirrors what a new build would read
    assert "linked.md" not in stored
    capsys.readouterr()
    assert _index_main("--index", str(index), "--update", "--follow-symlinks") == 0
    stored = _stored(index, fake)
    assert stored["linked.md"] == "# Outside\n\nLinked in later."
    assert "bakery.txt" not in stored  # the limit the last update was given holds until changed
    assert (
        "reading the files with the settings recorded for this index: --max-file-mb 0.01"
        in capsys.readouterr().err
    )
    assert _index_main("--index", str(index), "--update", "--max-file-mb", "1") == 0
    stored = _stored(index, fake)
    assert stored["bakery.txt"] == BAKERY * 100
    assert "linked.md" in stored  # --follow-symlinks is kept too
    assert _index_main("--index", str(index), "--update", "--no-follow-symlinks") == 0
    assert "linked.md" not in _stored(index, fake)


def _built_with_md_glob(tmp_path: Path, fake: type[JournalFake]) -> tuple[Path, Path]:
    """The test corpus indexed with ``--glob '*.md'``: (corpus, index)."""
    corpus = write_corpus(tmp_path / "docs", bad_file=False, pdf=False)
    index = tmp_path / "index"
    assert _index_main(str(corpus), "--strategy", fake.name, "--index", str(index), "--glob", "*.md") == 0
    return corpus, index


def test_update_reads_the_files_as_the_build_was_told(
    tmp_path: Path, fake: type[JournalFake], capsys: pytest.CaptureFixture[str]
) -> None:
    """A file the build's --glob left out stays out of every later --update that does not change it."""
    corpus, index = _built_with_md_glob(tmp_path, fake)
    built = set(_stored(index, fake))
    assert built == {"notes/halden.md", "notes/varga.md"}
    record = read_sources(index)
    assert record is not None
    assert record.reading is not None
    assert record.reading.globs == ("*.md",)
    (corpus / "notes" / "new.md").write_text("# Nina Rask\n\nNina Rask paints ships.", encoding="utf-8")
    capsys.readouterr()
    assert _index_main("--index", str(index), "--update") == 0
    out, err = capsys.readouterr()
    assert set(_stored(index, fake)) == built | {"notes/new.md"}  # not bakery.txt nor people.jsonl
    assert "1 added, 0 changed, 0 deleted, 2 unchanged" in out
    assert (
        "reading the files with the settings recorded for this index: --glob '*.md' "
        "(give the option to change it)" in err
    )
    assert _index_main("--index", str(index), "--update", "--glob", "*") == 0  # every file, now recorded
    assert "bakery.txt" in _stored(index, fake)
    assert _index_main("--index", str(index), "--update") == 0
    assert "bakery.txt" in _stored(index, fake)


def test_an_interrupted_update_is_repaired_with_the_settings_it_was_given(
    tmp_path: Path, fake: type[JournalFake], capsys: pytest.CaptureFixture[str]
) -> None:
    """The journal holds the update's read settings: its repair does not go back to the old ones."""
    _, index = _built_with_md_glob(tmp_path, fake)
    JournalFake.fail = "add"
    with pytest.raises(RuntimeError, match="simulated crash"):
        _index_main("--index", str(index), "--update", "--glob", "*")
    JournalFake.fail = None
    capsys.readouterr()
    assert _index_main("--index", str(index), "--update") == 0
    assert "bakery.txt" in _stored(index, fake)  # the repair read every file, as the update was told
    assert "with the settings recorded for this index: --glob '*'" in capsys.readouterr().err


def test_a_record_without_read_settings_still_updates(
    tmp_path: Path, fake: type[JournalFake], fake_index: tuple[Path, Path]
) -> None:
    """A ``sources.json`` written before the read settings were kept reads with the defaults."""
    corpus, index = fake_index
    path = index / SOURCES_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    for reading, works in (
        (None, True),
        ({"globs": "*.md", "follow_symlinks": False, "max_file_mb": 1}, False),
    ):
        body = {k: v for k, v in data.items() if k not in ("checksum", "reading")}
        if reading is not None:
            body["reading"] = reading
        path.write_bytes(json_to_bytes({**body, "checksum": sha256_hex(json_to_bytes(body))}))
        if works:
            assert _run(corpus, index, fake.name, update=True).unchanged == 5
        else:
            with pytest.raises(ValueError, match="malformed field"):
                read_sources(index)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no os.mkfifo on this platform")
def test_index_never_opens_a_fifo(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    os.mkfifo(folder / "pipe.md")  # reading it would block forever: no writer ever comes
    index = tmp_path / "index"
    result = cli("index", str(folder), "--strategy", "bridge", "--index", str(index), timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{WARNING}{str(folder / 'pipe.md')!r} skipped: a FIFO (named pipe), not a regular file (only "
        "regular files are read)",
        f"bridge-rag index: error: no .txt, .md, .jsonl, .pdf files under {str(folder)!r} (1 other file "
        "skipped); point at the folders that hold your documents",
    ]
    assert not index.exists()


@pytest.mark.parametrize("value", ["0", "-1", "-0.5", "abc", "nan", "inf", ""])
def test_max_file_mb_rejects_what_is_not_a_positive_number(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        _index_main(
            str(tmp_path), "--strategy", "bridge", "--index", str(tmp_path / "i"), "--max-file-mb", value
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert (
        f"argument --max-file-mb: expected a positive number of megabytes (e.g. 100 or 0.5), got {value!r}"
    ) in err
    assert not (tmp_path / "i").exists()


def test_index_help_documents_the_input_limits(capsys: pytest.CaptureFixture[str]) -> None:
    from core.app.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["index", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "--follow-symlinks, --no-follow-symlinks also read the files and folders that symlinks inside the "
        "folders lead to" in text
    )
    assert "--max-file-mb MB skip files larger than this many MB (of 2^20 bytes), with a warning" in text
    assert "(default 100; --update keeps the index's limit unless given)" in text
