"""ID tokens verified with google-auth: signature, issuer, audience, expiry.

Three kinds of token reach the functions, all RS256 JWTs signed with keys their issuer
publishes (`auth.certs` fetches and caches them):

- Firebase ID tokens (`iss` https://securetoken.google.com/<project>, `aud` the project), for
  apps whose users sign in with Firebase Authentication; accepted when
  `settings.firebase_project` is set, for the sign-in providers of
  `settings.firebase_sign_in_providers` (None: any), never `anonymous` unless
  `settings.firebase_allow_anonymous`: an anonymous user is whoever opened the app, and would
  otherwise be a tenant per click.
- Google-signed ID tokens (`iss` accounts.google.com), for service accounts and Google users;
  accepted for the audiences in `settings.id_token_audiences`, and only from the principals in
  `settings.id_token_principals` (a verified `email`, or a `sub`): any Google account, every
  service account of every project included, can mint a token naming any audience, so the
  audience says who the token is for, never who may call.
- Cloud Tasks' OIDC tokens: Google-signed, `aud` the task target's URL, `email` the tasks
  service account (`task_claims`, used by `auth.task_deliveries`).

Locally, the Firebase emulators (the Auth emulator, the Firestore emulator's `mockUserToken`) hand
apps *unsigned* Firebase ID tokens (`alg: none`); `settings.firebase_emulator_tokens`, which
settings allow only for a `demo-` project, accepts those as Firebase's Admin SDKs do beside the
Auth emulator, with every claim checked (`emulator_claims`; examples/web-app runs on them). A
setting can be copied into a deployment by mistake, so it is not enough alone: unsigned tokens
are refused whenever this process runs on a cloud runtime, or talks to no emulator at all
(`emulator_tokens_problem`), whatever the project is called.

google-auth's `jwt.decode` checks the signature with the published key and the time claims
(with CLOCK_SKEW); the claims it does not know (issuer, subject, `auth_time`, the task token's
account) are checked here by `claim_problem`. Every refusal says what failed and never repeats
the token: an Unauthorized (401) for a token that does not verify (a malformed one included:
whatever bytes arrive, the answer is a 401, never a RecursionError or ValueError escaping as a
503), a Forbidden (403) for a token that verifies but whose principal may not call (a task token
of another account, a Google account not allowed, an anonymous Firebase user), an Unavailable
(503) when the issuer's keys cannot be fetched (the caller's token may be fine: try again).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fanfuse.auth.certs import CERTS, CertCache, CertsUnavailable
from fanfuse.settings import Settings
from fanfuse.wire.errors import Forbidden, Unauthorized, Unavailable

CLOCK_SKEW = 30
"""Seconds a token may be early (`iat`, `auth_time`) or late (`exp`): clocks differ a little."""
ALGORITHM = "RS256"
"""What Google and Firebase sign with; anything else (`none` above all) is refused, but for the
Firebase emulators' tokens where a `demo-` project accepts them (`emulator_claims`)."""
EMULATOR_ALGORITHM = "none"
"""What the Firebase emulators' tokens carry: accepted only from an `Issuer.unsigned` issuer."""
GOOGLE_ISSUERS = frozenset({"accounts.google.com", "https://accounts.google.com"})
FIREBASE_ISSUER = "https://securetoken.google.com/"
MAX_TOKEN_CHARS = 16_384
"""Longer is no ID token (Google's and Firebase's are 1-2 KB): refused before it is decoded."""
ANONYMOUS = "anonymous"
"""Firebase's `sign_in_provider` for a user who never signed in."""
MALFORMED = (ValueError, TypeError, RecursionError, OverflowError)
"""What decoding an arbitrary string as a JWT may raise besides google-auth's own errors: bad
base64 or JSON (ValueError, UnicodeError), JSON nested deep enough to exhaust the parser
(RecursionError: a header of 1,500 `[`), huge numbers (OverflowError)."""


