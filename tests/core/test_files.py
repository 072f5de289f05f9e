"""Finding and reading the user's files into documents (core.app.files); no model, no Chroma."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from core.app.files import (
    MB,
    PDF_INSTALL_HINT,
    FileScan,
    SkippedPath,
    SourceFile,
    UnreadableFileError,
    discover_files,
    markdown_title,
    read_file,
    sha256_hex,
)
from core.strategies.subjects import unit_subjects
from core.types import TITLE_FROM_FILE_NAME
from tests.pdf_bytes import minimal_pdf


def _source(path: Path, source: str | None = None) -> SourceFile:
    return SourceFile(path, path.parent.absolute(), source or path.name)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "notes" / "deep").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD.txt").write_text("ref", encoding="utf-8")
    (root / "notes" / "a.md").write_text("# Alpha\n\nAlpha text.", encoding="utf-8")
    (root / "notes" / "deep" / "b.txt").write_text("Bravo text.", encoding="utf-8")
    (root / "c.jsonl").write_text('{"text": "Charlie"}\n', encoding="utf-8")
    (root / "image.png").write_bytes(b"\x89PNG")
    (root / ".hidden.md").write_text("hidden", encoding="utf-8")
    return root


def test_discover_walks_folders_skips_other_extensions_and_hidden_entries(tree: Path) -> None:
    scan = discover_files([tree])
    assert [f.source for f in scan.files] == ["c.jsonl", "notes/a.md", "notes/deep/b.txt"]
    assert all(f.root == tree.absolute() for f in scan.files)
    assert scan.skipped == [SkippedPath(tree / "image.png")]  # no reason: counted, not named
    assert scan.warnings() == []


def test_discover_file_argument_is_named_by_its_file_name(tree: Path) -> None:
    scan = discover_files([tree / "notes" / "deep" / "b.txt"])
    assert [(f.source, f.root) for f in scan.files] == [
        ("b.txt", (tree / "notes" / "deep" / "b.txt").absolute())
    ]


def test_discover_globs_filter_files_inside_folders(tree: Path) -> None:
    scan = discover_files([tree], globs=["*.md"])
    assert [f.source for f in scan.files] == ["notes/a.md"]
    assert len(scan.skipped) == 3


def test_discover_errors(tree: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        discover_files([tree / "missing"])
    with pytest.raises(ValueError, match="not a supported file"):
        discover_files([tree / "image.png"])
    other = tree.parent / "other"
    other.mkdir()
    (other / "c.jsonl").write_text('{"text": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"both be indexed as 'c\.jsonl'"):
        discover_files([tree, other / "c.jsonl"])


def test_markdown_title_is_the_first_level_one_heading_outside_code() -> None:
    assert markdown_title("intro\n```\n# not this\n```\n## Sub\n# Real Title ##\n") == "Real Title"
    assert markdown_title("no heading here") is None


def test_read_markdown_and_text(tree: Path) -> None:
    md = read_file(SourceFile(tree / "notes" / "a.md", tree.absolute(), "notes/a.md"))
    (doc,) = md.documents
    assert doc.id == "notes/a.md"
    assert dict(doc.metadata) == {
        "source": "notes/a.md",
        "title": "Alpha",
        "content_sha256": sha256_hex("# Alpha\n\nAlpha text."),
    }
    assert md.sha256 == sha256_hex((tree / "notes" / "a.md").read_bytes())
    txt = read_file(_source(tree / "notes" / "deep" / "b.txt"))
    assert txt.documents[0].metadata["title"] == "b"
    assert txt.documents[0].metadata[TITLE_FROM_FILE_NAME] is True  # a label, never an entity


def test_a_title_from_a_file_name_is_never_what_the_document_is_about(tmp_path: Path) -> None:
    path = tmp_path / "report-44.txt"
    path.write_text("Green Fields Agriculture Ltd raised its dividend in 2021. The board met twice.")
    (doc,) = read_file(_source(path)).documents
    assert doc.metadata["title"] == "report-44"
    (subjects,) = unit_subjects([doc.id], [doc.text], [doc.metadata])
    assert subjects.title == "Green Fields Agriculture Ltd"  # read from the text instead
    assert not any("report" in name.lower() for name in subjects.about)
    titled = dict(doc.metadata, **{TITLE_FROM_FILE_NAME: False, "title": "Annual report"})
    (given,) = unit_subjects([doc.id], [doc.text], [titled])
    assert given.title == "Annual report"  # a title of its own still is the subject


def test_read_jsonl_ids_titles_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "people.jsonl"
    rows = [
        {"id": "p1", "title": "Ann", "text": "Ann text", "tenant": "acme", "doc_id": "dropped"},
        {"text": "Bob text", "year": 2020},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows[:1]) + "\n\n" + json.dumps(rows[1]) + "\n")
    docs = read_file(_source(path, "sub/people.jsonl")).documents
    assert [d.id for d in docs] == ["p1", "sub/people.jsonl#line3"]
    assert docs[0].metadata == {
        "tenant": "acme",
        "source": "sub/people.jsonl",
        "title": "Ann",
        "content_sha256": sha256_hex("Ann text"),
    }
    assert docs[1].metadata["title"] == "people"
    assert docs[1].metadata[TITLE_FROM_FILE_NAME] is True
    assert TITLE_FROM_FILE_NAME not in docs[0].metadata
    assert docs[1].metadata["year"] == 2020


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"text": "ok"}\n{not json}\n', "line 2 is not valid JSON"),
        ('["a list"]\n', "line 1 is not a JSON object"),
        ('{"title": "no text"}\n', 'line 1 has no "text"'),
        ('{"text": "a", "id": 1}\n{"text": "b", "id": "1"}\n', "line 2 repeats the id '1' of line 1"),
        ('{"text": "a", "id": {"x": 1}}\n', '"id" must be a string'),
    ],
)
def test_read_jsonl_rejects_bad_lines(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UnreadableFileError, match=message) as exc:
        read_file(_source(path))
    assert exc.value.path == path


def test_read_rejects_bad_utf8_and_accepts_a_bom(tmp_path: Path) -> None:
    bad = tmp_path / "latin.txt"
    bad.write_bytes(b"caf\xe9")
    with pytest.raises(UnreadableFileError, match=r"not valid UTF-8 \(byte 0xe9 at offset 3\)"):
        read_file(_source(bad))
    bom = tmp_path / "bom.md"
    bom.write_bytes(b"\xef\xbb\xbf# Title\nbody")
    assert read_file(_source(bom)).documents[0].metadata["title"] == "Title"


def test_read_whitespace_file_gives_no_documents(tmp_path: Path) -> None:
    path = tmp_path / "blank.txt"
    path.write_text(" \n\t\n", encoding="utf-8")
    assert read_file(_source(path)).documents == []


def test_read_pdf(tmp_path: Path) -> None:
    pytest.importorskip("pypdf")
    path = tmp_path / "castell.pdf"
    path.write_bytes(minimal_pdf(["Wenonah Castell designs tidal turbines", "at the Orkney Marine Works."]))
    (doc,) = read_file(_source(path)).documents
    assert "Orkney Marine Works" in doc.text
    assert doc.id == "castell.pdf"
    assert doc.metadata["title"] == "castell"


def test_read_broken_pdf_names_the_problem(tmp_path: Path) -> None:
    pytest.importorskip("pypdf")
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\nthis is not really a pdf")
    with pytest.raises(UnreadableFileError, match="not a readable PDF"):
        read_file(_source(path))


def test_read_pdf_without_pypdf_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pypdf", None)  # import pypdf now raises ImportError
    path = tmp_path / "x.pdf"
    path.write_bytes(minimal_pdf(["text"]))
    with pytest.raises(UnreadableFileError, match="needs pypdf") as exc:
        read_file(_source(path))
    assert PDF_INSTALL_HINT in str(exc.value)


# --------------------------------------------------------------------- hostile folders

T = TypeVar("T")

needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX symlinks")
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no os.mkfifo on this platform")


def finishes(call: Callable[[], T], seconds: float = 30.0) -> T:
    """``call()``, run in a daemon thread: the test fails (rather than hangs) if it blocks."""
    box: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s (blocked on a FIFO or a link loop?)"
    if errors:
        raise errors[0]
    return box[0]


def reasons(scan: FileScan) -> dict[str, str]:
    """Each path skipped with a reason, by its name: the reason."""
    return {s.path.name: s.reason for s in scan.skipped if s.reason is not None}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the one indexed, with a file the user did not ask for."""
    folder = tmp_path / "outside"
    (folder / "deep").mkdir(parents=True)
    (folder / "secret.md").write_text("# Secret\n\nnot yours", encoding="utf-8")
    (folder / "deep" / "d.txt").write_text("deep outside", encoding="utf-8")
    return folder


