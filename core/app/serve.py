"""``bridge-rag serve``: an index directory's retrieval over HTTP (FastAPI and uvicorn).

The index is opened once (:class:`core.app.querying.OpenIndex` with ``follow=True``), so a
running server picks up what ``bridge-rag index --update`` (or another writer) saves: the
strategy loads the new generation beside the one in use and switches between two queries.

Two endpoints:

* ``POST /retrieve`` with the JSON body ``{"query": str, "k": int = 5, "filter": object | null}``
  answers ``{"query", "strategy", "k", "results": [{"id", "score", "text", "metadata"}]}``,
  the document ``bridge-rag query --json`` prints (:func:`core.app.querying.results_document`);
* ``GET /health`` answers ``{"status": "ok", "strategy", "index", "generation", "chunks"}``.

A bad request gets a 4xx answer ``{"detail": "what is wrong and what to send"}``: 413 for a
body above the limit (counted as it arrives, before anything parses it), 400 for a body that
is not JSON, 422 for one that is not a request (no query, a ``k`` that is not an integer from
1 to the server's ``max_k``, a filter that is not a Chroma where-filter bridge-rag honours, an
unknown field). An unexpected error while retrieving answers 500 with the same shape, is
logged with its traceback, and the server goes on serving.

Retrieval runs off the event loop, on the application's own pool of ``threads`` threads
(``--threads``, default 1). The strategies' queries are thread-safe (a query runs inside the
index's gate, which keeps it apart from a change or a switch to a new generation, and the
embedder serialises its own model calls; see ``docs/guides/deployment.md``), so no lock is
needed and more threads are allowed. One is the default because on a small machine it is the
fastest: the model runs one query at a time anyway, and a query that always runs on the same
thread finds the model runtime's worker threads ready (on a shared 2-core machine, alternating runs put
the p50 over loopback 0 to 4 ms above the library's with one thread, 3 to 5 ms with eight,
whose queries land on the pool's threads in turn).

FastAPI, pydantic and uvicorn are imported when the server is built, never when this module
is: other commands do not pay for them, and without them :func:`create_app` and
:func:`run_server` raise a :class:`core.app.indexing.CommandError` naming the ``serve`` extra.
(This module does not use postponed annotations: FastAPI reads the endpoint's annotations,
which name classes imported inside :func:`create_app`.)
"""

import asyncio
import importlib.util
import json
import logging
import socket
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from core.app.indexing import CommandError
from core.app.querying import OpenIndex, results_document

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_K",
    "DEFAULT_THREADS",
    "SERVE_EXTRA",
    "create_app",
    "run_server",
]

#: The most results one request may ask for, unless ``--max-k`` says otherwise.
DEFAULT_MAX_K = 100
#: The largest request body accepted (bytes); a larger one is refused with 413 unread.
DEFAULT_MAX_BODY_BYTES = 64 * 1024
#: Threads retrieval runs on (one: one query at a time, on the same thread).
DEFAULT_THREADS = 1
#: How to install what the server needs.
SERVE_EXTRA = "pip install 'bridge-rag[serve]'"

_EXAMPLE = '{"query": "who founded the institute?", "k": 5, "filter": {"source": "notes/a.md"}}'
_FIELDS = ("query", "k", "filter")
_MAX_K_NOTE = "the server's --max-k"
_BACKLOG = 2048  # connections waiting to be accepted (uvicorn's default)

logger = logging.getLogger("bridge_rag.serve")


