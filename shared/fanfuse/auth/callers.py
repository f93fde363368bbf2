"""Who is calling a public endpoint: the one decision the functions and `fanfuse serve` share.

A request is read for one credential, the first of these it carries (the others are not read):

1. `X-Api-Key: ff_{key_id}_{secret}`: the key's stored record decides. A garbled key, an unknown
   one and a wrong secret are all 401, with one message, so an answer never tells whether a key
   id exists; a revoked key is 403, and only once its secret matched. The subject is
   `key:<the key's owner>`, its limits the key's own.
2. `X-Apigateway-Api-Userinfo`, only when `settings.trust_gateway` says the functions are
   reachable solely through API Gateway, which verified the caller's JWT and forwards its claims
   (base64url JSON); the subject is `gateway:<sub>`. Without that setting the header is
   ignored: anyone can set it.
3. The IAM principal API Gateway verified (the Lambda event's `requestContext.authorizer.iam`,
   payload format 2.0), only when `settings.trust_iam_authorizer` says every route of the HTTP
   API is AWS_IAM-authorized (infra/aws `api_access = "iam"`): the gateway checked the SigV4
   signature, so its `userArn` is who called; the subject is `aws:<userArn>`, an assumed role's
   session cut to the role (`iam_owner`). It is not a header: API Gateway writes the request
   context, no caller can, and a front that is not the Lambda's has none.
4. `Authorization: Bearer <ID token>`: a Firebase or Google-signed ID token, verified by
   `fanfuse.auth.tokens.caller_claims` (signature, issuer, audience, expiry, principal). The
   subject is `firebase:<uid>` or `google:<sub>`.

Subjects are namespaced by the kind of credential (`OWNER_NAMESPACES`) because each kind lets a
different party choose the name: whoever runs `fanfuse keys create --owner X` picks X, Firebase
picks uids, Google picks `sub`s. Without the prefix, a key made for owner `<someone's uid>` would
read that user's searches. A key record stores its owner as given; the prefix is added here,
when the Caller is built, so no key needs rewriting. Searches stored before the prefix existed
keep their bare owner, which no caller's subject equals any more: they are seen by nobody and
expire within `ttl_minutes` (30 min by default), and none is rewritten, since a bare owner does
not say which kind of credential made it (see docs/security.md, "Owners").

Why this order: behind Cloud Functions' IAM or API Gateway, `Authorization` carries the
platform's own token (the invoker's, or the gateway's service account's, the caller's original
moved to `X-Forwarded-Authorization`), not the caller's. So a caller that sends a key means the
key, and a trusted gateway's claims outrank the bearer token it replaced. Behind AWS_IAM routes,
`Authorization` holds the SigV4 signature, never a bearer token, so the principal it proved
comes before it.

No credential at all: 401 naming both ways to authenticate when `settings.auth_required` (the
default), else None, an anonymous caller whose searches have no owner. A credential that is
present is always checked, whatever `auth_required` says. No message ever quotes a credential.

Key records are cached in process for `KEY_CACHE_SECONDS`, so a client polling a search's status
costs no key read per poll, and a revocation takes effect within that bound. A key id the store
does not hold is remembered too, for `KEY_MISS_SECONDS` (at most `KEY_MISS_SIZE` of them): a
client retrying a deleted or mistyped key, or a flood repeating one forged id, costs one billed
store read per id and interval, not one per request. A new key's id is random, so no one has
asked for it before it exists, and it works at once.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TypeVar

from fanfuse.auth import keys, tokens
from fanfuse.auth.keys import API_KEY_HEADER
from fanfuse.auth.tokens import Headers
from fanfuse.settings import Settings
from fanfuse.store.ports import KeyStore
from fanfuse.wire.errors import Forbidden, TaskExpired, TaskNotFound, Unauthorized
from fanfuse.wire.models import ApiKey, Caller, TaskView

AUTHORIZATION = "Authorization"
USERINFO_HEADER = "X-Apigateway-Api-Userinfo"
KEY_CACHE_SECONDS = 30.0
"""How long a process reuses a key record it read: the bound on a revocation's delay."""
KEY_CACHE_SIZE = 1024
KEY_MISS_SECONDS = 5.0
"""How long a key id the store does not hold is answered 401 without reading it again."""
KEY_MISS_SIZE = 4096
"""Unknown key ids remembered at most (the oldest forgotten first): bounded, whatever is sent."""
OWNER_NAMESPACES = ("key", "firebase", "google", "gateway", "aws", "local")
"""The prefixes of `Caller.subject`: API keys, Firebase and Google ID tokens, API Gateway's
claims (GCP), the IAM principal of a SigV4-signed call (AWS), and the fixed owner of an
unauthenticated local MCP server (`http.backend`)."""
LAMBDA_REQUEST_CONTEXT = "apig_wsgi.request_context"
"""Where apig-wsgi (`fanfuse.fronts.aws_lambda.front`) puts the Lambda event's `requestContext`
in the WSGI environ; no other front sets it, and no request header can (headers are `HTTP_*`)."""
HOW = (
    f"send an API key as {API_KEY_HEADER} (`fanfuse keys create`) or an ID token as "
    f"{AUTHORIZATION}: Bearer <token>"
)
BAD_KEY = f"{API_KEY_HEADER}: not a valid API key"
MALFORMED_TOKEN = "ID token refused: it is not a well-formed JWT"
"""Any token that cannot even be decoded: the 401 `tokens.unverified` gives, also for what
escapes its decoder (a header of 1,500 nested `[` is a RecursionError in `json.loads`)."""