@needs_symlinks
def test_a_symlink_to_a_file_outside_is_skipped_unless_follow_symlinks(tree: Path, outside: Path) -> None:
    (tree / "notes" / "link.md").symlink_to(outside / "secret.md")
    scan = discover_files([tree])
    assert "notes/link.md" not in [f.source for f in scan.files]
    why = reasons(scan)["link.md"]
    assert f"a symlink to {str(outside / 'secret.md')!r}, outside the folder" in why
    assert "pass --follow-symlinks to read it" in why
    assert f"{str(tree / 'notes' / 'link.md')!r} skipped: " in scan.warnings()[0]
    followed = discover_files([tree], follow_symlinks=True)
    assert "notes/link.md" in [f.source for f in followed.files]
    assert followed.warnings() == []
    (link,) = [f for f in followed.files if f.source == "notes/link.md"]
    assert read_file(link).documents[0].text.endswith("not yours")


@needs_symlinks
def test_a_symlinked_folder_outside_is_skipped_unless_follow_symlinks(tree: Path, outside: Path) -> None:
    (tree / "ext").symlink_to(outside, target_is_directory=True)
    (tree / "ext2").symlink_to(outside, target_is_directory=True)  # the same folder twice
    (tree / "secret.md").symlink_to(outside / "secret.md")  # and one of its files
    scan = discover_files([tree])
    assert [f.source for f in scan.files] == ["c.jsonl", "notes/a.md", "notes/deep/b.txt"]
    assert "pass --follow-symlinks" in reasons(scan)["ext"]
    followed = discover_files([tree], follow_symlinks=True)
    sources = [f.source for f in followed.files]
    assert [s for s in sources if s not in {"c.jsonl", "notes/a.md", "notes/deep/b.txt"}] == [
        "secret.md",
        "ext/deep/d.txt",
    ]
    assert reasons(followed) == {
        "ext2": "a folder already read (a symlink loop, or a second link)",
        "secret.md": f"the same file as {str(tree / 'secret.md')!r}, which is read",  # ext/secret.md
    }