@dataclass(frozen=True)
class Issuer:
    """What one kind of token must be: who signs it, where its keys are, which audiences."""

    kind: str
    """How refusals name the token ("Firebase ID token")."""
    issuers: frozenset[str]
    audiences: frozenset[str]
    certs_url: str
    signs_in: bool = False
    """Firebase: the token records when the user signed in (`auth_time`), never in the future."""
    namespace: str = "google"
    """The prefix of the callers it names (`google:<sub>`, `firebase:<uid>`, models.Caller)."""
    unsigned: bool = False
    """Also accept the Firebase emulators' unsigned tokens (`emulator_tokens_problem` None):
    every claim is checked; they have no signature to check."""


def emulator_tokens_problem(settings: Settings) -> str | None:
    """Why this process may not accept the Firebase emulators' unsigned tokens, or None.

    All of: the setting; a `demo-` project (Settings refuses the setting for any other); no
    cloud runtime (`settings.cloud_runtime`: K_SERVICE, which Cloud Run and Cloud Functions
    set, or AWS_LAMBDA_FUNCTION_NAME, which Lambda sets); and an emulator to have issued them,
    the Auth emulator (FIREBASE_AUTH_EMULATOR_HOST, what Firebase's Admin SDKs require before
    they accept one) or the Firestore emulator whose `mockUserToken` makes them
    (FIRESTORE_EMULATOR_HOST, which the local stack gives its functions). FUNCTION_TARGET is no
    sign of a cloud: functions-framework sets it in every process it runs, the local stack's
    too."""
    if not settings.firebase_emulator_tokens:
        return "FANFUSE_FIREBASE_EMULATOR_TOKENS is off"
    if not (settings.firebase_project or "").startswith("demo-"):
        return "FANFUSE_FIREBASE_PROJECT is not a `demo-` project"
    if settings.cloud_runtime:
        return "this process runs on a cloud runtime (K_SERVICE or AWS_LAMBDA_FUNCTION_NAME)"
    if not (settings.auth_emulator_host or settings.firestore_emulator_host):
        return "no emulator is set (FIREBASE_AUTH_EMULATOR_HOST, FIRESTORE_EMULATOR_HOST)"
    return None


def firebase(settings: Settings) -> Issuer | None:
    project = settings.firebase_project
    if not project:
        return None
    return Issuer(
        kind="Firebase ID token",
        issuers=frozenset({FIREBASE_ISSUER + project}),
        audiences=frozenset({project}),
        certs_url=settings.firebase_certs_url,
        signs_in=True,
        namespace="firebase",
        unsigned=emulator_tokens_problem(settings) is None,
    )


def google(settings: Settings, audiences: frozenset[str], kind: str) -> Issuer:
    return Issuer(kind, GOOGLE_ISSUERS, audiences, settings.google_certs_url)


