"""Finding and reading the user's files into documents (core.files); no model, no Chroma."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from core.files import (
    PDF_INSTALL_HINT,
    SourceFile,
    UnreadableFileError,
    discover_files,
    markdown_title,
    read_file,
    sha256_hex,
)
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
    assert [p.name for p in scan.skipped] == ["image.png"]


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
