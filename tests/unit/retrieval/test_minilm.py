"""The shipped ONNX model: its files are the manifest's, a damaged copy is refused before it
runs, and the encoder gives unit-length rows in the order of the texts."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from fanfuse.retrieval import minilm


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_shipped_files_are_the_manifests() -> None:
    manifest = minilm.read_manifest()
    assert set(manifest["files"]) == {minilm.MODEL_FILE, minilm.TOKENIZER_FILE}
    for name, digest in manifest["files"].items():
        assert sha256(minilm.MODEL_DIR / name) == digest, name
    assert minilm.model_hash() == manifest["files"][minilm.MODEL_FILE][:32]
    assert manifest["licence"].startswith("Apache-2.0")
    assert manifest["source"].startswith(f"{minilm.SOURCE_DISTRIBUTION}==")
    assert len(manifest["source_weights_sha256"]) == 64
    assert manifest["max_tokens"] == minilm.MAX_TOKENS and manifest["dimension"] == minilm.DIMENSION


def copy_model(into: Path) -> Path:
    shutil.copytree(minilm.MODEL_DIR, into)
    return into


def test_a_changed_file_is_refused_before_it_runs(tmp_path: Path) -> None:
    folder = copy_model(tmp_path / "model")
    tokenizer = folder / minilm.TOKENIZER_FILE
    tokenizer.write_bytes(tokenizer.read_bytes().replace(b"[UNK]", b"[UNX]", 1))
    with pytest.raises(minilm.ModelError, match=r"tokenizer\.json: sha256 .* the manifest says"):
        minilm.Encoder(folder)


def test_a_manifest_naming_other_weights_is_refused(tmp_path: Path) -> None:
    folder = copy_model(tmp_path / "model")
    manifest = json.loads((folder / minilm.MANIFEST_FILE).read_text())
    manifest["files"][minilm.MODEL_FILE] = "0" * 64
    (folder / minilm.MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(minilm.ModelError, match=r"model\.onnx: sha256"):
        minilm.Encoder(folder)
    assert minilm.model_hash(folder) == "0" * 32


def test_a_missing_file_makes_dense_retrieval_unavailable(tmp_path: Path) -> None:
    folder = copy_model(tmp_path / "model")
    (folder / minilm.TOKENIZER_FILE).unlink()
    reason = minilm.unavailable_reason(folder)
    assert reason is not None and "tokenizer.json is missing" in reason
    assert minilm.unavailable_reason() is None


def test_rows_are_unit_length_in_the_order_of_the_texts() -> None:
    encoder = minilm.Encoder(threads=1)
    texts = ["a laser emits coherent light", "x", "the dielectric constant of water " * 80]
    rows = encoder.encode(texts, batch=2)
    assert rows.shape == (3, minilm.DIMENSION) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    alone = encoder.encode([texts[2]])  # past 256 tokens: truncated, batched or not
    assert np.allclose(rows[2], alone[0], atol=1e-5)
    assert encoder.encode([]).shape == (0, minilm.DIMENSION)
