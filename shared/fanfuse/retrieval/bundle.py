"""The embeddings bundle: a corpus's embeddings shipped in the package, int8 with a scale per row.

Encoding the bundled Vaswani corpus takes about a minute, which a first search should not spend,
so its embeddings ship with the package (`BUNDLE`). As float32 they would be 17.6 MB; as int8
rows with one float32 scale each they are 4.4 MB, and rank the same top-10 on Vaswani's queries
(`tests/integration/test_dense_bundle.py`). A bundle names the corpus fingerprint and the model's
hash it was made from and is used only when both match this installation: a stale bundle is
never used, and the index then encodes the corpus instead. `fanfuse index --bundle` writes it
anew (`write_bundle`).

The file is one `.npz` (numpy's zip of arrays, read with `allow_pickle=False`): `rows` (int8,
one row per document), `scales` (float32, one per row) and `meta` (the JSON of `bundle_meta`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fanfuse.retrieval.corpus import DATA_DIR, Corpus
from fanfuse.retrieval.embeddings import KIND, weights_hash
from fanfuse.retrieval.minilm import MODEL_NAME

BUNDLE = DATA_DIR / f"{KIND}.npz"
"""The bundled corpus's embeddings; versioned with the corpus."""
BUNDLE_SCHEMA = 1


def quantize(embeddings: NDArray[np.float32]) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Rows as int8 with one float32 scale each (row = int8 * scale): a quarter of the size.

    Per row, so a row's largest component keeps all 127 steps whatever the other rows hold.
    """
    peaks = np.abs(embeddings).max(axis=1)
    scales = np.where(peaks > 0, peaks / 127.0, 1.0).astype(np.float32)
    rows = np.rint(embeddings / scales[:, None]).clip(-127, 127).astype(np.int8)
    return rows, scales


def dequantize(rows: NDArray[np.int8], scales: NDArray[np.float32]) -> NDArray[np.float32]:
    """Back to float32, each row renormalized to unit length (cosine = dot product again)."""
    out = rows.astype(np.float32) * scales[:, None]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.ascontiguousarray(out / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def bundle_meta(corpus: Corpus) -> dict[str, Any]:
    """What a bundle must name to be used for `corpus` with the installed model."""
    return {
        "schema": BUNDLE_SCHEMA,
        "kind": KIND,
        "model": MODEL_NAME,
        "weights": weights_hash(),
        "fingerprint": corpus.fingerprint,
        "documents": len(corpus),
        "encoding": "int8, one float32 scale per row",
    }


def write_bundle(path: Path, corpus: Corpus, embeddings: NDArray[np.float32]) -> None:
    """Write `embeddings` of `corpus` as a bundle (`fanfuse index --bundle`), atomically."""
    rows, scales = quantize(embeddings)
    meta = np.array(json.dumps(bundle_meta(corpus), sort_keys=True))
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        np.savez(f, rows=rows, scales=scales, meta=meta)
    os.replace(tmp, path)


def read_bundle(path: Path, corpus: Corpus) -> tuple[NDArray[np.float32] | None, str]:
    """(the embeddings, "") when the bundle at `path` was made from this corpus and the installed
    model's weights, else (None, why not): a stale bundle is never used."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            rows, scales = data["rows"], data["scales"]
    except FileNotFoundError:
        return None, f"no bundled embeddings at {path.name}"
    except (OSError, ValueError, KeyError) as exc:
        return None, f"unreadable bundle {path.name}: {exc}"
    expected = bundle_meta(corpus)
    differ = sorted(k for k in expected if meta.get(k) != expected[k])
    if differ:
        return None, f"bundle {path.name} was made for another {', '.join(differ)}"
    if rows.dtype != np.int8 or rows.ndim != 2 or rows.shape[0] != len(corpus):
        return None, f"bundle {path.name} has rows of shape {rows.shape}, dtype {rows.dtype}"
    if scales.shape != (len(corpus),):
        return None, f"bundle {path.name} has {scales.shape} scales"
    return dequantize(rows, scales.astype(np.float32)), ""
