"""`fanfuse index`: index a folder of notes (or a TREC / JSONL file) as a named local corpus, or
the bundled one, saying what each phase is doing, then what was indexed and how to search it.

A newcomer's second command is the search, so the last lines are that command, ready to paste.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from fanfuse.cli.search_view import fail, out, phases
from fanfuse.platforms.corpora import (
    DENSE_SUFFIX,
    IndexReport,
    forget,
    index_local,
    name_for,
)
from fanfuse.settings import Settings, get_settings
from fanfuse.wire.errors import CorpusError

QUERY_HINT = '"your words"'


def index(
    path: Annotated[
        Path | None,
        typer.Argument(help="a folder of .md/.txt notes, a TREC or a JSONL file"),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(help="the platform to search it as (default: the folder's name)"),
    ] = None,
    dense: Annotated[bool, typer.Option(help="also build the dense (vectors) index")] = True,
    forget_name: Annotated[
        str | None,
        typer.Option(
            "--forget", help="unregister the local corpus NAME (its files stay)", metavar="NAME"
        ),
    ] = None,
    bundle: Annotated[
        bool,
        typer.Option(
            help="maintainers: encode the bundled corpus anew and write the embeddings the "
            "package ships (after the corpus or the model changed)"
        ),
    ] = False,
    publish: Annotated[
        str | None,
        typer.Option(
            "--publish",
            metavar="URL",
            help="publish the corpus and its indexes as a new version at s3://BUCKET/PREFIX, "
            "gs://BUCKET/PREFIX or file:///FOLDER, for platforms whose corpus_url names it",
        ),
    ] = None,
) -> None:
    """Index a folder of notes to search it as a platform.

    PATH becomes platform NAME (BM25) and NAME_vectors (dense); run it again after editing the
    notes (only changed files are read and encoded). No PATH: the bundled Vaswani corpus; the
    corpus FANFUSE_DOCS_CORPUS or FANFUSE_VECTORS_CORPUS names: its indexes, ahead of searches.
    """
    settings = get_settings()
    if publish is not None:
        _publish(path, publish, dense, name)
    elif forget_name is not None:
        _forget(settings, forget_name)
    elif bundle and path is not None:
        raise fail("--bundle writes the bundled corpus's embeddings: give no PATH")
    elif path is None:
        _index_configured(None, dense, bundle)
    elif name is None and _configured(settings, path):
        _index_configured(path, dense, bundle=False)
    else:
        _index_named(settings, path, name, dense)


def _publish(path: Path | None, url: str, dense: bool, name: str | None) -> None:
    """`--publish URL`: the corpus and its indexes, a new version for the cloud (corpora.md)."""
    from fanfuse.tools.publishing import publish_index

    try:
        publish_index(
            path,
            url,
            dense=dense,
            say=lambda line: out.print(line, markup=False, highlight=False, soft_wrap=True),
            name=name,
        )
    except (ValueError, OSError) as exc:
        raise fail(str(exc)) from None


def _forget(settings: Settings, name: str) -> None:
    try:
        gone = forget(name, settings.cache_dir)
    except CorpusError as exc:
        raise fail(str(exc)) from None
    out.print(f"forgot {gone.name} ({gone.source}); the files themselves stay", highlight=False)


def _configured(settings: Settings, path: Path) -> bool:
    """Whether `path` is the corpus the deployment set for `docs` or `vectors`."""
    from fanfuse.platforms import Registry

    registry = Registry.from_settings(settings)
    wanted = path.expanduser().resolve()
    for platform in ("docs", "vectors"):
        with contextlib.suppress(Exception):  # unavailable here: not its corpus, then
            corpus = getattr(registry.get(platform).settings(), "corpus", None)
            if corpus is not None and Path(corpus).expanduser().resolve() == wanted:
                return True
    return False


def _index_named(settings: Settings, path: Path, name: str | None, dense: bool) -> None:
    from fanfuse.platforms import BUILTIN

    with phases(f"reading {path}") as step:
        try:
            report = index_local(
                path,
                name or name_for(path.expanduser()),
                settings.cache_dir,
                dense=dense,
                reserved={*BUILTIN, *settings.extra_platforms},
                step=step,
            )
        except (CorpusError, OSError) as exc:
            raise fail(str(exc)) from None
    for line in summary(report):
        out.print(line, highlight=False, markup=False, soft_wrap=True)


def _index_configured(path: Path | None, dense: bool, bundle: bool) -> None:
    """The indexes of the bundled corpus (None) or of the one the deployment configured, ahead
    of the first search (a cached index, or the shipped embeddings, is used as it is)."""
    from fanfuse.tools.evaluation.evaluate import build_indexes

    what = "the bundled Vaswani corpus" if path is None else str(path)
    with phases(f"building the indexes of {what}") as step:
        try:
            documents = build_indexes(path, dense=dense, bundle=bundle, step=step)
        except (ValueError, OSError, RuntimeError) as exc:
            raise fail(str(exc)) from None
    built = "BM25 and dense indexes" if dense or bundle else "BM25 index"
    out.print(f"{what}: {documents} documents, {built} ready", highlight=False)
    query = "microwave dielectric constant" if path is None else "your words"
    out.print(
        f'search it: fanfuse search "{query}" -p "docs, vectors"', highlight=False, markup=False
    )


def _counts(report: IndexReport) -> str:
    parts = [
        f"{len(report.added)} added" if report.added else "",
        f"{len(report.changed)} changed" if report.changed else "",
        f"{len(report.removed)} removed" if report.removed else "",
        f"{report.unchanged} unchanged" if report.unchanged else "",
    ]
    return ", ".join(p for p in parts if p)


def summary(report: IndexReport) -> list[str]:
    """What was indexed, what changed since the last time, and the commands that search it."""
    c = report.corpus
    files = f"; {report.read} file{'s' * (report.read != 1)} read" if c.kind == "folder" else ""
    lines = [
        f"indexed {c.source} as `{c.name}`: {c.documents} documents "
        f"({_counts(report)}{files}) in {report.seconds:.1f} s"
    ]
    if report.replaced is not None:
        lines.append(f"`{c.name}` named {report.replaced} before; it names {c.source} now")
    if c.dense:
        lines.append(
            f"dense index `{c.name}{DENSE_SUFFIX}`: {report.encoded} documents encoded, "
            f"{report.reused} kept from the last index"
        )
    elif report.dense_skipped:
        lines.append(f"no dense index: {report.dense_skipped}")
    lines.append("search it:")
    lines.append(f"  fanfuse search {QUERY_HINT} -p {c.name}")
    if c.dense:
        both = f"{c.name}, {c.name}{DENSE_SUFFIX}"
        lines.append(f'  fanfuse search {QUERY_HINT} -p "{both}"   # BM25 and dense, fused')
    again = f"fanfuse index {c.source}"
    with contextlib.suppress(CorpusError):
        if name_for(c.source) != c.name:
            again += f" --name {c.name}"
    lines.append(f"after editing the notes, `{again}` brings the changes in")
    return lines
