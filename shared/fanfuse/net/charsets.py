"""Text from a fetched body: the charset labels of the WHATWG Encoding Standard, and no others.

Why a table: a page names its charset itself (the `Content-Type` header, a `<meta charset>`), and
Python's `bytes.decode` accepts any codec name it knows, which a page must not reach. `idna`
raises `UnicodeError` whatever the error handler, `punycode` takes time quadratic in the body
(a 400 KB page: minutes of CPU), `rot13`, `base64` and `zlib` are not text at all. Browsers read
only the labels of the Encoding Standard (https://encoding.spec.whatwg.org/encodings.json); so
does fanfuse, each mapped to the Python codec that decodes it, every one of them linear. Any
other label is ignored, and the body is read as UTF-8 with replacement characters.

Where Python has no codec of the standard's exact table, the nearest superset stands in (GBK's
decoder is gb18030's, Big5's is Big5-HKSCS, Shift_JIS is Windows-31J, EUC-KR is Windows-949, as
the standard itself defines them); `replacement` and `x-user-defined` are done here. The order
of the sources is HTML's: a byte order mark, then the transport's label, then a `<meta>` in the
first 1024 bytes, then UTF-8.
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT = "utf-8"
REPLACEMENT = "replacement"
"""The standard's encoding for labels of encodings that are unsafe to decode (ISO-2022-KR,
HZ, ISO-2022-CN): the whole body reads as one U+FFFD."""
USER_DEFINED = "x-user-defined"
"""ASCII, and bytes 0x80-0xFF as U+F780-U+F7FF."""
PRESCAN_BYTES = 1024
"""HTML's prescan looks for a `<meta>` charset this far into the body."""

ENCODINGS: Mapping[str, tuple[str, ...]] = {
    "utf-8": ("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8",
              "x-unicode20utf8"),
    "cp866": ("866", "cp866", "csibm866", "ibm866"),
    "iso8859-2": ("csisolatin2", "iso-8859-2", "iso-ir-101", "iso8859-2", "iso88592",
                  "iso_8859-2", "iso_8859-2:1987", "l2", "latin2"),
    "iso8859-3": ("csisolatin3", "iso-8859-3", "iso-ir-109", "iso8859-3", "iso88593",
                  "iso_8859-3", "iso_8859-3:1988", "l3", "latin3"),
    "iso8859-4": ("csisolatin4", "iso-8859-4", "iso-ir-110", "iso8859-4", "iso88594",
                  "iso_8859-4", "iso_8859-4:1988", "l4", "latin4"),
    "iso8859-5": ("csisolatincyrillic", "cyrillic", "iso-8859-5", "iso-ir-144", "iso8859-5",
                  "iso88595", "iso_8859-5", "iso_8859-5:1988"),
    "iso8859-6": ("arabic", "asmo-708", "csiso88596e", "csiso88596i", "csisolatinarabic",
                  "ecma-114", "iso-8859-6", "iso-8859-6-e", "iso-8859-6-i", "iso-ir-127",
                  "iso8859-6", "iso88596", "iso_8859-6", "iso_8859-6:1987"),
    "iso8859-7": ("csisolatingreek", "ecma-118", "elot_928", "greek", "greek8", "iso-8859-7",
                  "iso-ir-126", "iso8859-7", "iso88597", "iso_8859-7", "iso_8859-7:1987",
                  "sun_eu_greek"),
    "iso8859-8": ("csiso88598e", "csisolatinhebrew", "hebrew", "iso-8859-8", "iso-8859-8-e",
                  "iso-ir-138", "iso8859-8", "iso88598", "iso_8859-8", "iso_8859-8:1988",
                  "visual",
                  # ISO-8859-8-I: the same bytes, read in logical order
                  "csiso88598i", "iso-8859-8-i", "logical"),
    "iso8859-10": ("csisolatin6", "iso-8859-10", "iso-ir-157", "iso8859-10", "iso885910", "l6",
                   "latin6"),
    "iso8859-13": ("iso-8859-13", "iso8859-13", "iso885913"),
    "iso8859-14": ("iso-8859-14", "iso8859-14", "iso885914"),
    "iso8859-15": ("csisolatin9", "iso-8859-15", "iso8859-15", "iso885915", "iso_8859-15",
                   "l9"),
    "iso8859-16": ("iso-8859-16",),
    "koi8-r": ("cskoi8r", "koi", "koi8", "koi8-r", "koi8_r"),
    "koi8-u": ("koi8-ru", "koi8-u"),
    "mac-roman": ("csmacintosh", "mac", "macintosh", "x-mac-roman"),
    "cp874": ("dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620", "windows-874"),
    "cp1250": ("cp1250", "windows-1250", "x-cp1250"),
    "cp1251": ("cp1251", "windows-1251", "x-cp1251"),
    "cp1252": ("ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819",
               "iso-8859-1", "iso-ir-100", "iso8859-1", "iso88591", "iso_8859-1",
               "iso_8859-1:1987", "l1", "latin1", "us-ascii", "windows-1252", "x-cp1252"),
    "cp1253": ("cp1253", "windows-1253", "x-cp1253"),
    "cp1254": ("cp1254", "csisolatin5", "iso-8859-9", "iso-ir-148", "iso8859-9", "iso88599",
               "iso_8859-9", "iso_8859-9:1989", "l5", "latin5", "windows-1254", "x-cp1254"),
    "cp1255": ("cp1255", "windows-1255", "x-cp1255"),
    "cp1256": ("cp1256", "windows-1256", "x-cp1256"),
    "cp1257": ("cp1257", "windows-1257", "x-cp1257"),
    "cp1258": ("cp1258", "windows-1258", "x-cp1258"),
    "mac-cyrillic": ("x-mac-cyrillic", "x-mac-ukrainian"),
    "gb18030": ("chinese", "csgb2312", "csiso58gb231280", "gb2312", "gb_2312", "gb_2312-80",
                "gbk", "iso-ir-58", "x-gbk",
                "gb18030"),
    "big5hkscs": ("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"),
    "euc_jp": ("cseucpkdfmtjapanese", "euc-jp", "x-euc-jp"),
    "iso2022_jp": ("csiso2022jp", "iso-2022-jp"),
    "cp932": ("csshiftjis", "ms932", "ms_kanji", "shift-jis", "shift_jis", "sjis", "windows-31j",
              "x-sjis"),
    "cp949": ("cseuckr", "csksc56011987", "euc-kr", "iso-ir-149", "korean", "ks_c_5601-1987",
              "ks_c_5601-1989", "ksc5601", "ksc_5601", "windows-949"),
    REPLACEMENT: ("csiso2022kr", "hz-gb-2312", "iso-2022-cn", "iso-2022-cn-ext", "iso-2022-kr",
                  "replacement"),
    "utf-16-be": ("unicodefffe", "utf-16be"),
    "utf-16-le": ("csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff", "utf-16",
                  "utf-16le"),
    USER_DEFINED: ("x-user-defined",),
}  # fmt: skip
"""Python codec (or one of the two decoded here) -> the standard's labels of that encoding."""