class Headers(Protocol):
    """A request's headers, looked up by name regardless of case (Flask's and Starlette's)."""

    def get(self, key: str, /) -> str | None: ...


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (scheme case-insensitive)."""
    scheme, _, token = (header or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


# ---------------------------------------------------------------------------------------------
# Decisions (pure)


def text_in(value: object, accepted: frozenset[str]) -> bool:
    """`value` is one of the accepted strings (a claim may be any JSON: a list, an object...)."""
    return isinstance(value, str) and value in accepted


def time_problem(claims: Mapping[str, Any], now: float) -> str | None:
    """Why `jwt.decode` refused a token's times, or None: then its signature failed.

    google-auth checks the signature first, so a token refused with good times was refused
    for its signature; one that fails both is named for its times (refused either way).
    """
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, int | float) or not isinstance(iat, int | float):
        return "it has no numeric iat and exp"
    if exp + CLOCK_SKEW < now:
        return "it has expired"
    if iat - CLOCK_SKEW > now:
        return "it was issued in the future"
    return None


def claim_problem(claims: Mapping[str, Any], issuer: Issuer, now: float) -> str | None:
    """What is wrong with the verified claims of a token meant for `issuer`, or None.

    Audience first: a token minted for another service says so before anything else.
    """
    if not text_in(claims.get("aud"), issuer.audiences):
        return "its audience is not one this deployment accepts"
    if not text_in(claims.get("iss"), issuer.issuers):
        return "its issuer is not the expected one"
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject.strip():
        return "it names no subject (sub)"
    if issuer.signs_in:
        signed_in = claims.get("auth_time")
        if not isinstance(signed_in, int | float) or signed_in - CLOCK_SKEW > now:
            return "its auth_time is missing or in the future"
    return None


def principal_problem(claims: Mapping[str, Any], issuer: Issuer, settings: Settings) -> str | None:
    """Why a verified caller token's principal may not call, or None.

    Google: a `sub` or a verified `email` in `settings.id_token_principals` (none listed: no
    Google ID token is accepted). Firebase: its `firebase.sign_in_provider` among
    `settings.firebase_sign_in_providers` (None: any), and `anonymous` only when
    `settings.firebase_allow_anonymous`.
    """
    if issuer.namespace == "firebase":
        firebase = claims.get("firebase")
        provider = firebase.get("sign_in_provider") if isinstance(firebase, dict) else None
        if not isinstance(provider, str) or not provider:
            return "it names no sign-in provider (firebase.sign_in_provider)"
        if provider == ANONYMOUS and not settings.firebase_allow_anonymous:
            return "anonymous users may not call (FANFUSE_FIREBASE_ALLOW_ANONYMOUS)"
        allowed = settings.firebase_sign_in_providers
        if allowed is not None and provider not in allowed and provider != ANONYMOUS:
            return (
                f"sign-in provider {provider!r} is not accepted "
                "(FANFUSE_FIREBASE_SIGN_IN_PROVIDERS)"
            )
        return None
    principals = frozenset(settings.id_token_principals)
    email = claims.get("email") if claims.get("email_verified") is True else None
    if text_in(claims.get("sub"), principals) or text_in(email, principals):
        return None
    return "its account is not one this deployment accepts (FANFUSE_ID_TOKEN_PRINCIPALS)"


def account_problem(claims: Mapping[str, Any], account: str | None) -> str | None:
    """Why a verified task token may not deliver tasks, or None: it must be the tasks service
    account's, with a verified email (Google sets `email_verified` for service accounts)."""
    if not account:
        return "no tasks service account is configured (FANFUSE_TASKS_SERVICE_ACCOUNT)"
    if claims.get("email") != account or claims.get("email_verified") is not True:
        return "it was not issued to the tasks service account"
    return None


# ---------------------------------------------------------------------------------------------
# Verification


def unverified(token: str, kind: str) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """(header, claims) of a JWT, read without verifying anything, or Unauthorized: whatever
    the string holds (too long, not base64, not JSON, JSON nested 1,500 deep, a JSON list where
    an object belongs), it is a 401 naming no part of it."""
    from google.auth import exceptions, jwt

    malformed = Unauthorized(f"{kind} refused: it is not a well-formed JWT")
    if len(token) > MAX_TOKEN_CHARS or not token.isascii():
        raise malformed
    try:
        header = jwt.decode_header(token)  # type: ignore[no-untyped-call]
        claims = jwt.decode(token, verify=False)  # type: ignore[no-untyped-call]
    except (exceptions.GoogleAuthError, *MALFORMED):
        raise malformed from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise malformed
    return header, claims


def verified(token: str, issuer: Issuer, certs: CertCache) -> dict[str, Any]:
    """The claims of `token` once its signature, times and claims check out for `issuer`."""
    from google.auth import exceptions, jwt

    header, unchecked = unverified(token, issuer.kind)
    refused = f"{issuer.kind} refused"
    if issuer.unsigned and header.get("alg") == EMULATOR_ALGORITHM:
        return emulator_claims(token, unchecked, issuer)
    if header.get("alg") != ALGORITHM:
        raise Unauthorized(f"{refused}: it is not signed with {ALGORITHM}")
    kid = header.get("kid")
    try:
        pem = certs.key(issuer.certs_url, kid) if isinstance(kid, str) and kid else None
    except CertsUnavailable as exc:
        raise Unavailable(f"the {issuer.kind} signing keys are unavailable ({exc})") from None
    if pem is None:
        raise Unauthorized(f"{refused}: it is signed with a key its issuer does not publish")
    now = time.time()
    try:
        decoded = jwt.decode(  # type: ignore[no-untyped-call]
            token, certs={kid: pem}, clock_skew_in_seconds=CLOCK_SKEW
        )
    except (exceptions.GoogleAuthError, *MALFORMED):
        why = time_problem(unchecked, now) or "its signature does not verify"
        raise Unauthorized(f"{refused}: {why}") from None
    if not isinstance(decoded, dict):
        raise Unauthorized(f"{refused}: it is not a well-formed JWT")
    claims = dict(decoded)
    problem = claim_problem(claims, issuer, now)
    if problem:
        raise Unauthorized(f"{refused}: {problem}")
    return claims


