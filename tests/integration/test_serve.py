"""``bridge-rag serve``: a real server, started as a user starts it, asked through httpx.

One Bridge-RAG index is built with ``bridge-rag index`` over a few .txt files and served by
``python -m core.app.cli serve IDX --port 0`` (the port it picks is read from its log). The
answers are compared with ``bridge-rag query --json``; every class of bad request is sent; the
last test edits one file and deletes another, runs ``bridge-rag index --update`` while eight
threads keep asking, and checks that none of those requests failed and that the server then
answers from the new index. A failing retrieval (500) is provoked in-process, through a stub
index served by uvicorn in a thread.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from core.app.indexing import CommandError
from tests.core.test_cli_index import REPO, cli
from tests.integration.processes import stop

STARTUP_TIMEOUT_S = 240.0
SWITCH_TIMEOUT_S = 180.0
LISTENING = re.compile(r"on (http://127\.0\.0\.1:\d+) \(POST /retrieve")

DOCS = {
    "halden.txt": "Oskar Halden was a Norwegian glaciologist who founded the Halden Institute for Polar "
    "Studies in Tromso in 1962. He spent eleven winters on the Svalbard ice cap.\n",
    "varga.txt": "Ilona Varga is a Hungarian astronomer at the Marrowick Observatory. She discovered the "
    "comet Varga-Lind in 1987 and later directed the observatory.\n",
    "bakery.txt": "The Brindle Street Bakery in Leeds bakes sourdough rye loaves every morning. Its owner, "
    "Tomas Quill, opened the shop in 2011.\n",
    "ferro.txt": "Marco Ferro is an Italian violin maker in Cremona who restored the Aurelio violin in "
    "2004 for the city museum.\n",
    "rao.txt": "Saanvi Rao chairs the Kestrel Robotics board and designed an underwater drone that maps "
    "coral reefs off Mauritius.\n",
}
QUESTIONS = [
    "Who founded the Halden Institute for Polar Studies?",
    "Which comet did the Marrowick astronomer discover?",
    "Who restored the Aurelio violin?",
]
EDIT = " The bakery's new head baker, hired in 2024, is Philippa Orrin."
EDIT_QUESTION = "Who is the bakery's new head baker?"
DELETED = "rao.txt"


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
        "PYTHONPATH": str(REPO),
    }


@dataclass(frozen=True)
class Served:
    """A running ``bridge-rag serve`` and what it serves."""

    url: str
    docs: Path
    index: Path
    log: Path


def _start(index: Path, log: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    with open(log, "wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "core.app.cli", "serve", str(index), "--port", "0", *extra],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=_env(),
            cwd=REPO,
        )
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        match = LISTENING.search(log.read_text(errors="replace"))
        if match:
            try:
                if httpx.get(f"{match.group(1)}/health", timeout=10).status_code == 200:
                    return proc, match.group(1)
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    proc.kill()
    proc.wait(timeout=30)
    pytest.fail(f"bridge-rag serve did not come up:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("serve")
    docs = base / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    index = base / "idx"
    built = cli("index", str(docs), "--index", str(index), "--no-progress")
    assert built.returncode == 0, built.stderr
    log = base / "serve.log"
    proc, url = _start(index, log)
    try:
        yield Served(url, docs, index, log)
    finally:
        stop(proc)
    assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]


@pytest.fixture
def client(served: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, timeout=120) as c:
        yield c


def _retrieve(client: httpx.Client, query: str, k: int = 5, where: Any = None) -> dict[str, Any]:
    response = client.post("/retrieve", json={"query": query, "k": k, "filter": where})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _rounded(value: Any) -> Any:
    """Floats to 6 decimals, everywhere in a JSON value (scores may differ in the last bits)."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


# --------------------------------------------------------------------- answers


def test_health_names_the_index_the_generation_and_its_chunks(served: Served, client: httpx.Client) -> None:
    health = client.get("/health").json()
    assert health["status"] == "ok"
    assert health["strategy"] == "bridge"
    assert Path(health["index"]).resolve() == served.index.resolve()
    assert re.fullmatch(r"gen-\d+", health["generation"])
    assert health["chunks"] >= len(DOCS)
    listening = served.log.read_text(errors="replace")
    assert f"bridge index {served.index}" in listening
    assert "POST /retrieve, GET /health" in listening