@needs_symlinks
@pytest.mark.parametrize("follow", [False, True])
def test_a_symlink_loop_ends_and_reads_each_file_once(tree: Path, outside: Path, follow: bool) -> None:
    (tree / "notes" / "deep" / "up").symlink_to(tree, target_is_directory=True)  # a loop inside
    (tree / "ext").symlink_to(outside, target_is_directory=True)
    (outside / "self").symlink_to(outside, target_is_directory=True)  # a loop outside
    (outside / "back").symlink_to(tree, target_is_directory=True)  # and back in
    scan = finishes(lambda: discover_files([tree], follow_symlinks=follow))
    sources = [f.source for f in scan.files]
    assert len(sources) == len(set(sources))
    assert len({f.path.resolve() for f in scan.files}) == len(sources)
    own = ["c.jsonl", "notes/a.md", "notes/deep/b.txt"]
    assert "inside the folder; links inside the folder are not followed" in reasons(scan)["up"]
    if follow:
        assert sources == ["c.jsonl", "ext/secret.md", "ext/deep/d.txt", *own[1:]]
        assert "inside the folder" in reasons(scan)["back"]
        assert "a folder already read" in reasons(scan)["self"]
    else:
        assert sources == own
        assert "pass --follow-symlinks" in reasons(scan)["ext"]


