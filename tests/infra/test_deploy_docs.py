"""docs/deploy.md: every command is one a rehearsal runs, word for word, or says why it is not;
and the guide has the sections of a deploy's whole life (issue 30, item 4)."""

from __future__ import annotations

import re
from pathlib import Path

from fanfuse_deploy import aws_rehearsal, rehearsal

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
NOT_REHEARSED = re.compile(r"\s+# not rehearsed: (.+)$")
ASSIGNMENT = re.compile(r"^export( [A-Z_]+=\S+)+$")


def shell_commands(text: str) -> list[str]:
    """Each command of the ```sh blocks (continuation lines joined)."""
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        joined = block.replace("\\\n", " ")
        commands += [" ".join(line.split()) for line in joined.splitlines() if line.strip()]
    return commands


def rehearsed() -> set[str]:
    return {
        *aws_rehearsal.RUNBOOK.values(),
        *rehearsal.GCP_RUNBOOK.values(),
        *rehearsal.REHEARSALS,
    }


def unaccounted(commands: list[str]) -> list[str]:
    """Commands neither rehearsed nor marked `# not rehearsed: <why>`."""
    found = []
    for command in commands:
        reason = NOT_REHEARSED.search(command)
        if reason is not None:
            if len(reason.group(1)) < 20:
                found.append(f"{command} (no real reason)")
            continue
        if ASSIGNMENT.match(command):
            continue
        if command not in rehearsed():
            found.append(command)
    return found


def test_every_command_is_rehearsed_or_says_why_not() -> None:
    commands = shell_commands(DOC.read_text())
    assert len(commands) > 25
    assert unaccounted(commands) == []


def test_every_command_the_rehearsals_run_is_in_the_guide() -> None:
    commands = set(shell_commands(DOC.read_text()))
    assert rehearsed() - commands == set()


def test_the_check_catches_a_command_the_rehearsal_does_not_run() -> None:
    apply = aws_rehearsal.RUNBOOK["apply"]
    assert unaccounted([apply]) == []
    assert unaccounted([apply + " -auto-approve"]) == [apply + " -auto-approve"]
    assert unaccounted(["gcloud x  # not rehearsed: no"]) == [
        "gcloud x  # not rehearsed: no (no real reason)"
    ]


def test_the_guide_has_the_sections_of_a_deploys_life() -> None:
    text = DOC.read_text()
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    for heading in (
        "Prerequisites", "The clouds' limits", "The build's account and its roles",
        "The database: new, or an existing one", "Who may call the API: `api_access`",
        "Upgrade", "Rollback", "Teardown", "Optional costs", "Alerts",
    ):  # fmt: skip
        assert heading in headings, heading
    assert headings.count("State") == 2  # the state bucket and backend, on each cloud
    for needed in (
        "roles/logging.logWriter",  # the build account writes its logs
        "cloudresourcemanager.googleapis.com",
        "iam.allowedPolicyMemberDomains",  # the org policy that refuses allUsers
        "import",  # the existing rules release
        "-backend-config=bucket=",
        "kms_deletion_window_days",
        "7 days",  # Cloud Tasks queue names
    ):
        assert needed in text, needed
