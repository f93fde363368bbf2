"""The command's credentials for `--endpoint` (env: `FANFUSE_<FIELD>`): `Settings.client`.

`fanfuse search` and `fanfuse mcp --endpoint` call a deployment; what they send is given by
their options or, for any option left out, by these variables (a command line is seen by every
user of the machine in `ps`, the environment is not: a token is read from it alone). The CLI's
`client_auth` (cli/keys.py) builds the outbound `ClientAuth` from both.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import ConfigDict, Field, SecretStr

from fanfuse.settings.sources import Section

AuthName = Literal["api-key", "google-id-token", "firebase", "sigv4"]
"""`fanfuse.auth.outbound.AuthMode`'s values, spelled here: `--help` need not import httpx."""


class ClientSettings(Section):
    """`Settings.client`: what the command sends to `--endpoint` when its options say nothing."""

    model_config = ConfigDict(extra="ignore")
    env_prefix: ClassVar[str] = "FANFUSE_"

    api_key: SecretStr | None = Field(
        default=None, description="`--api-key`: the API key sent as X-Api-Key to --endpoint"
    )
    auth: AuthName | None = Field(
        default=None, description="`--auth`: how to authenticate to --endpoint"
    )
    audience: str | None = Field(
        default=None, description="`--audience`: google-id-token's audience"
    )
    id_token: SecretStr | None = Field(
        default=None,
        description="firebase: the Firebase ID token itself (from the environment only, never "
        "a command line)",
    )
    id_token_file: Path | None = Field(
        default=None,
        description="`--id-token-file`: firebase: a file holding the Firebase ID token, read on "
        "every call",
    )
