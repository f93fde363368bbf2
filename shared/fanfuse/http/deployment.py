"""A deployment's own OpenAPI document: what its request validation takes from its settings and
registry, written into the request's schema.

`SearchService.validate` validates a request with a context (the platforms available there, the
deadline, `max_queries`, `max_platforms`), so the one document of `docs/openapi.json` cannot say
which names or timeouts a given deployment takes: schemathesis (`--checks all`) found requests
valid in it and refused (an unknown or unconfigured platform, a weight for one, a timeout past
the deadline). A deployment serves the document with those written in (`for_deployment`), so
that a request valid in it is one the deployment accepts, and one invalid in it is refused with
a 400 naming the field: `platform` and the keys of `weights` are the platforms available there
(any case, blanks around, as the validators read them), `timeout_s` and a number
`hedge_after_s` at most its deadline, `query` at most its `max_queries`. Fallback chains
(`a|b`) are written in too: any names known there, one of which can run. Known gaps, said in the
schema's descriptions: a list item holding commas is read as several names (the document says
one name or chain an item), `max_platforms` below the number of platforms (a count of distinct
names no pattern makes), and the bound on names counted over all of a list's items (each item's
chain is bound alone).

A function deployment (the Cloud Functions, the Lambda's routes) serves one more thing in its
document (`for_functions`): where each operation lives. Each public call is a function with a
URL of its own (FANFUSE_FUNCTION_URLS), so each path item names its function as its server, and
the routes only `serve` has are left out, with the links to them: a client, or schemathesis'
stateful phase, goes from a started search to its status and its cancel across functions with
the document alone.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from typing import Any

from fanfuse.http.patterns import BLANKS
from fanfuse.service.catalog import Catalog
from fanfuse.settings import Settings
from fanfuse.wire.request import MAX_PLATFORM_NAMES, MAX_QUERIES

ALL = "all"


@dataclass(frozen=True)
class Deployment:
    """What one deployment's request validation depends on (`SearchService.validate`'s
    context), for the document it serves: the platforms a request may name alone there, its
    deadline, and its `max_queries`. `max_platforms`, when it is below the number of platforms,
    is said in `platform`'s description only: how many distinct names a string holds is no JSON
    schema. A fallback chain (`a|b`) may also name the platforms `known` there that cannot run,
    as long as one of its members is `runnable` (wire/selection.py); both default to
    `platforms`."""

    platforms: tuple[str, ...]
    deadline_seconds: float
    max_queries: int = MAX_QUERIES
    max_platforms: int | None = None
    runnable: tuple[str, ...] | None = None
    known: tuple[str, ...] = ()

    @classmethod
    def of(cls, settings: Settings, catalog: Catalog) -> Deployment:
        """The deployment of these settings and this service's platform catalog: what its
        validation accepts alone, what can run, and every name a chain may mention."""
        return cls(
            platforms=tuple(catalog.available()),
            deadline_seconds=settings.deadline_seconds,
            max_queries=settings.max_queries,
            max_platforms=settings.max_platforms,
            runnable=tuple(catalog.runnable()),
            known=tuple(catalog.registry.names()),
        )


@functools.cache
def _lowered_to() -> dict[str, str]:
    """Each character whose `str.lower()` is one ASCII letter or digit, to that one (a name is
    lowered before it is looked up: `K` and the Kelvin sign U+212A are both `k`)."""
    found: dict[str, str] = {}
    for point in range(sys.maxunicode + 1):
        char = chr(point)
        low = char.lower()
        if low != char and len(low) == 1 and low.isascii() and low.isalnum():
            found[char] = low
    return found


def any_case(name: str) -> str:
    """A regular expression matching what lowers to `name` (JSON schema patterns have no flag)."""
    variants: dict[str, list[str]] = {c: [c] for c in name}
    for char, low in _lowered_to().items():
        if low in variants:
            variants[low].append(char)
    return "".join(
        f"[{''.join(variants[c])}]" if len(variants[c]) > 1 else re.escape(c) for c in name
    )


COUNTED = {"pattern": f"^[^,|]*(?:[,|][^,|]*){{0,{MAX_PLATFORM_NAMES - 1}}}$"}
"""At most MAX_PLATFORM_NAMES names in one string, chain members included (the validator counts
every `,` and `|`); in a list each item is bound alone: the sum over items is no pattern."""


def _word(names: tuple[str, ...]) -> str:
    return f"(?:{'|'.join(any_case(n) for n in names)})"


def selection_schemas(
    names: tuple[str, ...],
    runnable: tuple[str, ...] | None = None,
    known: tuple[str, ...] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`platform`'s two forms as `selection.split_entries` and `resolve` read them, over
    `names`: comma-separated entries (at most MAX_PLATFORM_NAMES, blank ones dropped), each a
    name in any case with blanks around, or a fallback chain of names joined by `|` (blanks
    around each) at least one of which is `runnable` (the others `known`), at least one entry
    not blank, and either all `all` or all names. The string form, and a list of entries, one
    per item: the validator also splits an item at its commas, counting the entries (and the
    chains' names) of all items against the same bound, which no pattern can count across
    items; one entry an item keeps the list's bound exact (`maxItems`) but for the chains' names,
    which are counted in each item alone (`COUNTED`)."""
    alone = _word(names)
    runs = _word(runnable if runnable is not None else names)
    member = _word(tuple(sorted({*names, *known})))
    bar = f"{BLANKS}\\|{BLANKS}"
    chain = f"(?:{member}{bar})+{runs}(?:{bar}{member})*|{runs}(?:{bar}{member})+"
    entry = f"{chain}|{alone}" if runnable != () else alone
    forms = [
        {"pattern": entry, "description": "platform names or fallback chains"},
        {"pattern": any_case(ALL), "description": '"all"'},
    ]
    strings, arrays = [], []
    for form in forms:
        entry = f"{BLANKS}(?:{form['pattern']})?{BLANKS}"
        listed = f"^{entry}(?:,{entry}){{0,{MAX_PLATFORM_NAMES - 1}}}$"
        one = f"(?:^|,){BLANKS}(?:{form['pattern']}){BLANKS}(?:,|$)"
        string = {"type": "string", "pattern": listed, "allOf": [{"pattern": one}, COUNTED]}
        strings.append({**string, "description": form["description"]})
        arrays.append(
            {
                "type": "array",
                "items": {"type": "string", "pattern": f"^{entry}$", "allOf": [COUNTED]},
                "contains": {"type": "string", "pattern": one},
                "minItems": 1,
                "maxItems": MAX_PLATFORM_NAMES,
            }
        )
    return {"anyOf": strings}, {"anyOf": arrays}