class _RefusedError(Exception):
    """A request the server will not answer: its HTTP status and what the client should do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Question(NamedTuple):
    """A checked request: the query, the number of results and the where-filter (None: none)."""

    query: str
    k: int
    where: dict[str, Any] | None


def _require_serve() -> None:
    """Raises a :class:`CommandError` naming the ``serve`` extra when FastAPI or uvicorn is missing."""
    missing = [name for name in ("fastapi", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise CommandError(
            f"bridge-rag serve needs {' and '.join(missing)}, which are not installed; install the "
            f"serve extra: {SERVE_EXTRA}"
        )


def _request_model() -> Any:
    """The pydantic model of a ``POST /retrieve`` body (built on first use: pydantic is imported late)."""
    from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

    class RetrieveRequest(BaseModel):
        """The body of ``POST /retrieve``."""

        model_config = ConfigDict(extra="forbid")

        query: StrictStr = Field(description="the question or search text")
        k: StrictInt = Field(5, description="how many results (1 to the server's --max-k)")
        filter: dict[str, Any] | None = Field(
            None, description='a Chroma where-filter, e.g. {"source": "notes/a.md"}; null: none'
        )

    return RetrieveRequest


def _validation_message(errors: Sequence[Mapping[str, Any]], max_k: int) -> str:
    """One sentence per pydantic error, each saying what to send instead."""
    parts = []
    for error in errors:
        loc = error.get("loc") or ()
        field = str(loc[0]) if loc else ""
        kind = str(error.get("type", ""))
        got = error.get("input")
        if not loc and kind == "model_type":
            parts.append(f"the body must be a JSON object, got {type(got).__name__}; send {_EXAMPLE}")
        elif kind == "missing":
            parts.append(f'"{field}" is missing; send {_EXAMPLE}')
        elif kind == "extra_forbidden":
            parts.append(f'unknown field "{field}"; the body takes {", ".join(_FIELDS)}')
        elif field == "query":
            parts.append(f'"query" must be a string (the question), got {json.dumps(got)[:80]}')
        elif field == "k":
            parts.append(
                f'"k" must be an integer from 1 to {max_k} ({_MAX_K_NOTE}), got {json.dumps(got)[:80]}'
            )
        elif field == "filter":
            parts.append(
                f'"filter" must be a JSON object (a Chroma where-filter such as {{"source": "notes/a.md"}}) '
                f"or null, got {json.dumps(got)[:80]}"
            )
        else:  # pragma: no cover - every field is named above
            parts.append(f"{'.'.join(map(str, loc)) or 'body'}: {error.get('msg', 'invalid')}")
    return "; ".join(parts)


def _parse_question(body: bytes, model: Any, *, max_k: int, max_query_chars: int) -> _Question:
    """A ``POST /retrieve`` body checked as a request.

    Raises:
        _RefusedError: 400 (not JSON) or 422 (not a valid request), with what to send instead.
    """
    from pydantic import ValidationError

    from core.filters import FilterError, parse_filter
    from core.strategies.base import check_query

    try:
        data = json.loads(body)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError
        reason = "it is empty" if not body.strip() else str(exc)
        raise _RefusedError(400, f"the body is not valid JSON ({reason}); send {_EXAMPLE}") from None
    except RecursionError:
        raise _RefusedError(400, f"the body is not valid JSON (nested too deeply); send {_EXAMPLE}") from None
    try:
        fields = model.model_validate(data).model_dump()
    except ValidationError as exc:
        raise _RefusedError(422, _validation_message(exc.errors(), max_k)) from None
    query, k, where = fields["query"], fields["k"], fields["filter"]
    try:
        check_query(query, max_query_chars)
    except ValueError as exc:
        raise _RefusedError(422, f'"query": {exc}') from None
    if not 1 <= k <= max_k:
        raise _RefusedError(422, f'"k" must be an integer from 1 to {max_k} ({_MAX_K_NOTE}), got {k}')
    try:
        parse_filter(where)
    except FilterError as exc:
        raise _RefusedError(422, f'"filter": {exc}') from None
    except RecursionError:
        raise _RefusedError(422, '"filter": nested too deeply; write the filter with fewer levels') from None
    return _Question(query, k, where)


def _describe(index: OpenIndex) -> dict[str, Any]:
    """What ``GET /health`` reports: the strategy, the directory, the generation and chunks served."""
    rag = index.rag
    chunks = getattr(rag, "num_chunks", None)
    return {
        "status": "ok",
        "strategy": index.name,
        "index": str(index.directory),
        "generation": getattr(rag, "generation", None),
        "chunks": chunks if isinstance(chunks, int) else None,
    }


def create_app(
    index: OpenIndex,
    *,
    max_k: int = DEFAULT_MAX_K,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    threads: int = DEFAULT_THREADS,
) -> "FastAPI":
    """The FastAPI application serving ``index``: ``POST /retrieve`` and ``GET /health``.

    Args:
        index: The opened index (open it with ``follow=True`` to serve later saves).
        max_k: The most results one request may ask for.
        max_body_bytes: The largest request body accepted; a larger one gets 413 before it
            is parsed.
        threads: The threads retrieval runs on (the app's own pool, stopped when the app
            shuts down). 1, the default, runs one query at a time, always on the same
            thread: on a small machine the fastest (see the module).

    Returns:
        The application (run it with uvicorn, or :func:`run_server`).

    Raises:
        CommandError: FastAPI is not installed (the message names the ``serve`` extra).
        ValueError: ``max_k``, ``max_body_bytes`` or ``threads`` is below 1.
    """
    _require_serve()
    if min(max_k, max_body_bytes, threads) < 1:
        raise ValueError(
            f"max_k, max_body_bytes and threads must be >= 1, got {max_k}, {max_body_bytes} and {threads}"
        )
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    from core.filters import FilterError
    from core.strategies.base import DEFAULT_MAX_QUERY_CHARS

    model = _request_model()
    max_query_chars = int(
        getattr(getattr(index.rag, "config", None), "max_query_chars", DEFAULT_MAX_QUERY_CHARS)
    )
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bridge-rag-retrieve")

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(
        title="bridge-rag serve",
        summary=f"Retrieval from the {index.name} index in {index.directory}",
        version="1",
        lifespan=lifespan,
    )

    async def read_body(request: Request) -> bytes:
        """The body, refused with 413 as soon as it is known to exceed the limit."""
        too_big = f"; send at most {max_body_bytes:,} bytes (a shorter query or filter)"
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body_bytes:
            raise _RefusedError(413, f"the body is {int(declared):,} bytes{too_big}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body_bytes:
                raise _RefusedError(413, f"the body is over {max_body_bytes:,} bytes{too_big}")
            chunks.append(chunk)
        return b"".join(chunks)

    def answer(question: _Question) -> dict[str, Any]:
        results = index.retrieve(question.query, k=question.k, where=question.where)
        return results_document(question.query, index.name, question.k, results)

    @app.post(
        "/retrieve",
        summary="The top k chunks for a query, with their provenance",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": model.model_json_schema()}},
            }
        },
    )
    async def retrieve(request: Request) -> JSONResponse:
        try:
            question = _parse_question(
                await read_body(request), model, max_k=max_k, max_query_chars=max_query_chars
            )
        except _RefusedError as refused:
            return JSONResponse({"detail": refused.message}, status_code=refused.status)
        try:
            document = await asyncio.get_running_loop().run_in_executor(pool, answer, question)
        except (CommandError, FilterError) as exc:  # what the strategy refuses (a filter it cannot honour)
            return JSONResponse({"detail": str(exc)}, status_code=422)
        except Exception as exc:
            logger.exception("bridge-rag serve: retrieval failed for %r", question.query[:200])
            return JSONResponse(
                {
                    "detail": f"the server failed while retrieving ({type(exc).__name__}: {exc}); it is "
                    "still serving: retry, and if it keeps failing see the server's log"
                },
                status_code=500,
            )
        return JSONResponse(document)

    @app.get("/health", summary="Which index the server serves")
    async def health() -> dict[str, Any]:
        return _describe(index)

    return app


def _bind(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host``:``port`` (0: a free port).

    Connections made before the server runs wait in the backlog (they are not refused), so a
    client may connect as soon as the address is printed.

    Raises:
        CommandError: The address cannot be resolved or taken (e.g. the port is in use).
    """
    if not 0 <= port <= 65535:
        raise CommandError(f"--port must be from 0 to 65535 (0: any free port), got {port}")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError as exc:
        raise CommandError(
            f"cannot resolve --host {host!r} ({exc}); give an address such as 127.0.0.1"
        ) from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(_BACKLOG)
    except OSError as exc:
        sock.close()
        raise CommandError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port (0: any free one)"
        ) from None
    sock.set_inheritable(True)
    return sock


