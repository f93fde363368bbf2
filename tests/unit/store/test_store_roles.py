"""The store port's roles, checked: each consumer's store parameters are role protocols
(store/ports.py), and only the composition points take the whole `TaskStore`.

Read from the source with `ast` (as tests/unit/test_layers.py reads imports), so an annotation
under `if TYPE_CHECKING:` or a lazy import counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from fanfuse.store import ports
from fanfuse.store.dynamodb import DynamoStore
from fanfuse.store.firestore import FirestoreStore
from fanfuse.store.sqlite import SqliteStore

LIBRARY = Path(__file__).resolve().parents[3] / "shared" / "fanfuse"
ROLE_NAMES = {role.__name__ for role in ports.ROLES}

CONSUMERS: dict[str, set[str]] = {
    "auth/callers.py": {"KeyStore"},
    "stages/stage_run.py": {"TaskDocuments"},
    "stages/cache.py": {"CacheStore"},
    "service/heartbeat.py": {"TaskDocuments"},
    "service/execute.py": {"TaskDocuments", "CacheStore"},
    "service/circuit.py": {"HealthStore"},
    "service/admission.py": {"QuotaStore"},
    "service/pacing.py": {"QuotaStore"},
    "service/chains.py": {"TaskDocuments", "HealthStore"},
    "http/stats_route.py": {"StatsStore", "HealthStore"},
}
"""Each consumer module with the roles its parameters take."""

WHOLE_STORE = {
    "runtimes/embedded.py",  # opens the store, or takes the one a test passes
    "runtimes/aws.py",  # opens the DynamoDB store
    "service/service.py",  # SearchService hands each part its role
    "cli/keys.py",  # opens a store for `fanfuse keys` and closes it
    "tools/bench/quota.py",  # opens fresh stores to measure
}
"""The composition points: they open a store (or hand it on), so they hold all its roles."""


def store_annotations(path: Path) -> list[str]:
    """The names from store/ports.py that annotate a parameter of a function in `path`."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                if arg.annotation is None:
                    continue
                for part in ast.walk(arg.annotation):
                    if isinstance(part, ast.Name) and part.id in {*ROLE_NAMES, "TaskStore"}:
                        names.append(part.id)
                    if isinstance(part, ast.Constant) and isinstance(part.value, str):
                        names += [n for n in (*ROLE_NAMES, "TaskStore") if n in part.value]
    return names


def test_each_consumer_takes_only_its_roles() -> None:
    for relative, roles in CONSUMERS.items():
        found = store_annotations(LIBRARY / relative)
        assert set(found) == roles, f"{relative}: store parameters typed {sorted(set(found))}"


def test_only_the_composition_points_take_the_whole_store() -> None:
    takers = {
        path.relative_to(LIBRARY).as_posix()
        for path in LIBRARY.rglob("*.py")
        if not path.relative_to(LIBRARY).as_posix().startswith("store/")
        and "TaskStore" in store_annotations(path)
    }
    wider = sorted(takers - WHOLE_STORE)
    assert not wider, f"take a role instead of TaskStore: {wider}"


def test_the_whole_store_is_every_role_and_each_store_is_the_whole_store() -> None:
    # `__mro__`, not issubclass: the roles are Protocols, not runtime-checkable
    assert all(role in ports.TaskStore.__mro__ for role in ports.ROLES)
    roles_methods = {name for role in ports.ROLES for name in role.__abstractmethods__}
    assert roles_methods == set(ports.TaskStore.__abstractmethods__)
    for store in (SqliteStore, FirestoreStore, DynamoStore):
        assert ports.TaskStore in store.__mro__
        assert not store.__abstractmethods__, f"{store.__name__} misses a method"


def test_no_two_roles_share_a_method() -> None:
    seen: dict[str, str] = {}
    for role in ports.ROLES:
        for name in role.__abstractmethods__:
            assert name not in seen, f"{name} in both {seen[name]} and {role.__name__}"
            seen[name] = role.__name__
