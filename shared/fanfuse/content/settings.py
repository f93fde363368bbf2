"""Settings of the content stages (env: `FANFUSE_CONTENT_<FIELD>`)."""

from __future__ import annotations

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ContentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FANFUSE_CONTENT_", extra="ignore", env_file=None)

    allow_private: bool = False
    """Fetch private, link-local and reserved addresses too (never by default: SSRF)."""
    allow_loopback: bool = False
    """Fetch loopback addresses (127.0.0.0/8, ::1); tests and local stacks turn this on."""
    concurrency: int = 5
    timeout: float = 10.0
    """Seconds per request, body included."""
    max_bytes: int = 2_000_000
    max_redirects: int = 5
    max_attempts: int = 2
    user_agent: str = "Mozilla/5.0 (compatible; fanfuse/0.1; +https://github.com/fanfuse)"
    token_budget: int = 3000
    """Content over this many (estimated) tokens is compressed or truncated."""
    llm_base_url: str | None = None
    """An OpenAI-compatible endpoint (`.../v1`) that compresses long content when set."""
    llm_api_key: SecretStr | None = None
    llm_model: str = "qwen-plus"
    llm_max_input_chars: int = 60_000
