"""The task targets' check: `run_platform` and `aggregate` accept only Cloud Tasks' deliveries.

A forged delivery could run any platform of any search (and spend its provider quota), or cut
a running search short (`{"deadline": true}`), so each delivery proves where it came from before
its body is even parsed:

- Locally (`settings.tasks_hmac_secret` set; `fanfuse dev` generates one per stack and gives it
  to every function) and on AWS (SQS): the queue signs each task, HMAC-SHA256 keyed with the
  secret, in `X-Fanfuse-Signature: t=<not before>,e=<expires>,sha256=<hex>` (`sign`); the
  emulator forwards the header (SQS carries it as a message attribute), the target recomputes
  it over what it received and compares in constant time.
- In production (no secret, `settings.tasks_service_account` set): Cloud Tasks sends an OIDC
  token for that service account, audience the target's URL, which `tokens.task_claims`
  verifies (see `audience`).
- Neither set: every delivery is refused (fail closed), saying what to set.

What an HMAC signature binds (`signed_bytes`), and why replays are refused without a store:

- the target (`run_platform` or `aggregate`): a body signed for one is refused at the other;
- the body, byte for byte, which names the task (`task_id`) and, for `run_platform`, the
  platform: a signature proves nothing about any other task or platform;
- a validity window [not before, expires], each end with CLOCK_SKEW: `expires` is the signing
  time plus `ttl_minutes` (past it the search itself is gone, 410, and no delivery of its tasks
  can do anything useful), `not before` the time the queue is to deliver it (a delayed deadline
  task: its schedule time). The window is what makes a captured body worthless: a deadline body
  read from the queue before it is due cannot cut the search short early, and none works once
  expired.

Inside the window a body may be delivered more than once, and must be: Cloud Tasks and SQS retry
a delivery that failed or timed out, and SQS delivers at least once. A replay inside the window
is one more such delivery, which the store's lifecycle makes harmless: a platform run is claimed
under a lease and runs once, a search is finalized once (`aggregate` on a terminal search is
`already_final`, writing nothing), and a deadline at its time forces what the deadline would force
anyway. Refusing a second delivery outright (a nonce stored per delivery) would cost a write per
task and break the queues' own retries, for no protection the window and the lifecycle lack.

Refusals are 401 (no or bad credential) or 403 (a good one that may not deliver, or nothing
configured), never the 200 with which a target acknowledges a hopeless message: that 200 is for
Cloud Tasks' own deliveries, which always verify, so a refusal never sets off a retry loop.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from datetime import datetime

from fanfuse.auth.tokens import CLOCK_SKEW, Headers, bearer, task_claims
from fanfuse.settings import Settings
from fanfuse.wire.errors import Forbidden, Unauthorized

SIGNATURE_HEADER = "X-Fanfuse-Signature"
SIGNATURE = re.compile(r"^t=(\d{1,12}),e=(\d{1,12}),sha256=([0-9a-f]{64})$")
TARGETS = frozenset({"run_platform", "aggregate"})


def signed_bytes(target: str, not_before: int, expires: int, body: bytes) -> bytes:
    """What the HMAC covers: a domain tag, the target, the window, then the body as sent."""
    return f"fanfuse-task-v2\n{target}\n{not_before}\n{expires}\n".encode() + body


def sign(target: str, body: bytes, secret: str, *, not_before: int, expires: int) -> str:
    """The signature header's value for `body` delivered to `target` within the window."""
    mac = hmac.new(secret.encode(), signed_bytes(target, not_before, expires, body), hashlib.sha256)
    return f"t={not_before},e={expires},sha256={mac.hexdigest()}"


def signature_for(
    target: str, body: bytes, secret: str, settings: Settings, at: datetime | None = None
) -> str:
    """What a queue sends with a task for `target` due at `at` (None: now): valid from then
    until `ttl_minutes` later (see the module)."""
    not_before = math.floor(at.timestamp() if at is not None else time.time())
    expires = not_before + math.ceil(settings.ttl_minutes * 60)
    return sign(target, body, secret, not_before=not_before, expires=expires)


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


def signature_problem(
    given: str | None, target: str, body: bytes, secret: str, now: float
) -> str | None:
    """Why a signature header does not prove the body came from the queue, for `target`,
    now; or None. The MAC is checked before the window, so an unsigned window says nothing."""
    if not given:
        return f"no {SIGNATURE_HEADER} header"
    found = SIGNATURE.match(given.strip())
    if found is None:
        return f"{SIGNATURE_HEADER} is not `t=<not before>,e=<expires>,sha256=<hex>`"
    not_before, expires = int(found[1]), int(found[2])
    expected = sign(target, body, secret, not_before=not_before, expires=expires)
    if not hmac.compare_digest(given.strip().encode(), expected.encode()):
        return f"{SIGNATURE_HEADER} does not match the body and target"
    if now + CLOCK_SKEW < not_before:
        return f"{SIGNATURE_HEADER} is not valid yet (the task is not due)"
    if now - CLOCK_SKEW > expires:
        return f"{SIGNATURE_HEADER} has expired"
    return None


def verify_delivery(
    target: str, headers: Headers, body: bytes, settings: Settings, now: float | None = None
) -> None:
    """Return if this delivery to `target` comes from the queue; else Unauthorized/Forbidden
    (or Unavailable, when the OIDC signing keys cannot be fetched: Cloud Tasks retries)."""
    refused = f"{target} accepts only Cloud Tasks deliveries"
    secret = hmac_secret(settings)
    if secret is not None:
        when = time.time() if now is None else now
        problem = signature_problem(headers.get(SIGNATURE_HEADER), target, body, secret, when)
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