def for_deployment(defs: dict[str, Any], deployment: Deployment) -> None:
    """Write `deployment`'s limits into the request's schema, in place (see the module)."""
    request = defs["SearchRequest"]["properties"]
    names = tuple(sorted(deployment.platforms))
    platform = request["platform"]
    if names:
        runnable = deployment.runnable
        string, array = selection_schemas(
            names, tuple(sorted(runnable)) if runnable is not None else None, deployment.known
        )
        platform["anyOf"] = [string, array]
    else:  # nothing to choose from: every selection is refused, "all" (the default) too
        platform["anyOf"] = [{"not": {}}]
        defs["SearchRequest"].setdefault("required", []).append("platform")
    platform["description"] += (
        f"; on this deployment one or more of: {', '.join(names)} (a list: one name or chain "
        "an item)"
    )
    most = deployment.max_platforms
    if most is not None and most < len(names):
        platform["description"] += f"; at most {most} distinct names per request"
    weights = next(s for s in request["weights"]["anyOf"] if s.get("type") == "object")
    key = f"^{BLANKS}(?:{'|'.join(any_case(n) for n in names)}){BLANKS}$"
    named: dict[str, Any] = {"pattern": key} if names else {"not": {}}
    weights["propertyNames"] = named
    request["timeout_s"]["maximum"] = deployment.deadline_seconds
    for seconds in request["hedge_after_s"]["anyOf"]:
        if seconds.get("type") == "number":
            seconds["maximum"] = deployment.deadline_seconds
    for array in arrays(request["query"]):
        array["maxItems"] = min(array["maxItems"], deployment.max_queries)


def arrays(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Every array schema in `schema`, through `anyOf`."""
    found = [schema] if schema.get("type") == "array" else []
    for child in schema.get("anyOf", []):
        if isinstance(child, dict):
            found += arrays(child)
    return found


FUNCTION_OF_PATH = {
    "/start_search": "start_search",
    "/search_status/{task_id}": "search_status",
    "/search_status": "search_status",
    "/cancel_search": "cancel_search",
    "/platforms": "search_status",
    "/stats": "search_status",
    "/openapi.json": "search_status",
}
"""Which function answers each path the functions have: the three public calls at their own
names, and `{search_status URL}/platforms`, `/stats`, `/openapi.json` (fronts/functions.py)."""


def function_server(path: str, target: str, url: str) -> str:
    """The server of `path` on `target`'s function at `url`: a path that starts with the
    target's name is appended to the URL without that name (a URL that ends with it, as
    cloudfunctions.net and the Lambda's routes name a function, is cut there); any other path
    is appended to the function's URL as it is (`{search_status URL}/stats`)."""
    url = url.rstrip("/")
    if path.startswith(f"/{target}"):
        return url.removesuffix(f"/{target}") or url
    return url


def for_functions(document: dict[str, Any], function_urls: dict[str, str]) -> dict[str, Any]:
    """`document` (a fresh copy) as a function deployment serves it: only the paths its
    functions answer, each with its function's URL as its server (`function_urls`, by target;
    a path whose function has no URL keeps the document's servers), no link to a path left out."""
    paths = {path: item for path, item in document["paths"].items() if path in FUNCTION_OF_PATH}
    kept = {op["operationId"] for item in paths.values() for op in item.values()}
    for path, item in paths.items():
        url = function_urls.get(FUNCTION_OF_PATH[path])
        if url:
            item["servers"] = [{"url": function_server(path, FUNCTION_OF_PATH[path], url)}]
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for answer in operation.get("responses", {}).values():
                links = answer.get("links")
                if links:
                    answer["links"] = {
                        name: link for name, link in links.items() if link["operationId"] in kept
                    }
    document["paths"] = paths
    return document