def test_answers_are_those_of_query_json(served: Served, client: httpx.Client) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "core.app.cli", "query", str(served.index), "-k", "3", "--json"],
        input="\n".join(QUESTIONS) + "\n",
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    expected = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert [e["query"] for e in expected] == QUESTIONS
    for question, want in zip(QUESTIONS, expected, strict=True):
        got = _retrieve(client, question, k=3)
        assert [r["id"] for r in got["results"]] == [r["id"] for r in want["results"]], question
        assert [r["score"] for r in got["results"]] == pytest.approx(
            [r["score"] for r in want["results"]], abs=1e-6
        )
        assert _rounded(got) == _rounded(want)
        assert "found_by" in got["results"][0]["metadata"], "the provenance is in the metadata"
    top = _retrieve(client, QUESTIONS[0], k=1)["results"][0]
    assert top["metadata"]["source"] == "halden.txt"


def test_a_filter_keeps_only_the_matching_chunks(client: httpx.Client) -> None:
    only = _retrieve(client, QUESTIONS[0], where={"source": "bakery.txt"})
    assert only["results"], "the bakery's chunks pass the filter"
    assert {r["metadata"]["source"] for r in only["results"]} == {"bakery.txt"}
    two = _retrieve(client, QUESTIONS[2], k=10, where={"source": {"$in": ["ferro.txt", "varga.txt"]}})
    assert {r["metadata"]["source"] for r in two["results"]} == {"ferro.txt", "varga.txt"}
    none = _retrieve(client, QUESTIONS[2], where={"source": "no-such-file.txt"})
    assert none["results"] == []


def test_the_example_client_prints_the_results(served: Served) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "http_client.py"),
            QUESTIONS[2],
            "-k",
            "2",
            "--url",
            served.url,
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"2 results from bridge for {QUESTIONS[2]!r}")
    assert "1. [" in done.stdout
    assert "ferro.txt" in done.stdout
    refused = subprocess.run(
        [sys.executable, str(REPO / "examples" / "http_client.py"), "x", "-k", "0", "--url", served.url],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert refused.returncode == 1
    assert "refused the request (422)" in refused.stderr
    assert '"k" must be an integer' in refused.stderr


# --------------------------------------------------------------------- bad requests

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"", 400, "not valid JSON (it is empty)"),
        (b'{"query": "x",', 400, "not valid JSON"),
        (b"\xff\xfe\x00garbage", 400, "not valid JSON"),
        (b"[1, 2]", 422, "the body must be a JSON object"),
        (b'"just a string"', 422, "the body must be a JSON object"),
        (b'{"k": 2}', 422, '"query" is missing'),
        (b'{"query": "   "}', 422, "query is empty"),
        (b'{"query": 42}', 422, '"query" must be a string'),
        (b'{"query": null}', 422, '"query" must be a string'),
        (json.dumps({"query": "x" * 10_001}).encode(), 422, "above the limit of 10,000"),
        (b'{"query": "x", "k": "3"}', 422, '"k" must be an integer from 1 to 100'),
        (b'{"query": "x", "k": 2.5}', 422, '"k" must be an integer from 1 to 100'),
        (b'{"query": "x", "k": true}', 422, '"k" must be an integer from 1 to 100'),
        (b'{"query": "x", "k": null}', 422, '"k" must be an integer from 1 to 100'),
        (b'{"query": "x", "k": 0}', 422, '"k" must be an integer from 1 to 100'),
        (b'{"query": "x", "k": -3}', 422, '"k" must be an integer from 1 to 100'),
        (b'{"query": "x", "k": 101}', 422, "--max-k"),
        (b'{"query": "x", "filter": [1]}', 422, '"filter" must be a JSON object'),
        (b'{"query": "x", "filter": "source=a"}', 422, '"filter" must be a JSON object'),
        (b'{"query": "x", "filter": {"$regex": "a"}}', 422, "unsupported filter operator '$regex'"),
        (b'{"query": "x", "filter": {"source": {"$in": "a"}}}', 422, '"filter": '),
        (b'{"query": "x", "filter": {"$and": "a"}}', 422, '"filter": '),
        (b'{"query": "x", "top_k": 3}', 422, 'unknown field "top_k"'),
        (b"[" * 30_000 + b"]" * 30_000, 400, "not valid JSON"),
    ],
    ids=lambda value: value[:30].decode(errors="replace") if isinstance(value, bytes) else str(value),
)
def test_each_bad_request_gets_a_4xx_saying_what_to_send(
    client: httpx.Client, body: bytes, status: int, says: str
) -> None:
    response = client.post("/retrieve", content=body, headers=JSON)
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str)
    assert says in detail
    assert client.get("/health").status_code == 200


