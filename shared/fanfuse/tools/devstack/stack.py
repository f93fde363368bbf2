"""The whole local stack: Firestore, Cloud Tasks (one queue per platform plus aggregate), functions.

Used by `fanfuse dev` and by the pytest session fixtures, so both run the very same processes.
Queue ids come from the queue port (`fanfuse.queue.port.queue_id`) with the same prefix the
functions are given (FANFUSE_QUEUE_PREFIX), so the queues created here are the ones the
functions enqueue to, whatever the prefix.

Each stack makes its own random task secret (FANFUSE_TASKS_HMAC_SECRET, see
`fanfuse.auth.task_deliveries`): the functions sign the tasks they enqueue with it and the task
targets accept only bodies so signed, since the emulator carries no OIDC token. It is handed to the
function processes and to tests (`LocalStack.tasks_secret`), never printed.
Once Firestore answers, an API key for owner `local` is created in it (the functions' key
store: `{collection}_keys`): `fanfuse dev` prints it on its `api_key` line, tests send it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fanfuse.auth import keys
from fanfuse.queue import port as queue_port
from fanfuse.settings import Settings
from fanfuse.tools.devstack.firestore_emulator import FirestoreEmulator
from fanfuse.tools.devstack.functions_host import (
    DEFAULT_FUNCTIONS_SOURCE,
    FUNCTION_TARGETS,
    FunctionProcess,
)
from fanfuse.tools.devstack.lifetime import StackLifetime
from fanfuse.tools.devstack.page_server import PageProcess
from fanfuse.tools.devstack.processes import (
    DEFAULT_LOCATION,
    DEFAULT_PROJECT,
    LOOPBACK,
    default_log_dir,
    free_port,
)
from fanfuse.tools.devstack.tasks_emulator import CloudTasksEmulator
from fanfuse.wire.models import ApiKey, utcnow


def queue_id(platform: str, prefix: str | None = None) -> str:
    """Queue id of a platform (or of "aggregate"): `{prefix}-{platform with _ as -}`.

    `prefix` defaults to FANFUSE_QUEUE_PREFIX (`fanfuse`), as LocalStack's does.
    """
    return queue_port.queue_id(Settings().queue_prefix if prefix is None else prefix, platform)


@dataclass(frozen=True)
class StackAddresses:
    """Where the running stack lives; `env()` is what each function process is given."""

    project: str
    location: str
    firestore: str
    tasks: str
    functions: dict[str, str]
    queue_prefix: str
    queues: dict[str, str] = field(default_factory=dict)
    deployed: tuple[str, ...] = ()
    """The platforms this stack serves (its queues): every function's deployed platforms."""
    log_dir: Path | None = None
    tasks_secret: str | None = field(default=None, repr=False)
    """What the task targets check deliveries with (never in `describe()` or a repr)."""
    api_key: str | None = field(default=None, repr=False)
    """The key for owner `local`, once the stack has started (kept out of repr and env)."""
    page: str | None = None
    """The search page's URL (`devstack.page_server`): its origin is the functions' one CORS
    origin."""

    def env(self) -> dict[str, str]:
        secret = {"FANFUSE_TASKS_HMAC_SECRET": self.tasks_secret} if self.tasks_secret else {}
        # Only the platforms with a queue are offered: `all` means these, any other is a 400
        # (Registry's "not deployed"), never a 202 whose enqueue then fails.
        deployed = (
            {"FANFUSE_DEPLOYED_PLATFORMS": json.dumps(self.deployed)} if self.deployed else {}
        )
        cors = {"FANFUSE_CORS_ORIGINS": json.dumps([self.page.rstrip("/")])} if self.page else {}
        return {
            "GOOGLE_CLOUD_PROJECT": self.project,
            "FANFUSE_PROJECT": self.project,
            "FANFUSE_REGION": self.location,
            "FIRESTORE_EMULATOR_HOST": self.firestore,
            "FANFUSE_TASKS_EMULATOR_HOST": self.tasks,
            "FANFUSE_FUNCTION_URLS": json.dumps(self.functions, sort_keys=True),
            # Explicit, so the functions enqueue to the queues this stack created.
            "FANFUSE_QUEUE_PREFIX": self.queue_prefix,
            **deployed,
            **cors,
            **secret,
        }

    def describe(self) -> list[tuple[str, str]]:
        lines = [
            ("project", self.project),
            ("firestore", self.firestore),
            ("cloud_tasks", self.tasks),
        ]
        lines += [(target, self.functions[target]) for target in self.functions]
        if self.page is not None:
            lines.append(("page", self.page))
        if self.log_dir is not None:
            lines.append(("logs", str(self.log_dir)))
        if self.api_key is not None:
            lines.append(("api_key", self.api_key))
        return lines


