"""How a client of the HTTP API proves who it is: one `httpx.Auth` per way the API admits callers.

The server side (`auth.callers`) reads one credential per request; this is the other end, used by
`HttpSearchClient` and so by `fanfuse search --endpoint`, `fanfuse mcp --endpoint` and the Python
API. A deployment is called in one of these ways (docs/security.md, "Calling a deployment"):

- `api-key`: `X-Api-Key: ff_...` (`fanfuse keys create`), on every store the runtime uses;
- `google-id-token`: `Authorization: Bearer <Google-signed ID token>` minted by google-auth for
  the audience (a service-account key file, else Application Default Credentials: the
  GOOGLE_APPLICATION_CREDENTIALS file or the metadata server), refreshed before it expires: what
  Cloud Run's IAM checks, and what the function accepts when the audience is in its
  FANFUSE_ID_TOKEN_AUDIENCES;
- `firebase`: `Authorization: Bearer <Firebase ID token>` that the caller got from Firebase
  Authentication (FANFUSE_ID_TOKEN, or a file re-read on every request, so whatever refreshes
  the user's session can rewrite it);
- `sigv4`: the request signed with AWS Signature Version 4 (botocore's `SigV4Auth`, service
  `execute-api`), credentials from boto3's default chain: what an IAM-authorized API Gateway
  checks.

An API key, when one is given, is sent along with a token or a signature (before signing, so the
signature covers it): behind IAM (Cloud Run, API Gateway) the platform checks the token or the
signature, and the function takes the key as the caller (it reads a key first).

`ClientAuth` holds the choice; the CLI builds it once from its options and the environment and
passes it down, and `ClientAuth.build(endpoint)` makes the `httpx.Auth`. Secrets stay out of
every `repr` and message.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Generator, Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr

from fanfuse.auth.keys import API_KEY_HEADER
from fanfuse.wire.errors import Unauthorized, Unreachable

if TYPE_CHECKING:
    from botocore.credentials import Credentials as AwsCredentials
    from google.auth.credentials import Credentials as GoogleCredentials

AUTHORIZATION = "Authorization"
SIGV4_SERVICE = "execute-api"
"""The service API Gateway's IAM authorization signs for."""
SIGNED_HEADERS = frozenset({"host", "content-type", API_KEY_HEADER.lower()})
"""What a signature covers besides botocore's own `x-amz-*`: the headers a proxy keeps as they
are. `accept-encoding`, `connection` or `user-agent` may be rewritten on the way, which would
break a signature over them (botocore leaves `user-agent` out for the same reason)."""
TOKEN_TIMEOUT_S = 10.0
"""Bound on one call to a token endpoint (google-auth's own default is 120 s)."""


class AuthMode(StrEnum):
    API_KEY = "api-key"
    GOOGLE_ID_TOKEN = "google-id-token"
    FIREBASE = "firebase"
    SIGV4 = "sigv4"


class ClientAuthError(Unauthorized):
    """The client cannot make the credential it was asked for (no key, no token, no AWS
    credentials...): said before anything is sent."""


# ---------------------------------------------------------------------------------------------
# Decisions (pure)


def aws_region_of(url: str) -> str | None:
    """The region in an API Gateway host (`{id}.execute-api.{region}.amazonaws.com`), or None."""
    parts = (urlsplit(url).hostname or "").split(".")
    if len(parts) >= 5 and parts[1] == SIGV4_SERVICE and parts[-2:] == ["amazonaws", "com"]:
        return parts[2]
    return None


def google_audience(url: str) -> str:
    """The audience of a Google ID token for `url` when none is configured: the receiving
    service's URL, as Cloud Run's IAM checks it. A Cloud Run host (`*.run.app`) is a service;
    on `*.cloudfunctions.net` each function is its first path segment."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    host = parts.hostname or ""
    if host.endswith(".cloudfunctions.net"):
        first = parts.path.strip("/").split("/", 1)[0]
        return f"{origin}/{first}" if first else origin
    return origin


def infer_mode(auth: ClientAuth, endpoint: str) -> AuthMode | None:
    """The mode when none is named: a Firebase token given, an API Gateway endpoint (sigv4), an
    audience or a Google key file, an API key; else None (no credential: the server's 401 says
    how to authenticate)."""
    if auth.id_token is not None or auth.id_token_file is not None:
        return AuthMode.FIREBASE
    if aws_region_of(endpoint) is not None:
        return AuthMode.SIGV4
    if auth.audience or auth.google_credentials is not None:
        return AuthMode.GOOGLE_ID_TOKEN
    return AuthMode.API_KEY if auth.api_key is not None else None


def signed_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers of a request that its SigV4 signature covers (see SIGNED_HEADERS)."""
    return {k.lower(): v for k, v in headers.items() if k.lower() in SIGNED_HEADERS}


# ---------------------------------------------------------------------------------------------
# The settings