LABELS: Mapping[str, str] = {
    label: codec for codec, labels in ENCODINGS.items() for label in labels
}
"""Every label of the standard -> the codec that decodes it."""

BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le"))
_ASCII_WHITESPACE = "\t\n\f\r "
_USER_DEFINED_HIGH = {b: 0xF700 + b for b in range(0x80, 0x100)}


def codec_for(label: str | None) -> str | None:
    """The codec of a WHATWG label (trimmed, any case), or None for anything else."""
    if not label:
        return None
    return LABELS.get(label.strip(_ASCII_WHITESPACE).lower())


def header_charset(content_type: str) -> str | None:
    """The `charset` parameter of a `Content-Type` value, as written (quotes removed)."""
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'")
    return None


def meta_charset(head: bytes) -> str | None:
    """The codec a `<meta charset=...>` or `<meta http-equiv=Content-Type content=...>` names in
    `head` (the first PRESCAN_BYTES of an HTML body), or None.

    One pass over at most PRESCAN_BYTES: each `<meta` is read up to its `>`, and the scan goes
    on after it, so no byte is looked at more than a few times whatever the page holds. As in
    HTML, a `<meta>` naming UTF-16 means UTF-8 (the bytes just read were ASCII-compatible) and
    `x-user-defined` means windows-1252.
    """
    text = head[:PRESCAN_BYTES].lower()
    at = text.find(b"<meta")
    while at != -1:
        end = text.find(b">", at)
        if end == -1:
            return None
        codec = _charset_in_tag(text[at + 5 : end])
        if codec is not None:
            if codec.startswith("utf-16"):
                return "utf-8"
            return "cp1252" if codec == USER_DEFINED else codec
        at = text.find(b"<meta", end)
    return None


def _charset_in_tag(tag: bytes) -> str | None:
    """The codec of the first `charset=` inside one `<meta ...>` tag's text, if it is a label."""
    at = tag.find(b"charset")
    while at != -1:
        rest = tag[at + 7 :].lstrip()
        if rest.startswith(b"="):
            value = rest[1:].lstrip()
            if value[:1] in (b'"', b"'"):
                value = value[1:]
            label = bytearray()
            for byte in value[:40]:  # no label is longer than 20 characters
                if byte in b"\"'; \t\n\f\r/>":
                    break
                label.append(byte)
            return codec_for(label.decode("ascii", errors="replace"))
        at = tag.find(b"charset", at + 7)
    return None


def sniff(body: bytes, content_type: str, *, html: bool) -> tuple[str, int]:
    """(codec, bytes of BOM to skip) for `body`: BOM, then the header's label, then (HTML
    only) a `<meta>` in the first PRESCAN_BYTES, then UTF-8."""
    for bom, by_bom in BOMS:
        if body.startswith(bom):
            return by_bom, len(bom)
    codec = codec_for(header_charset(content_type))
    if codec is None and html:
        codec = meta_charset(body[:PRESCAN_BYTES])
    return codec or DEFAULT, 0


def decode(body: bytes, codec: str) -> str:
    """`body` read as `codec` (a value of LABELS), malformed bytes as U+FFFD; linear in size."""
    if codec == REPLACEMENT:
        return "\ufffd" if body else ""
    if codec == USER_DEFINED:
        return body.decode("latin-1").translate(_USER_DEFINED_HIGH)
    return body.decode(codec, errors="replace")


def text_of(body: bytes, content_type: str, *, html: bool = False) -> str:
    """The text of a body with this `Content-Type` (see `sniff`)."""
    codec, skip = sniff(body, content_type, html=html)
    return decode(body[skip:], codec)