# ---------------------------------------------------------------------------------------------
# Pure decisions


def key_caller(record: ApiKey | None, secret: str) -> Caller:
    """The caller a key stands for, or 401 (no such key, wrong secret) or 403 (revoked).

    Unknown and wrong are one answer, so a caller cannot probe which key ids exist; revoked is
    told only to someone who holds the secret, who may as well learn that it stopped working.
    """
    if record is None or not keys.matches(record, secret):
        raise Unauthorized(BAD_KEY)
    if record.revoked_at is not None:
        raise Forbidden(f"API key {record.key_id} was revoked; ask for a new one")
    return Caller(
        subject=f"key:{record.owner}",
        via="api_key",
        key_id=record.key_id,
        rate_per_minute=record.rate_per_minute,
        max_in_flight=record.max_in_flight,
        daily_budget_usd=record.daily_budget_usd,
    )


def gateway_caller(header: str) -> Caller:
    """The caller API Gateway vouches for: `sub` of its base64url JSON claims, else 401."""
    try:
        padded = header.strip() + "=" * (-len(header.strip()) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (binascii.Error, ValueError, RecursionError):  # RecursionError: `[` nested deep
        claims = None
    subject = claims.get("sub") if isinstance(claims, dict) else None
    if not isinstance(subject, str) or not subject:
        raise Unauthorized(f"{USERINFO_HEADER}: not base64url JSON claims with a `sub`")
    return Caller(subject=f"gateway:{subject}", via="gateway")


def iam_identity(request_context: object) -> Mapping[str, object] | None:
    """`requestContext.authorizer.iam` of a Lambda event (payload format 2.0): the principal
    whose SigV4 signature API Gateway verified, or None when the event carries none."""
    authorizer = request_context.get("authorizer") if isinstance(request_context, dict) else None
    identity = authorizer.get("iam") if isinstance(authorizer, dict) else None
    return identity if isinstance(identity, dict) else None


STS_SESSION = re.compile(
    r"^(arn:[a-z0-9-]+:sts::[0-9]{12}:(?:assumed-role/[^/]+|federated-user))/[^/]+$"
)
"""An STS session's ARN, cut after what its credentials prove: `assumed-role/<role>/<session>`
(whoever may assume the role names the session, `RoleSessionName`), `federated-user/<name>`
(whoever may call GetFederationToken names the user)."""


def iam_owner(arn: str, sessions: bool = False) -> str:
    """The principal an IAM caller's ARN proves: a user's ARN as it is; for a session of STS,
    the role it assumed (`arn:aws:sts::<account>:assumed-role/<role>`) or the account's
    federation (`...:federated-user`), since the session's own name is the caller's pick, and
    anyone allowed to assume the role could pick another session's name and act as it.
    `sessions` (`settings.iam_session_owners`): each session its own owner, a deployment's
    opt-in that separates its callers' searches for convenience, not security."""
    if sessions:
        return arn
    session = STS_SESSION.match(arn)
    return session.group(1) if session else arn


def iam_caller(identity: Mapping[str, object], sessions: bool = False) -> Caller:
    """The caller of an IAM-authorized request: `aws:<iam_owner(userArn)>`, else 401.

    The ARN as API Gateway gives it: a user's, or an assumed role's *session*
    (`arn:aws:sts::<account>:assumed-role/<role>/<session>`), whose owner is the role: sessions
    of one role are one tenant, unless `sessions` (docs/security.md, "Owners")."""
    arn = identity.get("userArn")
    if not isinstance(arn, str) or not arn.startswith("arn:"):
        raise Unauthorized("the IAM authorizer's identity names no userArn")
    return Caller(subject=f"aws:{iam_owner(arn, sessions)}", via="iam")


def visible(view: TaskView, caller: Caller | None) -> TaskView:
    """A search with an owner exists only for its owner: anyone else gets 404, not 403, so that
    task ids are not disclosed. A search without one (anonymous, or started in process) is
    everyone's."""
    if not _sees(view.owner, caller):
        raise TaskNotFound(view.task_id)
    return view


def visible_status(
    read: Callable[[str], TaskView], task_id: str, caller: Caller | None
) -> TaskView:
    """`visible(read(task_id), caller)`, where an expired search (410) is also seen only by its
    owner: to anyone else it is 404 like every search of another owner, or the 410 would tell
    them the id exists."""
    try:
        view = read(task_id)
    except TaskExpired as exc:
        if not _sees(exc.owner, caller):
            raise TaskNotFound(task_id) from None
        raise
    return visible(view, caller)


def _sees(owner: str | None, caller: Caller | None) -> bool:
    return owner is None or (caller is not None and caller.subject == owner)


# ---------------------------------------------------------------------------------------------
# The authenticator: the decisions above, with the store and ID-token verification


class Authenticator:
    """`caller(headers, request_context)`: the verified caller of one request, None (anonymous,
    when allowed), or Unauthorized/Forbidden. One per process: it holds the key cache."""

    def __init__(
        self,
        settings: Settings,
        store: KeyStore,
        *,
        cache_seconds: float = KEY_CACHE_SECONDS,
        miss_seconds: float = KEY_MISS_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.store = store
        self.cache_seconds = cache_seconds
        self.miss_seconds = miss_seconds
        self._clock = clock
        self._cache: OrderedDict[str, tuple[float, ApiKey]] = OrderedDict()
        self._misses: OrderedDict[str, float] = OrderedDict()
        """Unknown key ids and when the store said so, oldest first."""
        self._lock = threading.Lock()

    def caller(self, headers: Headers, request_context: object = None) -> Caller | None:
        """`request_context`: the Lambda event's `requestContext` (`LAMBDA_REQUEST_CONTEXT`),
        read only when `settings.trust_iam_authorizer`; None from every other front."""
        key = headers.get(API_KEY_HEADER)
        if key is not None:
            return self._by_key(key)
        if self.settings.trust_gateway:
            userinfo = headers.get(USERINFO_HEADER)
            if userinfo is not None:
                return gateway_caller(userinfo)
        if self.settings.trust_iam_authorizer:
            identity = iam_identity(request_context)
            if identity is not None:
                return iam_caller(identity, self.settings.iam_session_owners)
        authorization = headers.get(AUTHORIZATION)
        if authorization is not None:
            token = tokens.bearer(authorization)
            if token is None:
                raise Unauthorized(f"{AUTHORIZATION}: expected `Bearer <ID token>`")
            try:
                claims = tokens.caller_claims(token, self.settings)
            except RecursionError:  # its JSON nested past the parser's recursion: garbage
                raise Unauthorized(MALFORMED_TOKEN) from None
            subject = claims.get("sub")
            if not isinstance(subject, str) or not subject:
                raise Unauthorized("the ID token has no `sub`")
            return Caller(subject=tokens.caller_subject(claims), via="id_token")
        if self.settings.auth_required:
            raise Unauthorized(f"no credentials: {HOW}")
        return None

    def _by_key(self, text: str) -> Caller:
        parsed = keys.parse_key(text)
        if parsed is None:
            raise Unauthorized(BAD_KEY)
        key_id, secret = parsed
        return key_caller(self._record(key_id), secret)

    def _record(self, key_id: str) -> ApiKey | None:
        """The key's record: from the cache while younger than `cache_seconds`, None while the
        store's last "no such key" is younger than `miss_seconds`, else the store."""
        now = self._clock()
        with self._lock:
            cached = self._cache.get(key_id)
            if cached is not None and now - cached[0] < self.cache_seconds:
                return cached[1]
            missed = self._misses.get(key_id)
            if missed is not None and now - missed < self.miss_seconds:
                return None
        record = self.store.get_key(key_id)
        with self._lock:
            if record is None:
                if self.miss_seconds > 0:
                    remember(self._misses, key_id, now, KEY_MISS_SIZE)
            else:
                self._misses.pop(key_id, None)
                if self.cache_seconds > 0:
                    remember(self._cache, key_id, (now, record), KEY_CACHE_SIZE)
        return record


V = TypeVar("V")


def remember(entries: OrderedDict[str, V], key: str, value: V, size: int) -> None:
    """`entries[key] = value` as the newest entry, the oldest dropped past `size`."""
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > size:
        entries.popitem(last=False)
