"""The boundary figures of issue 29 (items 3 to 8's first half, and the fuzz's `/stats` finding):
what each probe gets, printed one line each.

Run from the repository root with the venv active: `python scripts/figures/boundaries.py`. For
another commit's code (the "before"): `git archive COMMIT shared | tar -x -C /tmp/before &&
PYTHONPATH=/tmp/before/shared python scripts/figures/boundaries.py` (it uses only what both
have). Item 2's figures: scripts/figures/event_streams.py. Everything stays on 127.0.0.1: the
guard is asked for its decision, never sent anywhere; tokens are checked against an issuer
double that publishes no key.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

import httpx

from fanfuse.auth import callers, keys, tokens
from fanfuse.auth.certs import CertCache
from fanfuse.net.guard import address_problem
from fanfuse.net.policy import FetchPolicy
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.wire.errors import FanfuseError
from fanfuse.wire.models import ApiKey, utcnow

TRACE = {"X-Cloud-Trace-Context": f"{'a' * 32}/{'9' * 4_400};o=1"}


def serve_figures() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
        env |= {"FANFUSE_DB_PATH": f"{tmp}/db", "FANFUSE_CACHE_DIR": f"{tmp}/cache"}
        with ServeProcess("--warm", "none", env=env, log_dir=Path(tmp)) as server:
            traced = httpx.get(f"{server.url}/openapi.json", headers=TRACE, timeout=30)
            kind = traced.headers.get("content-type", "").split(";")[0]
            print(f"item 3  /openapi.json, a 4,400-digit trace span: {traced.status_code} {kind}")
            store = SqliteStore(env["FANFUSE_DB_PATH"])
            plaintext, record = keys.new_key("local", "made later", None, None, utcnow())
            store.put_key(record)
            store.close()
            other = {keys.API_KEY_HEADER: plaintext}
            metrics = httpx.get(f"{server.url}/metrics", headers=other, timeout=30)
            print(f"item 4  /metrics with a key made for owner local: {metrics.status_code}")
            printed = {keys.API_KEY_HEADER: server.api_key}
            stats = httpx.get(
                f"{server.url}/stats", params={"owner": "k" * 201}, headers=printed, timeout=30
            )
            print(f"fuzz    GET /stats?owner=<201 characters> as the operator: {stats.status_code}")


def guard_figures() -> None:
    closed = FetchPolicy()
    for ip in ("ff02::1", "ff05::2", "ff0e::1", "224.0.0.1", "239.255.255.250", "fec0::1"):
        print(f"item 5  {ip}: {address_problem(ip, closed) or 'fetched'}")


def unsigned_token(project: str) -> str:
    now = int(time.time())
    claims = {
        "iss": f"https://securetoken.google.com/{project}",
        "aud": project,
        "iat": now,
        "exp": now + 3600,
        "auth_time": now,
        "sub": "anyone",
        "firebase": {"sign_in_provider": "custom"},
    }
    parts = [{"alg": "none", "typ": "JWT"}, claims]
    encoded = [base64.urlsafe_b64encode(json.dumps(p).encode()).rstrip(b"=") for p in parts]
    return b".".join(encoded).decode() + "."


def token_figure() -> None:
    os.environ["K_SERVICE"] = "start-search"
    try:
        deployed = Settings(firebase_project="demo-prod", firebase_emulator_tokens=True)
        no_keys = CertCache(fetch=lambda url: ({}, "max-age=3600"))
        try:
            claims = tokens.caller_claims(unsigned_token("demo-prod"), deployed, certs=no_keys)
            outcome = f"accepted as {tokens.caller_subject(claims)}"
        except FanfuseError as exc:
            outcome = f"refused ({exc.status_code})"
    finally:
        del os.environ["K_SERVICE"]
    print(f"item 6  an unsigned token, demo-prod, emulator tokens on, K_SERVICE set: {outcome}")


def iam_figure() -> None:
    role = "arn:aws:sts::123456789012:assumed-role/app"
    one = callers.iam_caller({"userArn": f"{role}/worker-1"}).subject
    two = callers.iam_caller({"userArn": f"{role}/worker-2"}).subject
    same = "one owner" if one == two else "two owners"
    print(f"item 7  two sessions of one role: {same} ({one}, {two})")


class CountingStore(SqliteStore):
    reads = 0

    def get_key(self, key_id: str) -> ApiKey | None:
        self.reads += 1
        return super().get_key(key_id)


def key_figure() -> None:
    store = CountingStore(":memory:")
    auth = callers.Authenticator(Settings(), store)
    forged, _ = keys.new_key("nobody", "", None, None, utcnow())
    for _ in range(100):
        with contextlib.suppress(FanfuseError):
            auth.caller({keys.API_KEY_HEADER: forged})
    print(f"item 8  100 requests with one unknown key id: {store.reads} store reads")


if __name__ == "__main__":
    serve_figures()
    guard_figures()
    token_figure()
    iam_figure()
    key_figure()
