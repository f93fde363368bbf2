"""The LLM reranker's settings (env: `FANFUSE_RERANK_LLM_<FIELD>`), apart from the reranker.

A section of the settings tree (`Settings.rerank_llm`), kept out of `rerank/llm.py`, which
imports the network runner (httpx): a composition root reads these settings when it builds its
service, and a cold start that never reranks must not load the runner to do so.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, SecretStr

from fanfuse.net.policy import LLM, CallPolicy
from fanfuse.settings.sources import Section


class LlmRerankSettings(Section):
    """`Settings.rerank_llm` (`FANFUSE_RERANK_LLM_*`): the endpoint is what turns the LLM
    reranker on."""

    model_config = ConfigDict(extra="ignore")
    env_prefix: ClassVar[str] = "FANFUSE_RERANK_LLM_"

    base_url: str | None = None
    """An OpenAI-compatible API root (`.../v1`); unset: the offline reranker is used."""
    api_key: SecretStr | None = None
    """The endpoint's key."""
    model: str = "qwen-plus"
    """The model asked to rerank."""
    max_candidates: int = 20
    """Candidates of the fused pool the model sees (the top ones), per query."""
    snippet_chars: int = 300
    """Characters of each candidate's snippet sent to the model."""
    timeout: float = 20.0
    """Seconds for the call: a rerank delays the whole search's final answer by this at most."""

    @property
    def configured(self) -> bool:
        return bool(self.base_url)

    def policy(self) -> CallPolicy:
        return CallPolicy(timeout=self.timeout, max_concurrency=LLM.max_concurrency, max_attempts=1)
