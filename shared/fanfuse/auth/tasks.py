"""The task targets' check: `run_platform` and `aggregate` accept only Cloud Tasks' deliveries.

A forged delivery could run any platform of any search (and spend its provider quota), or cut
a running search short (`{"deadline": true}`), so each delivery proves where it came from before
its body is even parsed:

- Locally (`settings.tasks_hmac_secret` set; `fanfuse dev` generates one per stack and gives it
  to every function): the queue signs each task body, HMAC-SHA256 keyed with the secret, in
  `X-Fanfuse-Signature: sha256=<hex>`; the emulator forwards the header, the target recomputes
  it over the exact bytes it received and compares in constant time.
- In production (no secret, `settings.tasks_service_account` set): Cloud Tasks sends an OIDC
  token for that service account, audience the target's URL, which `tokens.task_claims`
  verifies (see `audience`).
- Neither set: every delivery is refused (fail closed), saying what to set.

Refusals are 401 (no or bad credential) or 403 (a good one that may not deliver, or nothing
configured), never the 200 with which a target acknowledges a hopeless message: that 200 is for
Cloud Tasks' own deliveries, which always verify, so a refusal never sets off a retry loop.
"""

from __future__ import annotations

import hashlib
import hmac

from fanfuse.auth.tokens import Headers, bearer, task_claims
from fanfuse.errors import Forbidden, Unauthorized
from fanfuse.settings import Settings

SIGNATURE_HEADER = "X-Fanfuse-Signature"
SCHEME = "sha256="


def sign(body: bytes, secret: str) -> str:
    """The signature header's value for `body`: `sha256=` and the HMAC-SHA256 in hex."""
    return SCHEME + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def hmac_secret(settings: Settings) -> str | None:
    """The secret deliveries are signed with, or None; an empty one counts as none (fail
    closed: an empty key would be a signature anyone can make)."""
    secret = settings.tasks_hmac_secret
    if secret is None:
        return None
    return secret.get_secret_value() or None


def audience(target: str, headers: Headers, settings: Settings) -> str | None:
    """The URL a task token for `target` must name: `settings.function_urls[target]`, else
    `https://` and the Host this request was sent to.

    A function cannot be told its own URL by the Terraform that creates it (infra/queues.tf pins
    each queue to `https://<the function's host>/` and names that URL as the audience), and on
    Cloud Run the Host is the service's own: the front end routes by it, and has already checked
    the token's audience against that same service before the request arrives.
    """
    configured = settings.function_urls.get(target)
    if configured:
        return configured
    host = headers.get("Host")
    return f"https://{host}" if host else None


def signature_problem(given: str | None, body: bytes, secret: str) -> str | None:
    """Why a signature header does not prove the body came from the queue, or None."""
    if not given:
        return f"no {SIGNATURE_HEADER} header"
    if not hmac.compare_digest(given.strip().encode(), sign(body, secret).encode()):
        return f"{SIGNATURE_HEADER} does not match the body"
    return None


def verify_delivery(target: str, headers: Headers, body: bytes, settings: Settings) -> None:
    """Return if this delivery to `target` comes from the queue; else Unauthorized/Forbidden
    (or Unavailable, when the OIDC signing keys cannot be fetched: Cloud Tasks retries)."""
    refused = f"{target} accepts only Cloud Tasks deliveries"
    secret = hmac_secret(settings)
    if secret is not None:
        problem = signature_problem(headers.get(SIGNATURE_HEADER), body, secret)
        if problem:
            raise Unauthorized(f"{refused}: {problem}")
        return
    if settings.tasks_service_account:
        token = bearer(headers.get("Authorization"))
        if token is None:
            raise Unauthorized(f"{refused}: no Authorization: Bearer token")
        url = audience(target, headers, settings)
        if url is None:
            raise Unauthorized(f"{refused}: no Host header, so no audience to check")
        try:
            task_claims(token, url, settings)
        except RecursionError:  # a token whose JSON nests past the parser's recursion
            raise Unauthorized(f"{refused}: the task token is not a well-formed JWT") from None
        return
    raise Forbidden(
        f"{refused}, and this deployment has no way to tell them: set "
        "FANFUSE_TASKS_SERVICE_ACCOUNT (production, OIDC) or FANFUSE_TASKS_HMAC_SECRET (local)"
    )
