"""Charset labels: the WHATWG Encoding Standard's, mapped to linear Python codecs; nothing else.

A page names its charset; before, any Python codec name was used as given (`idna` raised out of
the fetching stage and failed the platform, `punycode` spun for minutes on the event loop).
"""

from __future__ import annotations

import codecs
import random
import time

import pytest

from fanfuse.net import charsets
from fanfuse.net.runner import Response


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        ("utf-8", "utf-8"),
        ("UTF8", "utf-8"),
        ("unicode-1-1-utf-8", "utf-8"),
        ("  latin1\t", "cp1252"),  # ASCII whitespace around a label is trimmed
        ("ISO-8859-1", "cp1252"),  # the web reads Latin-1 as windows-1252
        ("us-ascii", "cp1252"),
        ("iso-8859-2", "iso8859-2"),
        ("iso-8859-8-i", "iso8859-8"),
        ("koi8-ru", "koi8-u"),
        ("macintosh", "mac-roman"),
        ("x-mac-ukrainian", "mac-cyrillic"),
        ("tis-620", "cp874"),
        ("gb2312", "gb18030"),  # the standard's GBK decoder is gb18030's
        ("GBK", "gb18030"),
        ("gb18030", "gb18030"),
        ("big5", "big5hkscs"),
        ("shift_jis", "cp932"),
        ("ms932", "cp932"),
        ("euc-jp", "euc_jp"),
        ("iso-2022-jp", "iso2022_jp"),
        ("euc-kr", "cp949"),
        ("utf-16", "utf-16-le"),
        ("utf-16be", "utf-16-be"),
        ("hz-gb-2312", charsets.REPLACEMENT),
        ("iso-2022-kr", charsets.REPLACEMENT),
        ("x-user-defined", charsets.USER_DEFINED),
        # Python codecs that are no web encoding: ignored, the body is read as UTF-8
        ("idna", None),
        ("punycode", None),
        ("rot13", None),
        ("base64", None),
        ("zlib", None),
        ("hex", None),
        ("utf-7", None),
        ("utf-32", None),
        ("cp037", None),
        ("latin_1", None),  # Python's spelling, not a label
        ("x-no-such-encoding", None),
        ("", None),
        (None, None),
    ],
)
def test_a_label_maps_to_its_codec_or_to_nothing(label: str | None, codec: str | None) -> None:
    assert charsets.codec_for(label) == codec


def test_every_codec_of_the_table_is_a_python_text_encoding() -> None:
    own = {charsets.REPLACEMENT, charsets.USER_DEFINED}
    for codec in set(charsets.LABELS.values()) - own:
        info = codecs.lookup(codec)
        assert info._is_text_encoding, codec
        assert info.name not in ("idna", "punycode"), codec


def test_labels_are_lowercase_and_unique() -> None:
    labels = [label for group in charsets.ENCODINGS.values() for label in group]
    assert len(labels) == len(set(labels)) == len(charsets.LABELS)
    assert all(label == label.lower().strip() for label in labels)


@pytest.mark.parametrize(
    ("body", "content_type", "text"),
    [
        (b"caf\xe9", "text/html; charset=latin1", "café"),
        (b"\x80 5", "text/plain; charset=iso-8859-1", "€ 5"),  # windows-1252, not Latin-1
        (b"caf\xc3\xa9", "text/html", "café"),  # no label: UTF-8
        (b"caf\xe9", "text/html; charset=punycode", "caf\ufffd"),  # ignored: UTF-8, replaced
        (b"a.b", 'text/html; charset="idna"', "a.b"),
        ("中文".encode("gbk"), "text/html; charset=GB2312", "中文"),
        ("日本".encode("cp932"), "text/html; charset=Shift_JIS", "日本"),
        (b"~{<:Ky2;S{#,~}", "text/html; charset=hz-gb-2312", "\ufffd"),
        (b"", "text/html; charset=replacement", ""),
        (b"a\x80\xff", "text/html; charset=x-user-defined", "a\uf780\uf7ff"),
        (b"\xef\xbb\xbfcaf\xc3\xa9", "text/html; charset=latin1", "café"),  # a BOM wins
        (b"\xff\xfea\x00", "text/html; charset=utf-8", "a"),
        (b"\xfe\xff\x00a", "text/html", "a"),
    ],
)
def test_text_of_a_body(body: bytes, content_type: str, text: str) -> None:
    assert charsets.text_of(body, content_type) == text
    response = Response(200, {"content-type": content_type}, body, "http://x/", 1, 0.0)
    assert response.text() == text