class LocalStack(StackLifetime[StackAddresses]):
    """Firestore + Cloud Tasks (one queue per platform, plus aggregate) + the five functions,
    and the search page for them (`devstack.page_server`, the functions' one CORS origin).

    `with LocalStack(["docs", "vectors"]) as addresses:` starts everything, the emulators in
    parallel and then the functions in parallel, and stops everything on exit, on an exception,
    on Ctrl-C and on SIGTERM/SIGHUP (turned into SystemExit while the stack runs, so the with
    block unwinds), and at interpreter exit. When this process dies with no chance to stop
    anything (SIGKILL, a crash), its watchdog stops every child (see `watchdog`).

    The platforms given are the stack's queues and its functions' deployed platforms
    (FANFUSE_DEPLOYED_PLATFORMS): a search offers exactly these.

    `queue_prefix` defaults to FANFUSE_QUEUE_PREFIX (`fanfuse`): the queues are
    `{prefix}-{platform}` and `{prefix}-aggregate`, and the functions get the same prefix.
    """

    def __init__(
        self,
        platforms: Iterable[str],
        *,
        project: str = DEFAULT_PROJECT,
        location: str = DEFAULT_LOCATION,
        queue_prefix: str | None = None,
        source: Path = DEFAULT_FUNCTIONS_SOURCE,
        targets: Sequence[str] = FUNCTION_TARGETS,
        firestore_port: int | None = None,
        tasks_port: int | None = None,
        function_ports: Mapping[str, int] | None = None,
        extra_env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        tasks_max_retries: int = 5,
        tasks_poll_interval: float = 0.1,
        handle_signals: bool = True,
    ) -> None:
        self.log_dir = log_dir or default_log_dir()
        super().__init__(self.log_dir, handle_signals)
        self.platforms = list(dict.fromkeys(platforms))
        self.project = project
        self.location = location
        self.queue_prefix = Settings().queue_prefix if queue_prefix is None else queue_prefix
        queue_names = {
            p: queue_port.queue_id(self.queue_prefix, p)
            for p in [*self.platforms, queue_port.AGGREGATE_QUEUE]
        }
        self.firestore = FirestoreEmulator(project, firestore_port, log_dir=self.log_dir)
        self.tasks = CloudTasksEmulator(
            tasks_port,
            queue_names.values(),
            project,
            location,
            max_retries=tasks_max_retries,
            poll_interval=tasks_poll_interval,
            log_dir=self.log_dir,
        )
        ports = dict(function_ports or {})
        urls = {t: f"http://{LOOPBACK}:{ports.setdefault(t, free_port())}" for t in targets}
        self.tasks_secret = secrets.token_urlsafe(32)
        # The page needs the three public targets; a stack of fewer targets has none.
        self.page = (
            PageProcess(urls, log_dir=self.log_dir)
            if {"start_search", "search_status", "cancel_search"} <= urls.keys()
            else None
        )
        self.addresses = StackAddresses(
            project=project,
            location=location,
            firestore=self.firestore.host,
            tasks=self.tasks.host,
            functions=urls,
            queue_prefix=self.queue_prefix,
            queues=queue_names,
            deployed=tuple(self.platforms),
            log_dir=self.log_dir,
            tasks_secret=self.tasks_secret,
            page=self.page.url if self.page else None,
        )
        env = {**self.addresses.env(), **dict(extra_env or {})}
        origins = [
            json.loads(e["FANFUSE_CORS_ORIGINS"])
            for e in (self.addresses.env(), extra_env or {})
            if "FANFUSE_CORS_ORIGINS" in e
        ]
        if origins:  # the page's origin and the apps' (`--app-origin`) together
            env["FANFUSE_CORS_ORIGINS"] = json.dumps(
                list(dict.fromkeys(o for group in origins for o in group))
            )
        self.collection = env.get("FANFUSE_COLLECTION") or Settings().collection
        self.local_key: ApiKey | None = None
        self.functions = [
            FunctionProcess(t, ports[t], env, source=source, log_dir=self.log_dir) for t in targets
        ]

    def components(
        self,
    ) -> list[FirestoreEmulator | CloudTasksEmulator | FunctionProcess | PageProcess]:
        page = [self.page] if self.page else []
        return [self.firestore, self.tasks, *self.functions, *page]

    def stop_order(
        self,
    ) -> list[FirestoreEmulator | CloudTasksEmulator | FunctionProcess | PageProcess]:
        """The page and the functions first, then the emulators they use."""
        page = [self.page] if self.page else []
        return [*page, *self.functions, self.tasks, self.firestore]

    def describe(self) -> list[tuple[str, str]]:
        """One (component, address) pair per line of `fanfuse dev`'s banner."""
        return self.addresses.describe()

    def boot(self) -> StackAddresses:
        # Firestore needs ~4 s of JVM start-up: overlap it with everything else.
        for component in self.components():
            self.launch(component)
        self.tasks.wait_ready()
        self.firestore.wait_ready()
        plaintext, self.local_key = keys.new_key(
            keys.LOCAL_OWNER, "fanfuse dev", None, None, utcnow()
        )
        self._put_local_key()
        self.addresses = dataclasses.replace(self.addresses, api_key=plaintext)
        for function in self.functions:
            function.wait_ready()
        if self.page is not None:
            self.page.wait_ready()
        return self.addresses

    def _put_local_key(self) -> None:
        from fanfuse.store.firestore import FirestoreStore

        if self.local_key is None:
            return
        store = FirestoreStore(self.firestore.client(), collection=self.collection)
        try:
            store.put_key(self.local_key)
        finally:
            store.close()

    def reset_firestore(self) -> None:
        """Delete every document (a clean slate for a test), then put the local key back."""
        self.firestore.reset()
        self._put_local_key()


