"""ID tokens verified with google-auth: signature, issuer, audience, expiry.

INTERFACE ONLY (to be implemented): the two functions below are what `auth.callers` and
`auth.tasks` call.
"""

from __future__ import annotations

from typing import Any

from fanfuse.settings import Settings


def caller_claims(token: str, settings: Settings) -> dict[str, Any]:
    """The verified claims of a Firebase ID token (`settings.firebase_project`) or a
    Google-signed ID token (`settings.id_token_audiences`); `sub` is the caller.

    Raises Unauthorized naming what failed (expired, wrong audience, bad signature...).
    """
    raise NotImplementedError


def task_claims(token: str, audience: str, settings: Settings) -> dict[str, Any]:
    """The verified claims of a Cloud Tasks OIDC token for `audience` (the target's URL).

    Raises Unauthorized for a token that does not verify, Forbidden for one that verifies but
    was not issued to `settings.tasks_service_account`.
    """
    raise NotImplementedError