def head(meta: str, filler: int = 0) -> bytes:
    return b"<!doctype html><html><head>" + b" " * filler + meta.encode() + b"</head>"


@pytest.mark.parametrize(
    ("body", "codec"),
    [
        (head('<meta charset="gbk">'), "gb18030"),
        (head("<META CHARSET=Shift_JIS>"), "cp932"),
        (head("<meta charset='windows-1251'/>"), "cp1251"),
        (head('<meta http-equiv="Content-Type" content="text/html; charset=euc-kr">'), "cp949"),
        (head('<meta name="viewport" content="width=1"><meta charset="koi8-r">'), "koi8-r"),
        (head('<meta charset="utf-16le">'), "utf-8"),  # HTML: a meta never means UTF-16
        (head('<meta charset="x-user-defined">'), "cp1252"),
        (head('<meta charset="idna">'), None),
        (head('<meta charset="punycode">'), None),
        (head('<meta charset="gbk">', filler=1100), None),  # only the first 1024 bytes
        (b'<html><head><meta charset="gbk"', None),  # a tag never closed
        (b"<html><p>charset=gbk</p></html>", None),  # not in a meta
    ],
)
def test_the_meta_prescan(body: bytes, codec: str | None) -> None:
    assert charsets.meta_charset(body) == codec


def test_the_header_wins_over_a_meta_and_text_plain_has_no_meta() -> None:
    body = head('<meta charset="gbk">') + "中".encode("gbk")
    assert charsets.sniff(body, "text/html", html=True) == ("gb18030", 0)
    assert charsets.sniff(body, "text/html; charset=koi8-r", html=True) == ("koi8-r", 0)
    assert charsets.sniff(body, "text/plain", html=False) == ("utf-8", 0)


def test_the_meta_prescan_is_one_pass_over_hostile_heads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hostile heads of every shape the scan could revisit: it reads at most 1024 bytes once.
    Measured as work, not time: the bytes of the tags it hands to the tag reader, each at most
    once, in all no more than the prescan reads."""
    read = charsets._charset_in_tag
    handed: list[int] = []

    def counted(tag: bytes) -> str | None:
        handed.append(len(tag))
        return read(tag)

    monkeypatch.setattr(charsets, "_charset_in_tag", counted)
    for unit in (b"<meta ", b"<meta charset", b"<meta charset=", b"<meta>", b"charset="):
        handed.clear()
        assert charsets.meta_charset(unit * 100_000) is None
        assert sum(handed) <= charsets.PRESCAN_BYTES, unit
        tags = charsets.PRESCAN_BYTES // len(unit) if unit.startswith(b"<meta>") else 1
        assert len(handed) <= tags, unit


def test_every_codec_decodes_hostile_bytes_in_linear_time() -> None:
    """400 KB of random bytes and of `punycode`'s worst case, through every codec of the table:
    each linear one takes milliseconds; the codecs left out (punycode) took minutes."""
    rng = random.Random(19)
    bodies = [rng.randbytes(400_000), b"x-999a" + b"a" * 400_000, b"\x1b$B" * 130_000]
    for codec in sorted(set(charsets.LABELS.values())):
        for body in bodies:
            started = time.perf_counter()
            text = charsets.decode(body, codec)
            assert time.perf_counter() - started < 1.0, codec
            assert isinstance(text, str)
