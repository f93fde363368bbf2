"""Keep a result's content within a token budget (the compressing stage's work).

Apps feed results to LLMs, so a 40-page article must not arrive whole. Tokens are estimated
(about 4 characters per token for alphabetic scripts, one per CJK character: no tokenizer to
download). Content over the budget (default 3000) is compressed by an OpenAI-compatible LLM when
one is configured (`FANFUSE_CONTENT_LLM_*`), and otherwise, or when that call fails, truncated
at the last sentence boundary within the budget and marked `truncated` in its metadata.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from fanfuse.net.chat import chat_answer, chat_request
from fanfuse.net.runner import Runner
from fanfuse.settings.content import ContentSettings
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import CallRecord, Hit

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f\uff1b;])[\"'\u201d\u2019)\]]*\s*|\n+")
SYSTEM_PROMPT = (
    "You compress web page text for a search engine. Keep every fact, number, name and date "
    "that matters; drop boilerplate and repetition. Write in the language of the text. "
    "Answer with the compressed text only, at most {budget} tokens."
)


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: CJK characters count one each, other text 4 chars a token."""
    cjk = len(CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def truncate_at_sentence(
    text: str, budget: int, measure: Callable[[str], int] = estimate_tokens
) -> str:
    """The longest prefix of whole sentences within `budget` tokens, or within what `measure`
    counts (`len`: characters); a word cut if no sentence fits."""
    if measure(text) <= budget:
        return text
    cut = 0
    for match in SENTENCE_END.finditer(text):
        if measure(text[: match.start()]) > budget:
            break
        cut = match.start()
    if cut == 0:
        words = text.split()
        kept: list[str] = []
        for word in words:
            if measure(" ".join([*kept, word])) > budget:
                break
            kept.append(word)
        return " ".join(kept) if kept else text[:budget]
    return text[:cut].rstrip()


def within_chars(hits: list[Hit], max_chars: int | None) -> list[Hit]:
    """Each hit's content within the deployment's `max_content_chars` (None: no cap).

    Applied to a run's final hits, after every stage, so whatever brought the text (a provider,
    a page fetch, an LLM) no result keeps more: cut at a sentence boundary like the token budget,
    and marked `truncated` with the length it had.
    """
    if max_chars is None:
        return hits
    out: list[Hit] = []
    for hit in hits:
        if hit.content is not None and len(hit.content) > max_chars:
            facts = {"truncated": True, "original_chars": len(hit.content)}
            hit = hit.model_copy(
                update={
                    "content": truncate_at_sentence(hit.content, max_chars, len),
                    "metadata": {**hit.metadata, **facts},
                }
            )
        out.append(hit)
    return out


async def llm_compress(
    runner: Runner, settings: ContentSettings, text: str, calls: list[CallRecord]
) -> str:
    request = chat_request(
        settings.llm_base_url or "",
        settings.llm_api_key,
        settings.llm_model,
        SYSTEM_PROMPT.format(budget=settings.token_budget),
        text[: settings.llm_max_input_chars],
    )
    response = await runner.request("compressor", request, settings.llm_policy(), calls)
    if response.status >= 400:
        raise ProviderError("compressor", f"HTTP {response.status}")
    try:
        answer = chat_answer(response.body)
    except ValueError as exc:
        raise ProviderError("compressor", f"malformed response: {exc}") from exc
    return truncate_at_sentence(answer, settings.token_budget)


async def compress_text(
    runner: Runner, settings: ContentSettings, text: str, calls: list[CallRecord]
) -> tuple[str, dict[str, Any]]:
    """`text` within the token budget, and facts for the hit's metadata (how it was cut)."""
    facts: dict[str, Any] = {"original_tokens": estimate_tokens(text)}
    new_text = None
    if settings.llm_base_url:
        try:
            new_text = await llm_compress(runner, settings, text, calls)
            facts["compressed"] = "llm"
        except ProviderError as exc:
            facts["compress_error"] = str(exc)[:300]
    if new_text is None:
        new_text = truncate_at_sentence(text, settings.token_budget)
        facts["truncated"] = True
    facts["tokens"] = estimate_tokens(new_text)
    return new_text, facts