ORIGIN = re.compile(r"https?://[^/\s*]+")
"""A browser origin as a page's `Origin` header carries it: scheme://host[:port], no path."""


def browser_app_problem(cloud: str, origins: Sequence[str], rules: Path | None) -> str | None:
    """What is wrong with `fanfuse dev`'s `--app-origin` and `--rules`, or None."""
    if cloud != "gcp" and (origins or rules):
        return "--app-origin and --rules are for --cloud gcp (the Firestore emulator)"
    bad = [o for o in origins if not ORIGIN.fullmatch(o)]
    return f"--app-origin {bad[0]!r}: an origin is scheme://host[:port], no path" if bad else None


def browser_app_env(
    origins: Sequence[str], project: str = DEFAULT_PROJECT
) -> dict[str, str] | None:
    """What the functions are given for browser apps on `origins` whose users sign in with the
    Firebase emulators (examples/web-app): CORS for those origins, and the emulators' unsigned
    Firebase ID tokens for the stack's project, which must be a `demo-` one (Settings refuses
    the tokens for any other); None without an origin. `fanfuse dev --app-origin` passes it
    as `extra_env`."""
    if not origins:
        return None
    return {
        "FANFUSE_FIREBASE_PROJECT": project,
        "FANFUSE_FIREBASE_EMULATOR_TOKENS": "true",
        "FANFUSE_CORS_ORIGINS": json.dumps(list(origins)),
    }


def browser_app_url(origin: str, addresses: StackAddresses) -> str:
    """The example app's page on `origin`, pointed at this stack (its query string)."""
    from urllib.parse import urlencode

    query = urlencode(
        {
            "project": addresses.project,
            "firestore": addresses.firestore,
            "api": addresses.functions["start_search"],
        }
    )
    return f"{origin}/?{query}"


def prepare_browser_app(
    stack: LocalStack, origins: Sequence[str], rules: Path | None
) -> list[tuple[str, str]]:
    """Load `rules` into the running stack's Firestore emulator (without rules it lets every
    client read everything); the banner lines of `fanfuse dev --rules --app-origin`: the rules
    loaded, and the app's address on each origin. RuntimeError when the emulator refuses them."""
    lines = []
    if rules is not None:
        try:
            stack.firestore.load_rules(rules.read_text())
        except ValueError as exc:  # the emulator says why
            raise RuntimeError(str(exc)) from None
        lines.append(("rules", str(rules)))
    return lines + [("web_app", browser_app_url(o, stack.addresses)) for o in origins]