def emulator_claims(token: str, claims: Mapping[str, Any], issuer: Issuer) -> dict[str, Any]:
    """The claims of a Firebase emulator's unsigned token (`Issuer.unsigned`): no signature at
    all (an empty third part, as the Auth emulator and `mockUserToken` make them), and every
    claim a signed token must have (times, audience, issuer, subject, `auth_time`)."""
    refused = f"{issuer.kind} refused"
    if token.rpartition(".")[2]:
        raise Unauthorized(f"{refused}: an unsigned token carries no signature")
    now = time.time()
    problem = time_problem(claims, now) or claim_problem(claims, issuer, now)
    if problem:
        raise Unauthorized(f"{refused}: {problem}")
    return dict(claims)


def caller_claims(token: str, settings: Settings, *, certs: CertCache = CERTS) -> dict[str, Any]:
    """The verified claims of a Firebase ID token (`settings.firebase_project`) or a
    Google-signed ID token (`settings.id_token_audiences`); `caller_subject` names the caller.

    The unverified `iss` only picks which issuer's keys and rules apply; the token must then
    verify against those. Raises Unauthorized naming what failed (expired, wrong audience,
    bad signature...), Forbidden for a principal that may not call (`principal_problem`),
    Unavailable when the issuer's keys cannot be fetched.
    """
    issuer = caller_issuer(token, settings)
    claims = verified(token, issuer, certs)
    problem = principal_problem(claims, issuer, settings)
    if problem:
        raise Forbidden(f"{issuer.kind} refused: {problem}")
    return claims


def caller_subject(claims: Mapping[str, Any]) -> str:
    """`firebase:<uid>` or `google:<sub>`: the owner a verified caller token stands for.

    Namespaced by issuer so that no credential of one kind can name the owner of another
    (a Firebase uid, an API key's owner and a Google `sub` may be the same string)."""
    issuer = claims.get("iss")
    firebase_token = isinstance(issuer, str) and issuer.startswith(FIREBASE_ISSUER)
    return f"{'firebase' if firebase_token else 'google'}:{claims['sub']}"


def caller_issuer(token: str, settings: Settings) -> Issuer:
    """Which issuer's keys and rules apply to a caller's token, by its unverified `iss`."""
    _, unchecked = unverified(token, "ID token")
    claimed = unchecked.get("iss")
    if isinstance(claimed, str) and claimed.startswith(FIREBASE_ISSUER):
        issuer = firebase(settings)
        if issuer is None:
            raise Unauthorized(
                "Firebase ID tokens are not accepted here (FANFUSE_FIREBASE_PROJECT is not set)"
            )
    elif text_in(claimed, GOOGLE_ISSUERS):
        audiences = frozenset(settings.id_token_audiences)
        if not audiences:
            raise Unauthorized(
                "Google ID tokens are not accepted here (FANFUSE_ID_TOKEN_AUDIENCES is not set)"
            )
        issuer = google(settings, audiences, "Google ID token")
    else:
        raise Unauthorized("ID token refused: its issuer is neither Firebase nor Google")
    return issuer


def task_claims(
    token: str, audience: str, settings: Settings, *, certs: CertCache = CERTS
) -> dict[str, Any]:
    """The verified claims of a Cloud Tasks OIDC token for `audience` (the target's URL).

    Raises Unauthorized for a token that does not verify, Forbidden for one that verifies but
    was not issued to `settings.tasks_service_account`.
    """
    claims = verified(token, google(settings, frozenset({audience}), "task token"), certs)
    problem = account_problem(claims, settings.tasks_service_account)
    if problem:
        raise Forbidden(f"task token refused: {problem}")
    return claims
