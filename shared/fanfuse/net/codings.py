"""A response body's content coding undone with a cap on the *decoded* bytes, as they come.

Why not httpx's decoders: they inflate each network chunk without a bound, so a 2 KB chunk of
`Content-Encoding: gzip, gzip` becomes a gigabyte in memory before a size cap checked after
the chunk can see it (a 3 KB page took a search to 2.2 GB of RSS). Here the raw stream is fed
through one decoder that never produces more than the bytes left under the cap: zlib's
`decompress(data, max_length)` (the rest waits in `unconsumed_tail`), brotli's
`process(data, output_buffer_limit=...)` (brotli >= 1.2; the rest waits inside it). Reading stops
as soon as the cap is passed, and the raw bytes are capped too, so a stream that decodes to
nothing cannot be read forever either.

What is decoded: no coding or `identity`, `gzip` (`x-gzip`), `deflate` (zlib-wrapped or raw, as
servers send both), and `br` when brotli >= 1.2 is installed (the `web` extra); only these are
offered in `Accept-Encoding`. At most one coding: a stacked `gzip, gzip` has no use but a bomb,
and a coding fanfuse did not offer cannot be read; both are `Undecodable`, as is a corrupt
stream. The cap is the same for every coding: the call policy's `max_body_bytes`.
"""

from __future__ import annotations

import zlib
from typing import Protocol


class Undecodable(Exception):
    """A body whose content coding is not read here: stacked, unknown, or corrupt."""

    status: int | None = None
    """The HTTP status of the answer it came with (set by the runner)."""


class _Decoder(Protocol):
    def feed(self, data: bytes, room: int) -> bytes:
        """At most `room` (>= 1) more decoded bytes from `data` (plus what is pending)."""
        ...

    @property
    def pending(self) -> bool:
        """Decoded output is waiting that the last `room` had no space for."""
        ...


class _Zlib:
    """gzip, or deflate with or without the zlib wrapper: tried wrapped first, then raw if the
    first bytes fail (browsers do the same; servers send both under the one name)."""

    FALLBACK_BYTES = 1024
    """How much of a stream is kept for the second try: a wrapper is refused by its 2-byte
    header, or produces output long before this."""

    def __init__(self, wbits: int, raw_fallback: bool) -> None:
        self.inflate = zlib.decompressobj(wbits)
        self.head: bytearray | None = bytearray() if raw_fallback else None

    def feed(self, data: bytes, room: int) -> bytes:
        if self.inflate.eof:
            return b""  # trailing bytes after the stream's end are ignored, as httpx does
        if self.head is not None:
            self.head += data
        try:
            out = self.inflate.decompress(self.inflate.unconsumed_tail + data, room)
        except zlib.error:
            if self.head is None:
                raise
            self.inflate, head, self.head = zlib.decompressobj(-zlib.MAX_WBITS), self.head, None
            return self.inflate.decompress(bytes(head), room)
        if self.head is not None and (out or len(self.head) > self.FALLBACK_BYTES):
            self.head = None
        return out

    @property
    def pending(self) -> bool:
        return bool(self.inflate.unconsumed_tail)


class _Brotli:
    def __init__(self) -> None:
        import brotli

        self.brotli = brotli
        self.inflate = brotli.Decompressor()

    def feed(self, data: bytes, room: int) -> bytes:
        if self.inflate.is_finished():
            return b""  # trailing bytes after the stream's end are ignored
        return bytes(self.inflate.process(data, output_buffer_limit=room))

    @property
    def pending(self) -> bool:
        return not self.inflate.is_finished() and not self.inflate.can_accept_more_data()


def _brotli_bounded() -> bool:
    """brotli is installed and can bound its output (1.2 added `output_buffer_limit`)."""
    try:
        import brotli
    except ImportError:
        return False
    return hasattr(brotli.Decompressor(), "can_accept_more_data")


BROTLI = _brotli_bounded()
CODINGS = ("gzip", "deflate", "br") if BROTLI else ("gzip", "deflate")
ACCEPT_ENCODING = ", ".join(CODINGS)
"""What requests offer: exactly the codings a `BoundedBody` reads."""
ALIASES = {"x-gzip": "gzip"}


def coding_of(content_encoding: str) -> str | None:
    """The one coding a `Content-Encoding` value names (None: identity), or `Undecodable`."""
    names = [c.strip().lower() for c in content_encoding.split(",")]
    codings = [ALIASES.get(c, c) for c in names if c and c != "identity"]
    if len(codings) > 1:
        raise Undecodable(f"stacked content codings ({', '.join(codings)}) are not decoded")
    if codings and codings[0] not in CODINGS:
        raise Undecodable(f"content coding {codings[0]!r} is not decoded")
    return codings[0] if codings else None


def _decoder(coding: str) -> _Decoder:
    if coding == "gzip":
        return _Zlib(16 + zlib.MAX_WBITS, raw_fallback=False)
    if coding == "deflate":
        return _Zlib(zlib.MAX_WBITS, raw_fallback=True)
    return _Brotli()


class BoundedBody:
    """A response body as it is read: raw chunks in, at most `limit` decoded bytes kept.

    `feed` says when to stop reading (the cap is passed: the body is `truncated`); `body` is
    what was kept. The coding is checked when the first byte of body arrives, so an empty
    answer (a redirect, a 204) with any `Content-Encoding` is read as empty.
    """

    def __init__(self, content_encoding: str, limit: int) -> None:
        self.limit = max(limit, 0)
        self.truncated = False
        self._raw = 0
        self._out = bytearray()
        self._header = content_encoding
        self._decoder: _Decoder | None = None
        self._checked = False

    @property
    def body(self) -> bytes:
        return bytes(self._out)

    def feed(self, chunk: bytes) -> bool:
        """Take one raw chunk; True when reading should stop (the cap is passed)."""
        if not chunk or self.truncated:
            return self.truncated
        if not self._checked:
            coding = coding_of(self._header)
            self._decoder = _decoder(coding) if coding else None
            self._checked = True
        self._raw += len(chunk)
        if self._decoder is None:
            self._keep(chunk)
        else:
            self._inflate(self._decoder, chunk)
        if self._raw > self.limit and not self.truncated:
            self.truncated = True  # the coded stream alone is past the cap: stop reading it
        return self.truncated

    def _inflate(self, decoder: _Decoder, chunk: bytes) -> None:
        data = chunk
        while not self.truncated:
            room = self.limit + 1 - len(self._out)  # one byte over the cap proves it is passed
            try:
                out = decoder.feed(data, room)
            except Exception as exc:  # zlib.error, brotli.error: a corrupt stream
                raise Undecodable(f"corrupt {self._header.strip()} body: {exc}") from exc
            self._keep(out)
            if not decoder.pending:
                return
            data = b""

    def _keep(self, data: bytes) -> None:
        room = self.limit - len(self._out)
        if len(data) > room:
            self._out += data[:room]
            self.truncated = True
        else:
            self._out += data
