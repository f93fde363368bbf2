"""An OpenAI-compatible chat completion, as a pure request builder and a pure answer parser.

Content compression and the LLM reranker both talk to "any OpenAI-compatible endpoint" (OpenAI,
DashScope, GLM, vLLM, Ollama): `POST {base}/chat/completions` with `model` and `messages`, the
answer in `choices[0].message.content`. The runner sends the request, with its retries and call
records, like any provider call.
"""

from __future__ import annotations

import json

from pydantic import JsonValue, SecretStr

from fanfuse.net.runner import RequestSpec


def chat_request(
    base_url: str,
    api_key: SecretStr | None,
    model: str,
    system: str,
    user: str,
    *,
    max_tokens: int | None = None,
    temperature: float = 0.1,
) -> RequestSpec:
    key = api_key.get_secret_value() if api_key else ""
    body: dict[str, JsonValue] = {
        "model": model,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ],
        "temperature": temperature,
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return RequestSpec(
        url=f"{base_url.rstrip('/')}/chat/completions",
        method="POST",
        headers={"Authorization": f"Bearer {key}"} if key else {},
        json=body,
    )


def chat_answer(body: bytes) -> str:
    """The assistant's text from a chat completion body, or ValueError saying what is wrong."""
    try:
        content = json.loads(body)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"not a chat completion ({type(exc).__name__}: {exc})") from None
    if not isinstance(content, str) or not content.strip():
        raise ValueError("empty completion")
    return content.strip()