def test_a_deeply_nested_filter_is_answered(client: httpx.Client) -> None:
    where: dict[str, Any] = {"source": "halden.txt"}
    for _ in range(400):  # as deep as JSON parsing allows
        where = {"$and": [where, {"source": {"$ne": "rao.txt"}}]}
    answer = _retrieve(client, QUESTIONS[0], where=where)
    assert {r["metadata"]["source"] for r in answer["results"]} == {"halden.txt"}


def test_an_oversized_body_gets_413_before_it_is_read(client: httpx.Client) -> None:
    big = json.dumps({"query": "x" * 70_000}).encode()
    declared = client.post("/retrieve", content=big, headers=JSON)
    assert declared.status_code == 413
    assert "send at most 65,536 bytes" in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for i in range(0, len(big), 8192):
            yield big[i : i + 8192]

    streamed = client.post("/retrieve", content=chunks(), headers=JSON)
    assert streamed.status_code == 413
    assert "over 65,536 bytes" in streamed.json()["detail"]
    assert _retrieve(client, QUESTIONS[0], k=1)["results"]


def test_wrong_method_and_path_are_refused(client: httpx.Client) -> None:
    assert client.get("/retrieve").status_code == 405
    assert client.post("/search", json={"query": "x"}).status_code == 404


def test_a_plain_curl_body_without_a_json_content_type_is_read_as_json(client: httpx.Client) -> None:
    response = client.post(
        "/retrieve",
        content=json.dumps({"query": QUESTIONS[1], "k": 1}).encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},  # what `curl -d` sends
    )
    assert response.status_code == 200
    assert response.json()["results"][0]["metadata"]["source"] == "varga.txt"


# --------------------------------------------------------------------- the command's own errors


def test_serve_refuses_a_directory_that_is_not_an_index(tmp_path: Path) -> None:
    done = cli("serve", str(tmp_path), "--port", "0", timeout=120)
    assert done.returncode == 2
    assert "is not a bridge-rag index" in done.stderr


def test_serve_refuses_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("serve", str(tmp_path), "--port", str(port), timeout=120)
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "choose another --port" in done.stderr


def test_without_fastapi_the_error_names_the_serve_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import importlib.util

    from core.app import serve

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "fastapi" else real(name, *a)
    )
    with pytest.raises(CommandError, match=r"needs fastapi.*pip install 'bridge-rag\[serve\]'"):
        serve.run_server(tmp_path, port=0)


# --------------------------------------------------------------------- a failing retrieval


class _StubIndex:
    """Stands in for an OpenIndex: answers one result, and fails on the question "break"."""

    name = "stub"
    directory = Path("stub-index")

    def __init__(self) -> None:
        self.rag = SimpleNamespace(
            generation="gen-000001", num_chunks=1, config=SimpleNamespace(max_query_chars=100)
        )

    def retrieve(self, query: str, *, k: int, where: Any = None) -> list[Any]:
        if query == "break":
            raise RuntimeError("the stub index broke")
        return [SimpleNamespace(id="a::0", score=0.5, text="alpha", metadata={"source": "a.txt"})]


