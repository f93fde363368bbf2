"""Settings of the content stages (env: `FANFUSE_CONTENT_<FIELD>`); defaults from `net.policy`."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, SecretStr

from fanfuse.net.policy import (
    BROWSER_USER_AGENT,
    LLM,
    MAX_REDIRECTS,
    PAGE_FETCH,
    CallPolicy,
    FetchPolicy,
)
from fanfuse.settings.sources import Section


class ContentSettings(Section):
    """`Settings.content`: how result pages are fetched, extracted and compressed."""

    model_config = ConfigDict(extra="ignore")
    env_prefix: ClassVar[str] = "FANFUSE_CONTENT_"

    allow_private: bool = False
    """Fetch private, link-local and reserved addresses too (never by default: SSRF)."""
    allow_loopback: bool = False
    """Fetch loopback addresses (127.0.0.0/8, ::1); tests and local stacks turn this on."""
    concurrency: int = PAGE_FETCH.max_concurrency
    """Page fetches in flight per process."""
    timeout: float = PAGE_FETCH.timeout
    """Seconds per request, body included."""
    max_bytes: int = PAGE_FETCH.max_body_bytes
    """A page body is read up to this many bytes (decompressed), the rest is dropped."""
    max_redirects: int = MAX_REDIRECTS
    """Redirects followed per page, each target checked by the address guard."""
    max_attempts: int = PAGE_FETCH.max_attempts
    """Attempts per page on a timeout, a 429 or a 5xx."""
    user_agent: str = BROWSER_USER_AGENT
    """The User-Agent pages are fetched with."""
    token_budget: int = 3000
    """Content over this many (estimated) tokens is compressed or truncated."""
    llm_base_url: str | None = None
    """An OpenAI-compatible endpoint (`.../v1`) that compresses long content when set."""
    llm_api_key: SecretStr | None = None
    """The compression endpoint's key."""
    llm_model: str = "qwen-plus"
    """The compression endpoint's model."""
    llm_max_input_chars: int = 60_000
    """Characters of page text sent to the compression model at most."""

    def fetch_policy(self, max_bytes: int | None = None) -> FetchPolicy:
        """The guard's policy for a page fetch (`max_bytes` for reads that need less)."""
        return FetchPolicy(
            allow_private=self.allow_private,
            allow_loopback=self.allow_loopback,
            max_redirects=self.max_redirects,
            user_agent=self.user_agent,
            call=CallPolicy(
                timeout=self.timeout,
                max_concurrency=self.concurrency,
                max_attempts=self.max_attempts,
                max_body_bytes=max_bytes or self.max_bytes,
            ),
        )

    def llm_policy(self) -> CallPolicy:
        """Compression calls: at least the LLM default's time, however short page fetches are."""
        return CallPolicy(
            timeout=max(self.timeout, LLM.timeout),
            max_concurrency=LLM.max_concurrency,
            max_attempts=LLM.max_attempts,
        )