class ClientAuth(BaseModel):
    """How a client authenticates; built once where the program starts (the CLI's options and
    environment) and passed down. `mode` None: inferred (`infer_mode`)."""

    model_config = ConfigDict(frozen=True)

    mode: AuthMode | None = None
    api_key: SecretStr | None = None
    audience: str | None = None
    """Google ID tokens: the `aud` to mint for; None: the receiving service's URL per request."""
    google_credentials: Path | None = None
    """A service-account key file; None: Application Default Credentials."""
    id_token: SecretStr | None = None
    """A Firebase ID token as given (FANFUSE_ID_TOKEN)."""
    id_token_file: Path | None = None
    """A file holding the Firebase ID token, read on every request."""
    aws_region: str | None = None
    """SigV4: None: the endpoint's region, else boto3's (AWS_REGION, the profile)."""
    aws_service: str = SIGV4_SERVICE

    def resolved(self, endpoint: str) -> AuthMode | None:
        return self.mode if self.mode is not None else infer_mode(self, endpoint)

    def build(self, endpoint: str) -> httpx.Auth | None:
        """The `httpx.Auth` for calls to `endpoint` (and the URLs it hands out), or None to send
        no credential. Raises ClientAuthError when the mode lacks what it needs."""
        mode = self.resolved(endpoint)
        key = ApiKeyAuth(self.api_key.get_secret_value()) if self.api_key else None
        if mode is None:
            return None
        if mode is AuthMode.API_KEY:
            if key is None:
                raise ClientAuthError("--auth api-key: give --api-key or FANFUSE_API_KEY")
            return key
        other: httpx.Auth
        if mode is AuthMode.FIREBASE:
            if self.id_token is None and self.id_token_file is None:
                raise ClientAuthError(
                    "--auth firebase: give the ID token in FANFUSE_ID_TOKEN or --id-token-file"
                )
            other = BearerToken(self.id_token, self.id_token_file)
        elif mode is AuthMode.GOOGLE_ID_TOKEN:
            other = GoogleIdToken(self.audience, self.google_credentials)
        else:
            region = self.aws_region or aws_region_of(endpoint) or default_aws_region()
            if not region:
                raise ClientAuthError("--auth sigv4: give --aws-region or set AWS_REGION")
            other = SigV4(region, self.aws_service)
        return other if key is None else Chain(key, other)


def default_aws_region() -> str | None:
    """boto3's region (AWS_REGION, AWS_DEFAULT_REGION, the profile's), or None."""
    try:
        import botocore.session
    except ImportError:
        return None
    region: str | None = botocore.session.get_session().get_config_variable("region")
    return region


# ---------------------------------------------------------------------------------------------
# The auth flows


class ApiKeyAuth(httpx.Auth):
    """`X-Api-Key: <key>` on every request."""

    def __init__(self, key: str) -> None:
        self._key = key

    def __repr__(self) -> str:
        return "ApiKeyAuth(<hidden>)"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers[API_KEY_HEADER] = self._key
        yield request


class BearerToken(httpx.Auth):
    """`Authorization: Bearer <token>`: the token given, or the one in `path` when it is read
    (a Firebase token lives an hour; what refreshes it rewrites the file)."""

    def __init__(self, token: SecretStr | None, path: Path | None) -> None:
        self._token = token
        self._path = path

    def __repr__(self) -> str:
        return f"BearerToken(path={self._path})"

    def token(self) -> str:
        if self._path is not None:
            try:
                text = self._path.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise ClientAuthError(
                    f"cannot read the ID token file {self._path}: {exc}"
                ) from None
            if not text:
                raise ClientAuthError(f"the ID token file {self._path} is empty")
            return text
        assert self._token is not None  # ClientAuth.build checked that one is given
        return self._token.get_secret_value().strip()

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers[AUTHORIZATION] = f"Bearer {self.token()}"
        yield request


class Chain(httpx.Auth):
    """Header credentials applied in order (a key first, so a signature after it covers it)."""

    def __init__(self, *parts: httpx.Auth) -> None:
        self.parts = parts
        self.requires_request_body = any(p.requires_request_body for p in parts)

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        for part in self.parts:
            request = next(part.sync_auth_flow(request))
        yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        for part in self.parts:
            request = await anext(part.async_auth_flow(request))
        yield request


class _Blocking(httpx.Auth, ABC):
    """A flow whose credential may need I/O (a token endpoint, the AWS credential chain): run
    in a worker thread under async clients, so the event loop never waits on it."""

    @abstractmethod
    def apply(self, request: httpx.Request) -> None:
        """Put the credential on `request` (blocking I/O allowed: see the class)."""

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        if self.requires_request_body:
            request.read()
        self.apply(request)
        yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        import anyio.to_thread

        if self.requires_request_body:
            await request.aread()
        await anyio.to_thread.run_sync(self.apply, request)
        yield request