def _listening(index: OpenIndex, host: str, port: int) -> str:
    """The line that says what is served where."""
    info = _describe(index)
    served = [str(info["generation"] or ""), f"{info['chunks']} chunks" if info["chunks"] is not None else ""]
    what = ", ".join(x for x in served if x)
    address = f"[{host}]" if ":" in host else host
    return (
        f"bridge-rag serve: {index.name} index {index.directory}{f' ({what})' if what else ''} "
        f"on http://{address}:{port} (POST /retrieve, GET /health; Ctrl-C stops)"
    )


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def run_server(
    index_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    max_k: int = DEFAULT_MAX_K,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    threads: int = DEFAULT_THREADS,
    access_log: bool = False,
    out: TextIO | None = None,
) -> None:
    """Runs ``bridge-rag serve``: serves ``index_dir`` until interrupted (Ctrl-C, SIGTERM).

    The port is taken first (a port in use fails at once), then the index is loaded, and a
    line on ``out`` says where the server listens (the real port when ``port`` is 0).

    Args:
        index_dir: A directory built by ``bridge-rag index``.
        host: The address to listen on; the loopback address by default. The server has no
            authentication: anyone who reaches the address can query the index.
        port: The TCP port (0: any free one, printed).
        max_k: The most results one request may ask for.
        max_body_bytes: The largest request body accepted.
        threads: The threads retrieval runs on (:func:`create_app`).
        access_log: Log every request (uvicorn's access log).
        out: Where the listening line goes (default: standard error).

    Raises:
        CommandError: FastAPI or uvicorn is missing, ``index_dir`` is not an index, or the
            address cannot be taken.
    """
    _require_serve()
    import uvicorn

    out = out or sys.stderr
    if max_k < 1 or threads < 1:
        raise CommandError(f"--max-k and --threads must be at least 1, got {max_k} and {threads}")
    sock = _bind(host, port)
    try:
        with OpenIndex(index_dir, follow=True) as index:
            app = create_app(index, max_k=max_k, max_body_bytes=max_body_bytes, threads=threads)
            print(_listening(index, host, sock.getsockname()[1]), file=out, flush=True)
            if not _loopback(host):
                print(
                    f"bridge-rag serve: warning: {host} is not a loopback address and the server has no "
                    "authentication: anyone who can reach it can query the index",
                    file=out,
                    flush=True,
                )
            config = uvicorn.Config(
                app, log_level="info", access_log=access_log, ws="none", timeout_graceful_shutdown=5
            )
            uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
