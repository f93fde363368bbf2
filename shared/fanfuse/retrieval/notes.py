"""A folder of notes as documents: which files count, each one's own title, its file:// URL.

A folder corpus is somebody's notes or docs: a result must name the file (a `file://` URL that
a terminal or a file manager opens, not a made-up web address) under the title its author gave
it. The title is the front matter's `title:` when there is one, else the first Markdown
heading, else the first non-empty line (a plain-text note's first line is its title).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

NOTE_SUFFIXES = frozenset({".txt", ".md"})
TITLE_MAX_CHARS = 200

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_FRONT_TITLE = re.compile(r"""^title\s*:\s*(?P<q>["']?)(?P<title>.*?)(?P=q)\s*$""")


def note_files(folder: Path) -> list[Path]:
    """The folder's .txt/.md files, recursively, skipping hidden files and folders, sorted by
    their path relative to the folder (a corpus's document order, so its fingerprint, is stable).
    """
    files: list[Path] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for file_name in names:
            file = Path(root) / file_name
            if not file_name.startswith(".") and file.suffix.lower() in NOTE_SUFFIXES:
                files.append(file)
    return sorted(files, key=lambda f: f.relative_to(folder).as_posix())


def note_url(path: Path) -> str:
    """The file's absolute `file://` URL (spaces and the like percent-encoded)."""
    return path.resolve().as_uri()


def _cut(title: str) -> str:
    title = " ".join(title.split())
    if len(title) <= TITLE_MAX_CHARS:
        return title
    cut = title[:TITLE_MAX_CHARS]
    space = cut.rfind(" ")
    return (cut[:space] if space > TITLE_MAX_CHARS // 2 else cut).rstrip() + "…"


def note_title(text: str) -> str:
    """The note's own title ("" for a blank note): front matter `title:`, else the first
    Markdown heading, else the first non-empty line, at most TITLE_MAX_CHARS."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":  # YAML front matter
        for i, line in enumerate(lines[1:], start=1):
            if line.strip() == "---":
                front, lines = lines[1:i], lines[i + 1 :]
                for entry in front:
                    match = _FRONT_TITLE.match(entry.strip())
                    if match and match.group("title").strip():
                        return _cut(match.group("title"))
                break
    for line in lines:
        match = _HEADING.match(line)
        if match and match.group(1):
            return _cut(match.group(1))
    for line in lines:
        if line.strip():
            return _cut(line)
    return ""