def test_a_failing_retrieval_answers_500_and_the_server_keeps_serving() -> None:
    import uvicorn

    from core.app.serve import create_app

    app = create_app(_StubIndex(), max_k=3, max_body_bytes=1024)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="none", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with httpx.Client(base_url=url, timeout=30) as c:
            broken = c.post("/retrieve", json={"query": "break", "k": 1})
            assert broken.status_code == 500
            assert "RuntimeError: the stub index broke" in broken.json()["detail"]
            assert "still serving" in broken.json()["detail"]
            fine = c.post("/retrieve", json={"query": "fine", "k": 1})
            assert fine.status_code == 200
            assert fine.json() == {
                "query": "fine",
                "strategy": "stub",
                "k": 1,
                "results": [{"id": "a::0", "score": 0.5, "text": "alpha", "metadata": {"source": "a.txt"}}],
            }
            assert c.post("/retrieve", json={"query": "x", "k": 4}).status_code == 422  # max_k=3
            too_long = {"query": "x" * 101, "k": 1}  # over the index's max_query_chars
            assert c.post("/retrieve", json=too_long).status_code == 422
            assert c.post("/retrieve", content=b"x" * 1025, headers=JSON).status_code == 413
            assert c.get("/health").json()["generation"] == "gen-000001"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
    assert not thread.is_alive()


# --------------------------------------------------------------------- an update under load


def test_requests_in_parallel_never_fail_while_the_index_is_updated(
    served: Served, client: httpx.Client
) -> None:
    before = client.get("/health").json()["generation"]
    assert EDIT.strip() not in _retrieve(client, EDIT_QUESTION, k=3)["results"][0]["text"]
    assert _retrieve(client, "underwater drone", where={"source": DELETED})["results"]

    bakery = served.docs / "bakery.txt"
    bakery.write_text(bakery.read_text(encoding="utf-8").rstrip("\n") + EDIT + "\n", encoding="utf-8")
    (served.docs / DELETED).unlink()
    update = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core.app.cli",
            "index",
            str(served.docs),
            "--index",
            str(served.index),
            "--update",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=REPO,
    )
    lock = threading.Lock()
    counts = {"sent": 0, "during": 0, "ok": 0}
    failures: list[str] = []
    update_done = threading.Event()

    def ask() -> None:
        with httpx.Client(base_url=served.url, timeout=120) as c:
            while True:
                with lock:
                    if (update_done.is_set() and counts["sent"] >= 300) or counts["sent"] >= 5000:
                        return
                    i = counts["sent"]
                    counts["sent"] += 1
                    if not update_done.is_set():
                        counts["during"] += 1
                question = QUESTIONS[i % len(QUESTIONS)]
                where = {"source": "halden.txt"} if i % 4 == 3 else None
                try:
                    response = c.post("/retrieve", json={"query": question, "k": 3, "filter": where})
                    ok = response.status_code == 200 and bool(response.json()["results"])
                    problem = "" if ok else f"{response.status_code}: {response.text[:300]}"
                except (httpx.HTTPError, ValueError, KeyError) as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                with lock:
                    if problem:
                        failures.append(problem)
                    else:
                        counts["ok"] += 1

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        out, err = update.communicate(timeout=600)
    finally:
        update_done.set()
        for t in threads:
            t.join(timeout=600)
    assert update.returncode == 0, err
    assert "1 changed, 1 deleted" in out, out
    assert not failures, f"{len(failures)} of {counts['sent']} requests failed, e.g. {failures[:3]}"
    assert counts["ok"] == counts["sent"] >= 300
    assert counts["during"] > 0, "requests were sent while the update ran"

    deadline = time.monotonic() + SWITCH_TIMEOUT_S
    while time.monotonic() < deadline:  # the server follows: a query sees CURRENT, then it switches
        top = _retrieve(client, EDIT_QUESTION, k=1)["results"][0]
        gone = not _retrieve(client, "underwater drone", where={"source": DELETED})["results"]
        if "Philippa Orrin" in top["text"] and gone:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"the server did not serve the updated index within {SWITCH_TIMEOUT_S:.0f} s")
    assert top["metadata"]["source"] == "bakery.txt"
    assert client.get("/health").json()["generation"] != before
    for question in QUESTIONS:
        assert all(r["metadata"]["source"] != DELETED for r in _retrieve(client, question, k=10)["results"])
