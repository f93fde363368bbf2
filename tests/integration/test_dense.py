"""Dense retrieval with the real all-MiniLM-L6-v2 (the ONNX model the package ships), on a tiny
corpus."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fanfuse.retrieval import index_dir
from fanfuse.retrieval.corpus import Corpus, load_corpus
from fanfuse.retrieval.dense import KIND, DenseIndex, dense_unavailable_reason

pytestmark = pytest.mark.slow

TEXTS = {
    "laser": "A laser emits coherent light by stimulated emission of radiation.",
    "transistor": "The transistor amplifies and switches electronic signals in circuits.",
    "waveguide": "Microwaves propagate along a hollow metal waveguide.",
    "dielectric": "Measuring the dielectric constant of liquids at microwave frequencies.",
    "plasma": "Plasma is an ionised gas of electrons and positive ions.",
    "superconductor": "Below a critical temperature a superconductor has zero resistance.",
    "antenna": "A dipole antenna radiates electromagnetic waves.",
    "filter": "Band pass filters are designed with given phase and attenuation.",
    "computer": "A digital computer stores programs and data in memory.",
    "coding": "Error correcting codes protect data sent over noisy channels.",
    "magnet": "Ferromagnetic materials keep their magnetisation after the field is removed.",
    "semiconductor": "Doping a semiconductor with impurities changes its conductivity.",
    "oscillator": "A crystal oscillator produces a stable frequency reference.",
    "ionosphere": "Radio waves are reflected by the ionosphere at night.",
    "thermionic": "Thermionic valves emit electrons from a heated cathode.",
    "optics": "Lenses focus light through refraction at curved surfaces.",
    "acoustics": "Sound waves travel through air as pressure variations.",
    "nuclear": "Nuclear fission releases energy when heavy nuclei split.",
    "radar": "Radar measures distance from the echo time of radio pulses.",
    "battery": "A battery converts chemical energy into electrical energy.",
}


@pytest.fixture(autouse=True)
def _fresh_memo() -> None:
    DenseIndex.clear_memo()


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    path = tmp_path / "physics.jsonl"
    rows = [{"id": key, "title": "", "text": text} for key, text in TEXTS.items()]
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    return load_corpus(path)


def test_the_extra_is_installed() -> None:
    assert dense_unavailable_reason() is None


def test_search_finds_the_semantic_match(tmp_path: Path, corpus: Corpus) -> None:
    index = DenseIndex.load_or_build(corpus, cache_root=tmp_path / "cache", show_progress=False)
    assert index.embeddings.shape == (20, 384)
    assert np.allclose(np.linalg.norm(index.embeddings, axis=1), 1.0, atol=1e-4)
    ranked = index.search(["coherent light amplification", "  ", "echo ranging with radio"], 3)
    light, blank, radar = ranked
    assert corpus.docs[light[0][0]].id == "laser"
    assert blank == []
    assert corpus.docs[radar[0][0]].id == "radar"
    scores = [score for _, score in light]
    assert len(light) == 3 and scores == sorted(scores, reverse=True)
    assert all(-1.0 <= s <= 1.0 for s in scores)
    assert len(index.search(["light"], 100)[0]) == 20  # k beyond the corpus: every document


def test_embeddings_are_cached_and_never_reencoded(
    tmp_path: Path, corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = DenseIndex.load_or_build(corpus, cache_root=cache, show_progress=False)
    where = index_dir(corpus, KIND, cache)
    npy = where / "embeddings.npy"
    assert npy.is_file() and (where / "meta.json").is_file()
    stamp = npy.stat().st_mtime_ns
    assert DenseIndex.load_or_build(corpus, cache_root=cache) is first  # process memo

    DenseIndex.clear_memo()

    def no_build(corpus: Corpus, show_progress: bool = True) -> None:
        raise AssertionError("the corpus was encoded again")

    monkeypatch.setattr(DenseIndex, "build", staticmethod(no_build))
    loaded = DenseIndex.load_or_build(corpus, cache_root=cache)
    assert loaded is not first
    assert np.array_equal(loaded.embeddings, first.embeddings)
    assert npy.stat().st_mtime_ns == stamp
    assert loaded.search(["superconductivity at low temperature"], 1) == first.search(
        ["superconductivity at low temperature"], 1
    )
