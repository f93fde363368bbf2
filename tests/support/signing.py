"""Test issuers: RSA keys that sign ID tokens, and their key sets served on 127.0.0.1.

`make_key` makes an RSA key with a self-signed certificate, as Google's and Firebase's
certificate endpoints publish them; `KeySet` serves `{kid: certificate PEM}` (or a JWK set) from
a pytest-httpserver, so settings' `google_certs_url` / `firebase_certs_url` can point at it and
google-auth verifies the tokens exactly as it would Google's.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from google.auth import crypt, jwt
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

PROJECT = "demo-fanfuse"
FIREBASE_ISSUER = f"https://securetoken.google.com/{PROJECT}"
GOOGLE_ISSUER = "https://accounts.google.com"


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private: rsa.RSAPrivateKey
    cert_pem: str

    def sign(self, claims: dict[str, Any], kid: str | None = None) -> str:
        """A compact RS256 JWT of `claims` (google-auth's encoder), `kid` in its header."""
        # google-auth's RSASigner and jwt.encode are unannotated
        signer = crypt.RSASigner(self.private, key_id=kid or self.kid)  # type: ignore[no-untyped-call]
        token: bytes = jwt.encode(signer, claims)  # type: ignore[no-untyped-call]
        return token.decode()

    def jwk(self) -> dict[str, str]:
        numbers = self.private.public_key().public_numbers()
        return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                "n": b64int(numbers.n), "e": b64int(numbers.e)}  # fmt: skip


def b64int(value: int) -> str:
    raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def make_key(kid: str) -> SigningKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"test issuer {kid}")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=2))
        .sign(private, hashes.SHA256())
    )
    return SigningKey(kid, private, cert.public_bytes(serialization.Encoding.PEM).decode())


def unsigned(claims: dict[str, Any], kid: str) -> str:
    """`alg: none`: a JWT with no signature at all."""
    header = {"alg": "none", "typ": "JWT", "kid": kid}

    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part(header)}.{part(claims)}."


def claims(iss: object, aud: object, **extra: Any) -> dict[str, Any]:
    """Claims valid now for an hour, with a subject; `extra` adds or overrides."""
    now = int(time.time())
    return {"iss": iss, "aud": aud, "sub": "user-1", "iat": now, "exp": now + 3600, **extra}


def firebase_claims(**extra: Any) -> dict[str, Any]:
    """A Firebase ID token's claims for PROJECT, signed in a minute ago with a password;
    `extra` overrides."""
    base = claims(
        FIREBASE_ISSUER,
        PROJECT,
        auth_time=int(time.time()) - 60,
        firebase={"sign_in_provider": "password", "identities": {}},
    )
    return {**base, **extra}


def user_claims(sub: str) -> dict[str, Any]:
    """A Firebase ID token's claims for a user who signed in with email and password (not an
    anonymous one), as an app's signed-in user sends them."""
    provider = {"sign_in_provider": "password", "identities": {"email": [f"{sub}@example.com"]}}
    return firebase_claims(
        sub=sub, email=f"{sub}@example.com", email_verified=True, firebase=provider
    )


class KeySet:
    """One issuer's published keys on the test server, at `path`; `hits` counts fetches.

    `publish` replaces what is served (as a key rotation would), without touching the other
    handlers of the server.
    """

    def __init__(self, server: HTTPServer, path: str) -> None:
        self.server = server
        self.path = path
        self.url = server.url_for(path)
        self.document: dict[str, Any] = {}
        self.headers: dict[str, str] = {}
        self.hits = 0
        self.failing: int | None = None
        """An HTTP status to answer instead of the set (the issuer's endpoint is down)."""
        self._lock = threading.Lock()
        server.expect_request(path).respond_with_handler(self._answer)

    def publish(self, *keys: SigningKey, jwk: bool = False, max_age: int | None = 19204) -> None:
        self.document = (
            {"keys": [k.jwk() for k in keys]} if jwk else {k.kid: k.cert_pem for k in keys}
        )
        self.headers = (
            {"Cache-Control": f"public, max-age={max_age}"} if max_age is not None else {}
        )

    def _answer(self, request: Request) -> Response:
        with self._lock:
            self.hits += 1
        if self.failing is not None:
            return Response("unavailable", status=self.failing)
        return Response(
            json.dumps(self.document), headers=self.headers, mimetype="application/json"
        )


def task_signature(
    target: str,
    body: bytes,
    secret: str,
    *,
    not_before: float | None = None,
    lifetime: float = 1800,
) -> str:
    """`X-Fanfuse-Signature` for `body` delivered to `target`, valid from `not_before` (None:
    now) for `lifetime` seconds, as the queues sign it (`fanfuse.auth.task_deliveries.sign`)."""
    from fanfuse.auth.task_deliveries import sign

    start = int(time.time() if not_before is None else not_before)
    return sign(target, body, secret, not_before=start, expires=start + int(lifetime))
