"""Query strategy for the HTTP platforms that opt in: language-aware shaping, supplemental queries.

From the search pipeline's design: a query is shaped for the platform's language (CJK text loses
the spaces a Latin keyboard habit puts between words, question marks and quotes that keyword
engines read literally are dropped), and when a platform returns fewer results than asked, a few
broader supplemental queries fill the list. (Targeted fetches of results lacking content are
done by the platforms that can fetch one page cheaply, e.g. `web_search_mcp`.)
"""

from __future__ import annotations

import re

CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
CJK_CHAR = re.compile(f"[{CJK}]")
CJK_GAP = re.compile(f"(?<=[{CJK}])\\s+(?=[{CJK}])")
OPERATOR = re.compile(r"\b(?:site|inurl|intitle|filetype):\S+", re.IGNORECASE)
TRAILING = re.compile("[\\s?!.\u3002\uff1f\uff01]+$")
QUOTES = re.compile('["\u201c\u201d\u300c\u300d]')
MAX_SUPPLEMENTS = 2


def script_of(text: str) -> str:
    """`cjk` when most letters are Chinese, Japanese or Korean, else `latin`."""
    letters = [c for c in text if c.isalpha()]
    cjk = sum(1 for c in letters if CJK_CHAR.match(c))
    return "cjk" if letters and cjk * 2 >= len(letters) else "latin"


def shape_query(query: str, language: str | None = None) -> str:
    """The query as a keyword engine wants it, for the query's (or the request's) language."""
    shaped = " ".join(query.split())
    shaped = TRAILING.sub("", shaped)
    cjk = script_of(shaped) == "cjk" or (language or "").lower()[:2] in ("zh", "ja", "ko")
    if cjk:
        shaped = CJK_GAP.sub("", shaped)
    return shaped or query


def supplemental_queries(query: str) -> list[str]:
    """Broader variants of `query` to try when it found too few results (most specific first)."""
    out: list[str] = []
    plain = " ".join(OPERATOR.sub(" ", QUOTES.sub(" ", query)).split())
    if plain and plain != query:
        out.append(plain)
    words = plain.split()
    if len(words) > 2:
        out.append(" ".join(words[: max(2, len(words) // 2 + 1)]))
    elif script_of(plain) == "cjk" and len(plain) > 4:
        out.append(plain[: len(plain) // 2 + 1])
    return [q for q in dict.fromkeys(out) if q != query][:MAX_SUPPLEMENTS]
