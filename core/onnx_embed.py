"""An ONNX copy of an index's sentence-transformers model, so that a query needs no torch.

``bridge-rag index`` builds with a sentence-transformers model; answering one question with
it means importing torch and transformers, which takes seconds. :func:`export_onnx` writes
the model's transformer as ONNX beside its tokenizer into the index directory, and
:class:`OnnxEmbedder` answers with onnxruntime (which chromadb already installs) and the
``tokenizers`` library: the same vectors (checked on probe texts at export, to
:data:`MAX_DIFFERENCE`) in a fraction of the start-up time and memory.

Only plain models are exported: a transformer, then mean or CLS pooling, then (optionally)
normalisation, no prompts. Anything else is left to sentence-transformers (:func:`export_onnx`
returns a reason, and the query loads the model as before).

An export is also kept in ``$XDG_CACHE_HOME/bridge-rag/onnx`` (``~/.cache``), keyed by the
model folder's weights and configuration, the torch version and this format, so the next index
of the same model copies it instead of exporting again (3 s on two cores); every copy is
checked against the model all the same.

Files, in ``DIR/embedder/``: ``model.onnx``, ``tokenizer.json`` and ``embedder.json`` (format
version, the model's name, dimension, pooling, token limit, and each file's SHA-256). The
folder is written under a temporary name and renamed into place, so a reader sees a whole
copy or none; :func:`load_onnx_embedder` checks the version and the checksums.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.embed import SentenceTransformerEmbedder, _BaseEmbedder
from core.persist import atomic_write_bytes, json_from_bytes, json_to_bytes

__all__ = [
    "EMBEDDER_DIR",
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_DIFFERENCE",
    "OnnxEmbedder",
    "export_onnx",
    "load_onnx_embedder",
]

#: The folder, inside an index directory, that holds the ONNX copy.
EMBEDDER_DIR = "embedder"
FORMAT = "bridge-rag-onnx-embedder"
FORMAT_VERSION = 1
#: Largest difference, in any coordinate, between the copy's and the model's vectors of the
#: probe texts; a larger one and the copy is not written.
MAX_DIFFERENCE = 1e-5
_MANIFEST = "embedder.json"
_MODEL = "model.onnx"
_TOKENIZER = "tokenizer.json"
_OPSET = 17
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROBES = (
    "What was the dividend of the company in 2019?",
    "  leading and trailing spaces  ",
    "x",
    "Ünïcödé, CJK 漢字 and emoji 🙂 in one line.",
)
_BATCH = 32


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _plain_parts(model: Any) -> tuple[Any, str, bool] | str:
    """``(transformer module, pooling, normalise)`` of a plain model, or why it is not one."""
    modules = list(model) if hasattr(model, "__iter__") else []
    kinds = [type(m).__name__ for m in modules]
    if not modules or kinds[0] != "Transformer" or len(modules) > 3:
        return f"modules {kinds} are not Transformer, Pooling[, Normalize]"
    if len(modules) < 2 or kinds[1] != "Pooling" or (len(modules) == 3 and kinds[2] != "Normalize"):
        return f"modules {kinds} are not Transformer, Pooling[, Normalize]"
    pooling = modules[1]
    mode = getattr(pooling, "pooling_mode", None) or (
        "mean"
        if getattr(pooling, "pooling_mode_mean_tokens", False)
        else "cls"
        if getattr(pooling, "pooling_mode_cls_token", False)
        else None
    )
    if mode not in ("mean", "cls"):
        return f"pooling {mode!r} is neither mean nor cls"
    if getattr(model, "prompts", None) and any(getattr(model, "prompts", {}).values()):
        return "the model has prompts"
    return modules[0], str(mode), len(modules) == 3


def export_onnx(
    embedder: Any,
    index_dir: str | os.PathLike[str],
    *,
    probes: Sequence[str] = (),
    on_export: Callable[[], None] | None = None,
) -> str | None:
    """Writes an ONNX copy of ``embedder`` into ``index_dir/embedder``, checked against it.

    Args:
        embedder: The embedder the index was built with; only a
            :class:`~core.embed.SentenceTransformerEmbedder` over a plain model is exported.
        index_dir: The index directory.
        on_export: Called once it is known that a copy is to be written (none is kept yet).
        probes: Texts the copy must embed as the model does (some of the corpus, say), beside
            a few fixed ones.

    Returns:
        None when the copy was written (or an identical one is already there); otherwise why
        not (the query then loads the model itself).
    """
    if not isinstance(embedder, SentenceTransformerEmbedder):
        return f"{type(embedder).__name__} is not a sentence-transformers model"
    parts = _plain_parts(embedder.model)
    if isinstance(parts, str):
        return parts
    transformer, pooling, normalise = parts
    tokenizer = getattr(getattr(transformer, "tokenizer", None), "backend_tokenizer", None)
    auto_model = getattr(transformer, "auto_model", None)
    max_length = embedder.max_input_tokens
    if tokenizer is None or auto_model is None or max_length is None:
        return "the model has no fast tokenizer, no transformer or no token limit"
    root = Path(index_dir)
    root.mkdir(parents=True, exist_ok=True)
    target = root / EMBEDDER_DIR
    existing = load_onnx_embedder(root, quiet=True)
    if existing is not None and existing.name == embedder.name and existing.dimension == embedder.dimension:
        return None
    if on_export is not None:
        on_export()
    try:
        import onnx  # noqa: F401  (torch's exporter needs it)
        import onnxruntime  # noqa: F401
        import torch
    except ImportError as exc:
        return f"onnx, onnxruntime or torch is missing ({exc}); install bridge-rag[models,store]"
    work = Path(tempfile.mkdtemp(prefix=".embedder-", dir=root))
    umask = os.umask(0)
    os.umask(umask)
    work.chmod(0o777 & ~umask)  # as a folder made by mkdir (mkdtemp's is private)
    try:
        (work / _TOKENIZER).write_text(tokenizer.to_str(), encoding="utf-8")
        why = None
        for fresh in (False, True):  # a cached export that fails the check is made again, once
            cached = _model_file(torch, auto_model, work / _MODEL, fresh=fresh)
            try:
                why = _write_checked(work, embedder, pooling, normalise, max_length, probes)
            except Exception as exc:  # onnxruntime cannot read a damaged cached copy
                if not cached:
                    raise
                why = f"the cached export cannot be read ({exc})"
            if why is None or not cached:
                break
        if why is not None:
            return why
        _replace_dir(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return None


def _write_checked(
    work: Path,
    embedder: SentenceTransformerEmbedder,
    pooling: str,
    normalise: bool,
    max_length: int,
    probes: Sequence[str],
) -> str | None:
    """Writes the manifest of the copy in ``work`` and checks it against the model; why not, or None."""
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "name": embedder.name,
        "dimension": embedder.dimension,
        "pooling": pooling,
        "normalize": normalise,
        "max_length": max_length,
        "inputs": [i for i in _INPUTS if i in _onnx_inputs(work / _MODEL)],
        "files": {name: _sha256(work / name) for name in (_MODEL, _TOKENIZER)},
    }
    atomic_write_bytes(work / _MANIFEST, json_to_bytes(manifest))
    copy = OnnxEmbedder(work, manifest)
    texts = [*_PROBES, *probes, " ".join(["token"] * (2 * max_length))]
    difference = float(np.max(np.abs(copy.embed_documents(texts) - embedder.embed_documents(texts))))
    copy.close()
    if not difference <= MAX_DIFFERENCE:
        return f"the ONNX copy differs from the model by {difference:.2g} (more than {MAX_DIFFERENCE:g})"
    return None


def _cache_dir() -> Path:
    """Where exports are kept for the next index of the same model (``$XDG_CACHE_HOME/bridge-rag/onnx``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bridge-rag" / "onnx"


def _cache_key(torch: Any, auto_model: Any) -> str | None:
    """The export's key: the model folder's weights and configuration, the exporter and the format.

    None when the model was not loaded from a local folder (nothing to key it by).
    """
    source = Path(str(getattr(auto_model, "name_or_path", "") or ""))
    if not source.is_dir():
        return None
    h = hashlib.sha256(f"{FORMAT}:{FORMAT_VERSION}:{_OPSET}:{torch.__version__}".encode())
    for path in sorted(source.iterdir()):
        if path.is_file() and path.suffix in (".safetensors", ".bin", ".json"):
            h.update(f"{path.name}:{_sha256(path)}".encode())
    return h.hexdigest()


def _model_file(torch: Any, auto_model: Any, path: Path, *, fresh: bool) -> bool:
    """Writes the ONNX model to ``path``; True when it is a cached earlier export of the same model.

    Without a cached copy (or with ``fresh``: the cached one failed its check), the model is
    exported anew and the export cached for the next index (best effort).
    """
    key = _cache_key(torch, auto_model)
    cached = _cache_dir() / f"{key}.onnx" if key is not None else None
    if cached is not None and cached.is_file() and not fresh:
        shutil.copyfile(cached, path)
        return True
    _write_model(torch, auto_model, path)
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_name(f".{cached.name}.{os.getpid()}.partial")
            shutil.copyfile(path, partial)
            os.replace(partial, cached)  # another process's export of the same model is the same
        except OSError:
            pass  # no cache (a read-only home, say): the next index exports again
    return False


def _write_model(torch: Any, auto_model: Any, path: Path) -> None:
    """Exports the transformer (token ids in, last hidden state out) with dynamic batch and length."""

    class _Hidden(torch.nn.Module):  # type: ignore[misc]
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    ids = torch.ones((1, 8), dtype=torch.long)
    dynamic = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Hidden(auto_model).eval(),
            (ids, ids, torch.zeros_like(ids)),
            str(path),
            input_names=list(_INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes=dynamic,
            opset_version=_OPSET,
            dynamo=False,
        )


def _onnx_inputs(path: Path) -> set[str]:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return {i.name for i in session.get_inputs()}


def _replace_dir(new: Path, target: Path) -> None:
    """Puts ``new`` at ``target``: a reader sees the old folder, none, or the new one, never half."""
    old = target.with_name(f".{target.name}-old-{os.getpid()}")
    if target.exists():
        os.replace(target, old)
    os.replace(new, target)
    shutil.rmtree(old, ignore_errors=True)


def load_onnx_embedder(index_dir: str | os.PathLike[str], *, quiet: bool = False) -> OnnxEmbedder | None:
    """The ONNX copy in ``index_dir/embedder``, or None when there is none or it fails its checks.

    A copy of another format version, or whose files fail their checksums, is not used: a
    warning says so (unless ``quiet``), and the caller loads the model itself (the results
    are the same, only slower); ``bridge-rag index --update`` writes the copy again.
    """
    folder = Path(index_dir) / EMBEDDER_DIR
    if not (folder / _MANIFEST).is_file():
        return None
    problem = None
    manifest: dict[str, Any] = {}
    try:
        manifest = json_from_bytes((folder / _MANIFEST).read_bytes())
        if manifest.get("format") != FORMAT or manifest.get("version") != FORMAT_VERSION:
            problem = (
                f"format {manifest.get('format')!r} version {manifest.get('version')!r} is not this one's"
            )
        else:
            for name, digest in dict(manifest["files"]).items():
                if Path(name).name != name or _sha256(folder / name) != digest:
                    problem = f"{name} fails its checksum"
                    break
    except (OSError, ValueError, KeyError, TypeError) as exc:
        problem = f"it cannot be read ({exc})"
    if problem is not None:
        if not quiet:
            warnings.warn(
                f"the ONNX copy of the embedding model in {folder} is not used: {problem}; loading the "
                "model itself instead (same results, slower start); `bridge-rag index --update` "
                "writes it again",
                RuntimeWarning,
                stacklevel=2,
            )
        return None
    return OnnxEmbedder(folder, manifest)


class OnnxEmbedder(_BaseEmbedder):
    """Embeds with the ONNX copy of a sentence-transformers model (see the module).

    Calls are serialised with a lock, like :class:`~core.embed.SentenceTransformerEmbedder`.

    Attributes:
        name: The model's name, as the index records it (``sentence-transformers:<model>``).
    """

    queries_as_documents = True

    def __init__(self, folder: str | os.PathLike[str], manifest: dict[str, Any]) -> None:
        """Opens the copy in ``folder`` described by ``manifest`` (see :func:`load_onnx_embedder`).

        Raises:
            ImportError: onnxruntime or tokenizers is missing.
        """
        import onnxruntime
        from tokenizers import Tokenizer

        folder = Path(folder)
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            str(folder / _MODEL), options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = Tokenizer.from_file(str(folder / _TOKENIZER))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(int(manifest["max_length"]))
        self._inputs = tuple(manifest.get("inputs", _INPUTS))
        self._pooling = str(manifest["pooling"])
        self._normalize = bool(manifest.get("normalize", True))
        self._max_length = int(manifest["max_length"])
        self._lock = threading.Lock()
        super().__init__(str(manifest["name"]), int(manifest["dimension"]))

    @property
    def max_input_tokens(self) -> int:
        """Tokens the model reads of a text (longer texts are cut)."""
        return self._max_length

    def _run(self, texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        out = []
        with self._lock:
            for start in range(0, len(texts), _BATCH):
                encodings = self._tokenizer.encode_batch([t.strip() for t in texts[start : start + _BATCH]])
                width = max(len(e.ids) for e in encodings)
                feed = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in _INPUTS}
                for row, e in enumerate(encodings):
                    n = len(e.ids)
                    feed["input_ids"][row, :n] = e.ids
                    feed["attention_mask"][row, :n] = e.attention_mask
                    feed["token_type_ids"][row, :n] = e.type_ids
                hidden = self._session.run(None, {name: feed[name] for name in self._inputs})[0]
                mask = feed["attention_mask"][..., None].astype(np.float32)
                if self._pooling == "cls":
                    pooled = hidden[:, 0, :]
                else:
                    pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
                if self._normalize:
                    pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
                out.append(pooled.astype(np.float32))
        return np.concatenate(out, axis=0)

    def _embed_documents(self, texts: list[str]) -> Any:
        return self._run(texts)

    def _embed_query(self, text: str) -> Any:
        return self._run([text])

    def close(self) -> None:
        """Releases the ONNX session (the object is unusable afterwards)."""
        self._session = None
