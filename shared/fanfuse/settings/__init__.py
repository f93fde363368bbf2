"""The one settings tree: every setting of a deployment, read once per composition root.

`Settings` is the root: its own fields (`FANFUSE_<FIELD>`), its sections (the content stages'
`FANFUSE_CONTENT_*`, the LLM reranker's `FANFUSE_RERANK_LLM_*`, the command's credentials
for `--endpoint`) and, on demand, each platform's
(`FANFUSE_<ENGINE>_*`, `Settings.platform`), all read from the same sources: values given in
code, the environment, then the dotenv file `FANFUSE_ENV_FILE` names (sources.py). A composition
root (a function's or a Lambda's entry point, `fanfuse serve`, `fanfuse mcp`, each command) takes
`get_settings()`, built once and cached as FastAPI's settings guide does, and passes it down;
nothing below the roots builds settings (tests/unit/test_settings_roots.py), and nothing outside
this package reads the environment (tests/unit/test_layers.py). `fanfuse config` prints the tree
with where each value came from. docs/configuration.md is generated from it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from fanfuse.settings.client import ClientSettings
from fanfuse.settings.content import ContentSettings
from fanfuse.settings.rerank import LlmRerankSettings
from fanfuse.settings.sources import SectionsSource, default_cache_dir, section_values, variable
from fanfuse.wire.cost import Price
from fanfuse.wire.instances import ExtraPlatform

M = TypeVar("M", bound=BaseModel)
ENV_FILE_VARIABLE = "FANFUSE_ENV_FILE"
"""Names the dotenv file the tree reads under the environment (the field `env_file` shows it)."""


class ChainSetting(BaseModel):
    """A platform's fallback chain in this deployment (`Settings.chains`): the platforms asked in
    its place, in order, when it cannot answer, and when to ask the next one while it has not
    answered yet (wire/selection.py, rules/chain.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fallbacks: list[str] = Field(min_length=1)
    hedge_after_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] | Literal["p90", "off"] = (
        Field(
            default="p90",
            description='seconds; "p90": the asked member\'s recent p90 latency; "off": ask '
            "the next member only when one fails",
        )
    )

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, value: Any) -> Any:
        """`["brave", "tavily"]` and `"brave|tavily"` for `{"fallbacks": [...]}`."""
        if isinstance(value, str):
            value = value.split("|")
        if isinstance(value, list):
            return {"fallbacks": value}
        return value

    @field_validator("fallbacks")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        return [name.strip().lower() for name in value if name.strip()]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FANFUSE_", extra="ignore", populate_by_name=True)
    """`populate_by_name`: a field with env aliases is still set by its name in code
    (`Settings(store_write_log=...)`), not silently ignored."""

    env_file: Path | None = Field(
        default=None,
        description="a dotenv file of FANFUSE_* variables, read under the environment (a "
        "variable set in both: the environment's); `fanfuse config` says which one set what",
    )
    content: ContentSettings = Field(default_factory=ContentSettings)
    """The content stages' section (`FANFUSE_CONTENT_*`)."""
    rerank_llm: LlmRerankSettings = Field(default_factory=LlmRerankSettings)
    """The LLM reranker's section (`FANFUSE_RERANK_LLM_*`)."""
    client: ClientSettings = Field(default_factory=ClientSettings)
    """The command's credentials for --endpoint (`FANFUSE_API_KEY`, `FANFUSE_AUTH`, ...)."""
    # Where and how long tasks live.
    project: str = Field(
        default="demo-fanfuse",
        validation_alias=AliasChoices("FANFUSE_PROJECT", "GOOGLE_CLOUD_PROJECT"),
    )
    """the Google Cloud project (Firestore, Cloud Tasks, ID tokens' audiences)."""
    region: str = "us-central1"
    """the region of the functions and their queues."""
    cache_dir: Path = Field(
        default_factory=default_cache_dir,
        description="root of the on-disk caches (the docs and vectors indexes, published "
        "corpora's downloads, `fanfuse index`'s corpora): a deployment sets it under /tmp, the "
        "only writable place on Lambda",
    )
    db_path: Path = Field(default_factory=lambda: default_cache_dir() / "fanfuse.db")
    """the embedded runtime's SQLite store (searches, health, keys, quotas)."""
    ttl_minutes: float = Field(default=30.0, gt=0)
    """a search expires (and is deleted) this long after its start."""
    deadline_seconds: float = Field(default=120.0, gt=0)
    """a search is finalized by then at the latest: late platforms become `timed_out`."""
    cache_ttl_seconds: float = Field(
        default=600.0,
        ge=0,
        description="how long a search answer is reused (0: no cache); per platform: "
        "FANFUSE_<PLATFORM>_CACHE_TTL",
    )
    start_min_budget_fraction: float = Field(
        default=0.5,
        ge=0,
        lt=1,
        description="a start whose writes left less than this part of the search's time budget "
        "is refused (503, Retry-After) and withdrawn: the deadline runs from reception, and a "
        "search that lost half its time to a slow store mostly times out",
    )
    lease_seconds: float = Field(
        default=30.0,
        ge=1,
        description="how long a platform run's claim holds without renewal (its worker renews "
        "it every third of that): a dead worker's run is taken over after at most this long",
    )
    progress_interval: float = Field(
        default=1.0, ge=0, description="minimum seconds between progress writes per platform"
    )
    # Cloud path: queues, function URLs, emulators, identities.
    cloud: Literal["gcp", "aws"] = Field(
        default="gcp",
        description="the ports the cloud handlers run on: Firestore + Cloud Tasks (gcp), or "
        "DynamoDB + SQS (aws: the Lambda handlers, docs/aws.md)",
    )
    queue_prefix: str = "fanfuse"
    """the queues are `{prefix}-{platform}` and `{prefix}-aggregate`."""
    tasks_emulator_host: str | None = None
    """the Cloud Tasks emulator's `host:port` (insecure gRPC); unset: Cloud Tasks itself."""
    function_urls: dict[str, str] = Field(default_factory=dict)
    """function target -> URL (`run_platform`, `aggregate`, `search_status`, `cancel_search`: where
    tasks are delivered and the links a search is given)."""
    status_url_base: str | None = None
    """base of the `status_url` start_search returns (an API Gateway URL, say); unset: the
    search_status function's URL."""
    tasks_service_account: str | None = None
    """the service account whose OIDC token Cloud Tasks sends to the task targets, which accept no
    other (docs/security.md)."""
    collection: str = "searches"
    """the store's collection (Firestore) or key prefix of the task documents."""
    store_write_log: Path | None = Field(
        default=None,
        description="append one JSON line per document write of a cloud store, Firestore or "
        "DynamoDB (tests' write counts)",
        # Named `firestore_write_log` (FANFUSE_FIRESTORE_WRITE_LOG) while Firestore was the only
        # cloud store; the old name still works, so a deployment that sets it keeps its log.
        validation_alias=AliasChoices("FANFUSE_STORE_WRITE_LOG", "FANFUSE_FIRESTORE_WRITE_LOG"),
    )
    # AWS path (docs/aws.md): DynamoDB and SQS; the endpoint is moto's server in dev and tests.
    aws_region: str = "us-east-1"
    """the AWS region of the table and the queues."""
    aws_endpoint_url: str | None = Field(
        default=None, description="e.g. moto's http://127.0.0.1:PORT; None: AWS itself"
    )
    dynamodb_table: str = "fanfuse"
    """the DynamoDB table of the AWS deployment."""
    extra_platforms: dict[str, ExtraPlatform] = Field(default_factory=dict)
    """named instances of a built-in engine with their own settings, e.g. `{"team": {"engine":
    "searxng", "settings": {"base_url": "http://searx.internal"}}}` (the local corpora `fanfuse
    index` registers come on top)."""
    chains: dict[str, ChainSetting] = Field(
        default_factory=lambda: {"builtin": ChainSetting(fallbacks=["perplexity"])},
        description='per platform, its fallback chain here (`{"google": ["brave"]}`, or '
        '`{"google": {"fallbacks": ["brave"], "hedge_after_s": 0.5}}`): the platform, '
        "selected by name or by `all`, is answered by the next member when it cannot answer "
        "(docs/reference.md, Fallback chains); replaces the default, builtin -> perplexity",
    )
    deployed_platforms: list[str] | None = Field(
        default=None,
        description="set where platforms run elsewhere (start_search holds no provider keys): "
        "these are the available ones",
    )
    # Identity (fanfuse.auth): who may call the public endpoints and the task targets.
    auth_required: bool = Field(
        default=True,
        description="the public endpoints refuse a caller with no valid credential (401); "
        "off only for a deployment that sits behind something that authenticates for it",
    )
    trust_gateway: bool = Field(
        default=False,
        description="read API Gateway's X-Apigateway-Api-Userinfo header (only true when the "
        "functions are reachable solely through the gateway)",
    )
    trust_iam_authorizer: bool = Field(
        default=False,
        description="the Lambda front takes the IAM principal API Gateway verified (the "
        "event's requestContext.authorizer.iam) as the caller `aws:<userArn>` (only true when "
        'every route is AWS_IAM-authorized: infra/aws api_access = "iam")',
    )
    iam_session_owners: bool = Field(
        default=False,
        description="with trust_iam_authorizer: each STS session (an assumed role's "
        "RoleSessionName, a federated user's name) is an owner of its own; by default the role "
        "(or the account's federation) is, since whoever may assume the role names the session. "
        "A convenience that separates one tenant's workers, never a security boundary",
    )
    id_token_audiences: list[str] = Field(
        default_factory=list,
        description="`aud` values accepted in Google-signed ID tokens (none: not accepted)",
    )
    firebase_project: str | None = Field(
        default=None,
        description="accept Firebase ID tokens of this project (aud and issuer); None: refuse",
    )
    id_token_principals: list[str] = Field(
        default_factory=list,
        description="Google ID tokens: the accounts that may call, by verified `email` (a "
        "service account's address) or `sub`; none: no Google ID token is accepted, whatever "
        "its audience (anyone can mint one naming any audience)",
    )
    firebase_sign_in_providers: list[str] | None = Field(
        default=None,
        description="Firebase ID tokens: the sign-in providers accepted (`password`, "
        "`google.com`, ...); None: any. `anonymous` is decided by firebase_allow_anonymous alone",
    )
    firebase_allow_anonymous: bool = Field(
        default=False,
        description="accept Firebase users signed in anonymously (each is a caller of its own)",
    )
    firebase_emulator_tokens: bool = Field(
        default=False,
        description="also accept the unsigned (alg none) Firebase ID tokens the Firebase "
        "emulators issue (the Auth emulator's, the Firestore emulator's mockUserToken), as "
        "Firebase's Admin SDKs do next to the Auth emulator; only for a `demo-` "
        "firebase_project, the emulators' offline projects: `fanfuse dev` and tests, never a "
        "deployment",
    )
    cloud_runtime: str | None = Field(
        default=None,
        validation_alias=AliasChoices("K_SERVICE", "AWS_LAMBDA_FUNCTION_NAME"),
        description="read, never set: the service or function name a cloud runtime gives this "
        "process (Cloud Run and Cloud Functions set K_SERVICE, Lambda AWS_LAMBDA_FUNCTION_NAME); "
        "where it is set, no emulator's unsigned token is accepted (auth/tokens.py)",
    )
    auth_emulator_host: str | None = Field(
        default=None,
        validation_alias=AliasChoices("FIREBASE_AUTH_EMULATOR_HOST"),
        description="read, never set: the Firebase Auth emulator this process's users sign in "
        "with (the variable Firebase's SDKs read)",
    )
    firestore_emulator_host: str | None = Field(
        default=None,
        validation_alias=AliasChoices("FIRESTORE_EMULATOR_HOST"),
        description="read, never set: the Firestore emulator this process talks to (whose "
        "mockUserToken also makes unsigned Firebase ID tokens)",
    )
    google_certs_url: str = "https://www.googleapis.com/oauth2/v1/certs"
    """where Google's ID-token signing certificates are fetched."""
    firebase_certs_url: str = (
        "https://www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com"
    )
    """where Firebase's ID-token signing certificates are fetched."""
    mcp_require_auth: bool = Field(
        default=False,
        description="`fanfuse mcp --http` verifies callers (API key or ID token) on a loopback "
        "bind too; any other bind always does",
    )
    mcp_allowed_hosts: list[str] = Field(
        default_factory=list,
        description="`fanfuse mcp --http`: Host names served besides loopback's and the bound "
        "address (the DNS-rebinding checks refuse any other Host 421, Origin 403)",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="browser origins (`scheme://host:port`) whose pages may call the public "
        "function targets cross-origin (`fanfuse.http.cors`): the search page of `fanfuse dev`, a "
        "web app on another origin (examples/web-app); none by default: no CORS header, "
        "browsers refuse cross-origin calls (docs/security.md, Browser pages)",
    )
    operators: list[str] = Field(
        default_factory=list,
        description="caller subjects (`key:<owner>`, `google:<sub>`, ...) that read the "
        "deployment-wide `GET /stats` and `GET /metrics`; any other caller reads the stats of "
        "its own searches only (docs/security.md, Stats)",
    )
    tasks_hmac_secret: SecretStr | None = Field(
        default=None,
        description="local stacks: the task targets accept only bodies signed with this secret "
        "(`fanfuse dev` generates one)",
    )
    # Quotas (fanfuse.rules.quota): per caller, kept in the store so they hold across instances.
    rate_per_minute: int = Field(
        default=30, ge=1, description="starts per minute per caller (an API key may set its own)"
    )
    max_in_flight: int = Field(
        default=10, ge=1, description="searches not yet finished per caller (a key may set its own)"
    )
    max_streams_per_caller: int = Field(
        default=32,
        ge=1,
        description="streams one caller (every key of one owner together) holds open at once: "
        "`fanfuse serve`'s event streams, an MCP server's subscriptions/listen; one more is 429 "
        "with Retry-After (fanfuse.http.streams)",
    )
    # Per-deployment limits on what one request may ask for.
    max_queries: int = Field(default=5, ge=1, le=5)
    """queries one request may carry (1-5)."""
    max_platforms: int | None = Field(default=None, ge=1)
    """platforms one search may run; `all` then means the quickest that many (unset: no cap)."""
    max_content_chars: int | None = Field(
        default=20_000,
        ge=1,
        description="cap on the page text kept per result, by default too: a page or a "
        "provider's raw content is otherwise kept whole (20,000 characters is about 5,000 "
        "tokens, past the content stages' 3,000-token budget, and at most 80 KB a document)",
    )
    # Per-search caps on what one request may cost (fanfuse.rules.limits): each platform gets an
    # equal share, and a cut is reported on its platform document (`limits`).
    max_provider_calls_per_search: int = Field(
        default=100,
        ge=1,
        description="provider requests one search may make, shared equally by its platforms "
        "(5 queries on 10 platforms is 50 first pages; deeper paging takes the rest)",
    )
    max_page_fetches_per_search: int = Field(
        default=200,
        ge=1,
        description="result pages one search may fetch for content, shared equally by its "
        "platforms, best ranked first (5 queries x 10 results on 4 platforms)",
    )
    # Money (fanfuse.platforms.pricing, fanfuse.rules.budget): what provider calls cost here.
    prices: dict[str, Price] = Field(
        default_factory=dict,
        description="per platform name, the fields of its price list this deployment pays "
        'differently (`{"brave": {"per_request_usd": 0.003}}`); the rest keep the module\'s '
        "list price",
    )
    max_cost_usd: float | None = Field(
        default=None,
        ge=0,
        description="the per-request cost cap when a request sets none (None: no default cap); "
        "a request's own max_cost_usd wins",
    )
    cache_scope: Literal["owner", "shared"] = Field(
        default="owner",
        description="owner: a cached answer serves only the owner who searched it; shared: "
        "every caller (fewer provider calls, but `cache: only` then tells any caller that "
        "someone searched that query within the TTL)",
    )

    _env_file: Path | None = PrivateAttr(default=None)

    def __init__(self, **values: Any) -> None:
        """`_env_file`: the dotenv file to read (default: the one FANFUSE_ENV_FILE names, if
        any; None: none), so that however the tree is built it reads the same sources."""
        values.setdefault("_env_file", variable(ENV_FILE_VARIABLE))
        given = values["_env_file"]
        super().__init__(**values)
        self._env_file = Path(given) if given else None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The sections after the code's values, before the root's own variables (a section
        is never read from one JSON variable of its name)."""
        env_file = getattr(dotenv_settings, "env_file", None)
        sections = SectionsSource(settings_cls, Path(env_file) if env_file else None)
        return init_settings, sections, env_settings, dotenv_settings, file_secret_settings

    @property
    def env_file_read(self) -> Path | None:
        """The dotenv file this tree read, if any."""
        return self._env_file

    def platform(self, model: type[M], prefix: str, overrides: dict[str, Any] | None = None) -> M:
        """A platform's settings (`model`, its variables `prefix<FIELD>`), read now from this
        tree's sources; `overrides` (a named instance's) win over both. Raises pydantic's
        ValidationError when they do not validate (the platform is then unavailable)."""
        values = section_values(model, prefix, self._env_file)
        return model.model_validate({**values, **(overrides or {})})

    @model_validator(mode="after")
    def _emulator_tokens_only_offline(self) -> Self:
        """Unsigned tokens prove nothing: a project that could hold real users' searches never
        accepts them. Firebase reserves `demo-` projects for the emulators (no real resource
        can exist in one), so that prefix is what makes the setting legal."""
        if self.firebase_emulator_tokens and not (self.firebase_project or "").startswith("demo-"):
            raise ValueError(
                "FANFUSE_FIREBASE_EMULATOR_TOKENS needs FANFUSE_FIREBASE_PROJECT to be a `demo-` "
                "project (the Firebase emulators' offline projects)"
            )
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings tree, built on first use and kept: what every composition root
    takes and passes down (tests clear it with `get_settings.cache_clear()`)."""
    return Settings()
