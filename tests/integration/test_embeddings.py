"""Encoding a workload with the shipped model (retrieval/embeddings.py): rows in the texts' order
whatever order the chunks ran in, and an encoding abandoned at exit stopping at its next chunk."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from fanfuse.retrieval import embeddings

pytestmark = pytest.mark.slow

TEXTS = [
    "A laser emits coherent light.",
    "Transistors switch signals in a circuit, on and off, many millions of times a second.",
    "Plasma is an ionised gas.",
    "Microwaves propagate along a hollow metal waveguide of rectangular section.",
    "A dipole antenna radiates.",
    "Error correcting codes protect data sent over noisy channels.",
]


def test_rows_follow_the_texts_whatever_the_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks run longest first; each row still lands at its text's position."""
    monkeypatch.setattr(embeddings, "CHUNK", 2)
    chunked = embeddings.encode(TEXTS)
    one_by_one = np.vstack([embeddings.encode([text]) for text in TEXTS])
    assert chunked.shape == (len(TEXTS), 384)
    assert np.allclose(chunked, one_by_one, atol=1e-4)
    assert np.allclose(np.linalg.norm(chunked, axis=1), 1.0, atol=1e-5)


def test_an_abandoned_encoding_stops_at_its_next_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """`abandon` (the process exiting) lets the running chunk finish, then the encoding raises:
    no further chunk runs, and its caller caches nothing."""
    monkeypatch.setattr(embeddings, "CHUNK", 2)
    monkeypatch.setattr(embeddings, "_exiting", threading.Event())  # this process goes on
    steps: list[int] = []

    def exit_after_the_first_chunk(done: int, total: int) -> None:
        steps.append(done)
        if done == 2:
            embeddings.abandon()

    assert not embeddings.abandoned()
    with pytest.raises(RuntimeError, match="exiting"):
        embeddings.encode(TEXTS, on_progress=exit_after_the_first_chunk)
    assert steps == [0, 2]
    assert embeddings.abandoned()
