"""Write docs/mutants.md from the last `scripts/mutants` run of each package.

Reads build/mutants/PACKAGE/results.txt (`mutmut results --all True`: one `name: status` a
line), asks mutmut for the diff of every mutant that was not killed (`mutmut show`), and joins
the reviewed list of equivalent mutants (scripts/mutants-equivalent.toml: per package, mutant
name -> why no test can tell it from the original). The score is killed / (mutants - equivalent):
a mutant no test reaches ("no tests") or that outlives them ("survived", "timeout" aside: a
timeout is a kill, the mutant hangs) counts against it. A package not run keeps its section of
the previous report. The figures of the run before this issue's tests (docs/mutants-baseline.json)
stay beside the new ones.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STAGES = ROOT / "build" / "mutants"
REPORT = ROOT / "docs" / "mutants.md"
FIGURES = ROOT / "docs" / "mutants.json"
BASELINE = ROOT / "docs" / "mutants-baseline.json"
EQUIVALENT = ROOT / "scripts" / "mutants-equivalent.toml"
PACKAGES = ("fusion", "rules", "wire", "guard", "budget")
KILLED = {"killed", "timeout", "caught by type check"}


def read(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            found[name] = status
    return found


def results(package: str) -> dict[str, str] | None:
    """Each mutant's status in the package's last run. `scripts/mutants --again` tests only the
    mutants not killed, and mutmut then reports the others "not checked": they were killed by
    an earlier run (kept here in verdicts.txt, updated at each report), and added tests cannot
    let them live, so they keep that verdict."""
    path = STAGES / package / "results.txt"
    if not path.exists():
        return None
    found = read(path)
    kept = STAGES / package / "verdicts.txt"
    if kept.exists():
        earlier = read(kept)
        for name, status in found.items():
            if status == "not checked" and earlier.get(name) in KILLED:
                found[name] = earlier[name]
    kept.write_text("".join(f"{name}: {status}\n" for name, status in found.items()))
    return found


def diff(package: str, name: str) -> str:
    """The mutant's change as mutmut shows it (`mutmut show`), read in this process: the
    mutated module is named in the mutant's name (`fanfuse.rules.lifecycle.x_claim__mutmut_3`)."""
    module = re.split(r"\.x[_ǁ]", name.split("__mutmut_")[0], maxsplit=1)[0]
    source = Path("src", *module.split(".")).with_suffix(".py")
    here = Path.cwd()
    try:
        from mutmut.mutation.diff_apply import get_diff_for_mutant

        os.chdir(STAGES / package)
        shown = get_diff_for_mutant(name, path=source)
    except Exception as exc:  # a mutant mutmut cannot show: say so, keep the report
        shown = f"(no diff: {exc!r})"
    finally:
        os.chdir(here)
    lines = [line for line in shown.splitlines() if line.startswith(("+", "-", "@@"))]
    return "\n".join(line for line in lines if not line.startswith(("+++", "---")))


def figures(found: dict[str, str], equivalent: dict[str, str]) -> dict[str, int | float]:
    counts = Counter("killed" if s in KILLED else s for s in found.values())
    listed = sum(1 for name, status in found.items() if name in equivalent and status not in KILLED)
    total = len(found)
    scored = total - listed
    return {
        "mutants": total,
        "killed": counts["killed"],
        "survived": counts["survived"],
        "no tests": counts["no tests"],
        "other": total - counts["killed"] - counts["survived"] - counts["no tests"],
        "equivalent": listed,
        "score": round(100 * counts["killed"] / scored, 1) if scored else 100.0,
    }


def section(package: str, found: dict[str, str], equivalent: dict[str, str]) -> str:
    """The package's mutants not killed: the equivalent ones with their reason, then the rest;
    each with its diff."""
    left = sorted(n for n, s in found.items() if s not in KILLED)
    listed = [n for n in left if n in equivalent]
    unexplained = [n for n in left if n not in equivalent]
    stale = sorted(n for n in equivalent if found.get(n) in KILLED or n not in found)
    lines = [f"### {package}", "", f"Equivalent (reviewed, {len(listed)}):", ""]
    for name in listed:
        lines += [f"- `{name}`: {equivalent[name]}", "", "```diff", diff(package, name), "```"]
    lines += ["", f"Not killed and not explained ({len(unexplained)}):", ""]
    for name in unexplained:
        lines += [f"- `{name}` ({found[name]})", "", "```diff", diff(package, name), "```"]
    if stale:
        lines += ["", "Listed as equivalent but killed or gone now: " + ", ".join(stale)]
    return "\n".join(lines)


def previous_sections(skip: set[str]) -> dict[str, str]:
    """The sections of the last report, by package, but those of `skip`."""
    text = REPORT.read_text() if REPORT.exists() else ""
    kept = {}
    for part in re.split(r"\n(?=### )", text.partition("\n## Mutants not killed\n")[2]):
        if part.startswith("### "):
            name = part.split("\n", 1)[0][4:]
            if name not in skip:
                kept[name] = part.strip()
    return kept


def header(table: dict[str, dict[str, Any]], baseline: dict[str, dict[str, Any]]) -> list[str]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    lines = [
        "# Mutation testing of the pure core",
        "",
        "Written by `scripts/mutants` (mutmut 3, then `scripts/mutants_report.py`), not by hand.",
        "What it mutates, which tests it runs and how to read a survivor: docs/contributing.md.",
        "",
        f"Last written {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit {commit} (the code run",
        "is that commit's working tree). Score: killed / (mutants - equivalent); a timeout is a",
        "kill (the mutant hangs). `before`: the same run before issue 36's tests.",
        "",
        "| package | mutants | killed | survived | no tests | other | equivalent | score "
        "| before | run on |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for package, row in table.items():
        old = baseline.get(package)
        before = f"{old['score']} % ({old['killed']}/{old['mutants']})" if old else "-"
        lines.append(
            f"| {package} | {row['mutants']} | {row['killed']} | {row['survived']} | "
            f"{row['no tests']} | {row['other']} | {row['equivalent']} | {row['score']} % | "
            f"{before} | {row['run']} |"
        )
    return lines


def main() -> None:
    equivalent_by_package = tomllib.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    old = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    table: dict[str, dict[str, Any]] = {}
    sections: dict[str, str] = {}
    run = {p for p in PACKAGES if results(p) is not None}
    for package in PACKAGES:
        found = results(package)
        if found is None:
            if package in old:
                table[package] = old[package]
            continue
        equivalent: dict[str, str] = equivalent_by_package.get(package, {})
        row: dict[str, Any] = dict(figures(found, equivalent))
        row["run"] = datetime.now(UTC).strftime("%Y-%m-%d")
        table[package] = row
        sections[package] = section(package, found, equivalent)
    sections = {**previous_sections(run), **sections}
    FIGURES.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")
    body = [sections[p] for p in PACKAGES if p in sections]
    REPORT.write_text(
        "\n".join([*header(table, baseline), "", "## Mutants not killed", "", *body, ""])
    )
    print(f"wrote {REPORT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