class GoogleIdToken(_Blocking):
    """`Authorization: Bearer <Google-signed ID token>` for the audience, minted by google-auth.

    One credential per audience, kept for the process: its token is reused while google-auth
    says it is fresh and refreshed once it is within google-auth's refresh threshold of its
    expiry (3 min 45 s), so no request carries a token about to expire. A service-account key
    file mints with `service_account.IDTokenCredentials` (a JWT signed with the key, exchanged
    at the key's `token_uri`); without one, `id_token.fetch_id_token_credentials` finds
    Application Default Credentials.
    """

    def __init__(self, audience: str | None, key_file: Path | None) -> None:
        self.audience = audience
        self.key_file = key_file
        self._credentials: dict[str, GoogleCredentials] = {}
        self._lock = threading.Lock()
        self.minted = 0
        """How many tokens this flow fetched (a refresh is one)."""

    def apply(self, request: httpx.Request) -> None:
        request.headers[AUTHORIZATION] = f"Bearer {self.token(str(request.url))}"

    def token(self, url: str) -> str:
        try:
            from google.auth import exceptions
            from google.auth.credentials import TokenState
        except ImportError:
            problem = "--auth google-id-token needs google-auth: pip install 'fanfuse[cloud]'"
            raise ClientAuthError(problem) from None

        audience = self.audience or google_audience(url)
        with self._lock, httpx.Client(timeout=TOKEN_TIMEOUT_S) as http:
            transport = HttpxTransport(http)
            try:
                credentials = self._credentials.get(audience)
                if credentials is None:
                    credentials = self._credentials[audience] = self._make(audience, transport)
                if credentials.token_state is not TokenState.FRESH:
                    credentials.refresh(transport)  # type: ignore[no-untyped-call]
                    self.minted += 1
            except exceptions.TransportError as exc:
                raise Unreachable(f"cannot get a Google ID token: {exc}") from None
            except exceptions.GoogleAuthError as exc:
                raise ClientAuthError(f"cannot get a Google ID token: {exc}") from None
            token = credentials.token
            if not isinstance(token, str) or not token:
                raise ClientAuthError("google-auth returned no ID token")
            return token

    def _make(self, audience: str, transport: HttpxTransport) -> GoogleCredentials:
        from google.oauth2 import id_token, service_account

        if self.key_file is None:
            found: GoogleCredentials = id_token.fetch_id_token_credentials(  # type: ignore[no-untyped-call]
                audience, request=transport
            )
            return found
        try:
            info = json.loads(self.key_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ClientAuthError(f"cannot read the key file {self.key_file}: {exc}") from None
        if not isinstance(info, dict) or info.get("type") != "service_account":
            raise ClientAuthError(
                f"{self.key_file} is not a service-account key file (type service_account); "
                "for other credentials use Application Default Credentials"
            )
        made: GoogleCredentials = service_account.IDTokenCredentials.from_service_account_info(  # type: ignore[no-untyped-call]
            info, target_audience=audience
        )
        return made


class HttpxTransport:
    """google-auth's transport (`google.auth.transport.Request`) over httpx, so minting a token
    needs no `requests`: one bounded call, no redirects (a token endpoint answers or not)."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _TransportResponse:
        from google.auth import exceptions

        try:
            answer = self.http.request(
                method, url, content=body, headers=headers, timeout=timeout or TOKEN_TIMEOUT_S
            )
        except httpx.HTTPError as exc:
            problem = f"{url}: {type(exc).__name__}"
            raise exceptions.TransportError(problem) from None  # type: ignore[no-untyped-call]
        return _TransportResponse(answer)


class _TransportResponse:
    """google-auth's `transport.Response` over an httpx answer."""

    def __init__(self, answer: httpx.Response) -> None:
        self.status = answer.status_code
        self.headers = dict(answer.headers)
        self.data = answer.content


class SigV4(_Blocking):
    """The request signed with AWS Signature Version 4 (botocore's `SigV4Auth`): `Authorization:
    AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...`, `X-Amz-Date` and, for
    temporary credentials, `X-Amz-Security-Token`. The signature covers the method, path, query,
    the SIGNED_HEADERS present and the body's SHA-256. Credentials come from boto3's default
    chain (environment, profile, SSO, container or instance role), refreshed by botocore."""

    requires_request_body = True

    def __init__(
        self, region: str, service: str = SIGV4_SERVICE, credentials: AwsCredentials | None = None
    ) -> None:
        self.region = region
        self.service = service
        self._credentials = credentials

    def credentials(self) -> AwsCredentials:
        if self._credentials is None:
            try:
                import botocore.session
            except ImportError:
                problem = "--auth sigv4 needs botocore: pip install 'fanfuse[aws]'"
                raise ClientAuthError(problem) from None
            found = botocore.session.get_session().get_credentials()
            if found is None:
                raise ClientAuthError(
                    "--auth sigv4: no AWS credentials (environment, profile, SSO or role)"
                )
            self._credentials = found
        return self._credentials

    def apply(self, request: httpx.Request) -> None:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        headers = signed_headers(request.headers)
        headers["host"] = request.url.netloc.decode("ascii")
        signing = AWSRequest(
            method=request.method, url=str(request.url), data=request.content, headers=headers
        )
        frozen = self.credentials().get_frozen_credentials()
        SigV4Auth(frozen, self.service, self.region).add_auth(signing)
        for name, value in signing.headers.items():
            request.headers[name] = value