@needs_symlinks
def test_a_symlink_inside_the_folder_is_skipped_as_its_target_is_read(tree: Path) -> None:
    (tree / "alias.md").symlink_to(tree / "notes" / "a.md")
    (tree / "broken.md").symlink_to(tree / "missing.md")
    for follow in (False, True):
        scan = discover_files([tree], follow_symlinks=follow)
        assert [f.source for f in scan.files] == ["c.jsonl", "notes/a.md", "notes/deep/b.txt"]
        assert "inside the folder" in reasons(scan)["alias.md"]
        assert reasons(scan)["broken.md"].startswith("a broken symlink")


@needs_symlinks
def test_a_symlink_named_on_the_command_line_is_read(tree: Path, outside: Path) -> None:
    link = tree.parent / "named.md"
    link.symlink_to(outside / "secret.md")
    scan = discover_files([link])
    assert [(f.source, f.path) for f in scan.files] == [("named.md", link)]
    folder = tree.parent / "named-folder"
    folder.symlink_to(outside, target_is_directory=True)
    assert [f.source for f in discover_files([folder]).files] == ["secret.md", "deep/d.txt"]


@needs_fifo
def test_a_fifo_is_skipped_without_being_opened(tree: Path) -> None:
    fifo = tree / "notes" / "pipe.md"
    os.mkfifo(fifo)  # opening it for reading would block until a writer comes: never
    scan = finishes(lambda: discover_files([tree]))
    assert "notes/pipe.md" not in [f.source for f in scan.files]
    assert reasons(scan)["pipe.md"] == "a FIFO (named pipe), not a regular file (only regular files are read)"
    named = finishes(lambda: discover_files([fifo]))
    assert named.files == []
    assert "a FIFO" in reasons(named)["pipe.md"]


@needs_fifo
def test_read_file_refuses_a_fifo_swapped_in_after_the_scan(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableFileError, match="a FIFO"):
        finishes(lambda: read_file(_source(fifo)))


def test_files_above_max_file_mb_are_skipped_before_reading(tree: Path) -> None:
    big = tree / "notes" / "big.txt"
    big.write_bytes(b"a" * (MB + 1))
    scan = discover_files([tree], max_file_mb=1)
    assert "notes/big.txt" not in [f.source for f in scan.files]
    assert reasons(scan)["big.txt"] == (
        "1,048,577 bytes (1.00 MB) is above --max-file-mb 1; pass --max-file-mb 2 to read it"
    )
    assert "notes/big.txt" in [f.source for f in discover_files([tree], max_file_mb=1.5).files]
    assert "notes/big.txt" in [f.source for f in discover_files([tree], max_file_mb=None).files]
    assert "big.txt" in reasons(discover_files([big], max_file_mb=0.5))  # named explicitly: the same
    assert [f.source for f in discover_files([tree]).files] == [
        "c.jsonl",
        "notes/a.md",
        "notes/big.txt",
        "notes/deep/b.txt",
    ]  # the default limit, 100 MB


def test_read_file_refuses_a_file_that_grew_above_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "grown.txt"
    path.write_bytes(b"a" * (MB // 2))
    (found,) = discover_files([path], max_file_mb=1).files
    path.write_bytes(b"a" * (MB + 10))
    with pytest.raises(UnreadableFileError, match=r"grew above --max-file-mb 1 while it was read"):
        read_file(found, max_file_mb=1)
    assert len(read_file(found).documents[0].text) == MB + 10  # no limit: all of it


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf")])
def test_max_file_mb_must_be_a_positive_number(tree: Path, value: float) -> None:
    with pytest.raises(ValueError, match="--max-file-mb must be a positive number of megabytes"):
        discover_files([tree], max_file_mb=value)
