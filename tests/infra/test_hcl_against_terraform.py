"""The project's HCL evaluator (scripts/fanfuse_deploy/hcl.py) renders what Terraform renders.

tests/infra/test_contract.py and the rehearsal trust the environment the evaluator renders for
each function from infra/ and a var file. Here Terraform itself evaluates the same expressions on
the same var files, and the two renderings must be equal, name for name and value for value.

How, without the providers (no google provider can be installed here, and `terraform console`
or `plan` of the real module needs every provider it names): the module's `variable` and
`locals` blocks, and each function's environment expression, are copied verbatim (cut out of the
`.tf` text, not re-printed from a parse) into a module of their own that names no provider. A
reference to a resource or a data source becomes a reference to a local holding its stand-in:
the value known only after apply that the evaluator is given (scripts/fanfuse_deploy/render.py's
stand-ins, the same objects), or the attribute as written in infra/ (the evaluator's fallback).
`each.key` of the Lambda's `for_each` is the function's name, and a map(string) attribute's
conversion is `tostring` of each value, as the providers' schemas convert it. Terraform then
plans that module with the same var files and `-var` flags (`terraform plan`, `show -json`: the
outputs, nothing applied, no provider, no network).

Fails, never skips, when terraform is missing (the machine's is 1.11; CI installs none by itself,
see docs/deploy.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fanfuse_deploy import render

GCP_CASES = {"defaults": [], **{p.name: [p] for p in sorted(render.EXAMPLES.glob("gcp*.tfvars"))}}
AWS_CASES = {"defaults": [], **{p.name: [p] for p in sorted(render.EXAMPLES.glob("aws*.tfvars"))}}
TERRAFORM = os.environ.get("FANFUSE_TERRAFORM", "terraform")
MIRROR = Path(os.environ.get("FANFUSE_TF_PLUGINS", "/opt/tf-plugins"))

# -- Cutting the text: top-level blocks, a block's items, an expression's end ---------------------

_OPEN = {"{": "}", "[": "]", "(": ")"}
_HEREDOC = re.compile(r"<<-?([A-Za-z_][A-Za-z0-9_]*)\n")


def _skip_comment(text: str, i: int) -> int:
    """The index after the comment at `i`, or `i` when there is none."""
    if text.startswith(("#", "//"), i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text.startswith("/*", i):
        return text.index("*/", i) + 2
    return i


def _after_string(text: str, i: int) -> int:
    """`text[i]` opens a quoted template: the index after its closing quote."""
    i += 1
    while text[i] != '"':
        if text[i] == "\\":
            i += 2
        elif text.startswith(("${", "%{"), i):
            i = _after_group(text, i + 1)
        else:
            i += 1
    return i + 1


def _after_heredoc(text: str, i: int) -> int | None:
    found = _HEREDOC.match(text, i)
    if found is None:
        return None
    marker = found.group(1)
    end = re.compile(rf"^[ \t]*{marker}[ \t]*$", re.MULTILINE).search(text, found.end())
    assert end is not None, f"heredoc {marker} never ends"
    return end.end()


def _after_group(text: str, i: int) -> int:
    """`text[i]` opens a bracket: the index after the bracket that closes it."""
    closers = [_OPEN[text[i]]]
    i += 1
    while closers:
        skipped = _skip_comment(text, i)
        if skipped != i:
            i = skipped
            continue
        heredoc = _after_heredoc(text, i)
        if heredoc is not None:
            i = heredoc
            continue
        c = text[i]
        if c == '"':
            i = _after_string(text, i)
            continue
        if c in _OPEN:
            closers.append(_OPEN[c])
        elif c == closers[-1]:
            closers.pop()
        i += 1
    return i


def _after_expression(text: str, i: int) -> int:
    """The end of the expression that starts at `i`: its line's end outside any bracket."""
    while i < len(text) and text[i] != "\n":
        skipped = _skip_comment(text, i)
        if skipped != i:
            return i
        heredoc = _after_heredoc(text, i)
        if heredoc is not None:
            i = heredoc
        elif text[i] == '"':
            i = _after_string(text, i)
        elif text[i] in _OPEN:
            i = _after_group(text, i)
        else:
            i += 1
    return i


@dataclass
class Block:
    kind: str
    labels: list[str]
    text: str
    """The whole block, `kind "label" { ... }`."""
    body: str
    """Between its braces."""


@dataclass
class Body:
    attributes: dict[str, str] = field(default_factory=dict)
    """name -> the expression's text."""
    blocks: list[Block] = field(default_factory=list)


_WORD = re.compile(r'[A-Za-z_][A-Za-z0-9_-]*|"(?:[^"\\]|\\.)*"')


def items(text: str) -> Body:
    """The attributes and blocks of a body (or of a whole file)."""
    body = Body()
    i = 0
    while i < len(text):
        skipped = _skip_comment(text, i)
        if skipped != i:
            i = skipped
            continue
        if text[i].isspace():
            i += 1
            continue
        start = i
        words: list[str] = []
        while True:
            word = _WORD.match(text, i)
            assert word is not None, f"unexpected {text[i : i + 40]!r}"
            words.append(word.group(0).strip('"'))
            i = word.end()
            while text[i] in " \t":
                i += 1
            if text[i] in "={":
                break
        if text[i] == "=":
            end = _after_expression(text, i + 1)
            body.attributes[words[0]] = text[i + 1 : end].strip()
        else:
            end = _after_group(text, i)
            body.blocks.append(Block(words[0], words[1:], text[start:end], text[i + 1 : end - 1]))
        i = end
    return body


def module_text(directory: Path) -> Body:
    found = Body()
    for path in sorted(directory.glob("*.tf")):
        parsed = items(path.read_text())
        found.blocks += parsed.blocks
    return found


def nested(block: Block, *path: str) -> Iterator[Block]:
    """The blocks at `path` below `block` (`service_config`, then `dynamic`...)."""
    current = [block]
    for kind in path:
        current = [b for c in current for b in items(c.body).blocks if b.kind == kind]
    yield from current


# -- The provider-free module ---------------------------------------------------------------------


def _ref(kind: str, name: str, data: bool) -> str:
    return f"local.__{'d' if data else 'r'}_{kind}__{name}"


class Rewriter:
    """References to the module's resources and data sources, as references to stand-in locals;
    `used` records each one met with the accessors written after it."""

    def __init__(self, module: Body) -> None:
        self.resources = {
            (b.labels[0], b.labels[1]): b for b in module.blocks if b.kind == "resource"
        }
        self.data = {(b.labels[0], b.labels[1]): b for b in module.blocks if b.kind == "data"}
        self.used: dict[tuple[str, str, bool], set[str]] = {}
        self.pattern = re.compile(
            r"(?<![\w.])(data\.)?([a-z][a-z0-9_]*)\.([a-z0-9_]+)((?:\[[^\]]*\]|\.[a-z0-9_]+)*)"
        )

    def __call__(self, text: str) -> str:
        def swap(found: re.Match[str]) -> str:
            data, kind, name, rest = found.groups()
            known = self.data if data else self.resources
            if (kind, name) not in known:
                return found.group(0)
            self.used.setdefault((kind, name, bool(data)), set()).add(rest)
            return _ref(kind, name, bool(data)) + rest

        return self.pattern.sub(swap, text)


_STEP = re.compile(r'\[(\d+)\]|\["([^"]+)"\]|\.([a-z0-9_]+)')


def _set(tree: Any, steps: list[str | int], value: Any) -> Any:
    """`tree` with `value` at `steps` (created as lists for an int step, else objects)."""
    if not steps:
        return value
    step, rest = steps[0], steps[1:]
    if isinstance(step, int):
        tree = tree if isinstance(tree, list) else []
        while len(tree) <= step:
            tree.append({})
        tree[step] = _set(tree[step], rest, value)
        return tree
    tree = tree if isinstance(tree, dict) else {}
    tree[step] = _set(tree.get(step), rest, value)
    return tree


def _steps(accessors: str) -> list[str | int]:
    return [int(index) if index else key or attr for index, key, attr in _STEP.findall(accessors)]


def stand_in_locals(rewrite: Rewriter, stand_ins: Mapping[str, Any]) -> list[str]:
    """`__r_...`/`__d_...` locals: each referenced resource or data source as its stand-ins
    (render.py's, by reference text) or, as the evaluator falls back, its attributes as written
    in infra/ (rewritten in turn); a reference neither covers fails Terraform's plan, loudly."""
    lines: list[str] = []
    done: set[tuple[str, str, bool]] = set()
    while set(rewrite.used) - done:
        for kind, name, data in sorted(set(rewrite.used) - done):
            done.add((kind, name, data))
            prefix = f"{'data.' if data else ''}{kind}.{name}"
            tree: Any = None
            for text, value in stand_ins.items():
                if text == prefix or text.startswith((prefix + ".", prefix + "[")):
                    tree = _set(tree, _steps(text[len(prefix) :]), value)
            if tree is None:  # the attributes as written (the evaluator's Resolver fallback)
                block = (rewrite.data if data else rewrite.resources)[(kind, name)]
                written = items(block.body).attributes
                wanted = {s[0] for a in rewrite.used[(kind, name, data)] if (s := _steps(a))}
                attrs = {a: rewrite(written[a]) for a in sorted(map(str, wanted)) if a in written}
                value_text = "{ " + ", ".join(f"{a} = {e}" for a, e in attrs.items()) + " }"
            else:
                value_text = json.dumps(tree)
            lines.append(f"  __{'d' if data else 'r'}_{kind}__{name} = {value_text}")
    return lines


def as_strings(expression: str) -> str:
    """A map(string) attribute's value as the provider's schema converts it."""
    return f"{{ for k, v in ({expression}) : k => tostring(v) }}"


def gcp_environments(module: Body, rewrite: Rewriter) -> dict[str, str]:
    """Per function: its `environment_variables`, plus the secrets it mounts, each given the
    value test_contract.py gives the evaluator (`secret:<secret id>`)."""
    functions = {
        b.labels[1]: b for b in module.blocks if b.labels[:1] == ["google_cloudfunctions2_function"]
    }
    found = {}
    for target in render.GCP_FUNCTIONS:
        (service,) = nested(functions[target], "service_config")
        env = rewrite(items(service.body).attributes["environment_variables"])
        parts = [as_strings(env)]
        for dynamic in nested(service, "dynamic"):
            if dynamic.labels == ["secret_environment_variables"]:
                collection = rewrite(items(dynamic.body).attributes["for_each"])
                parts.append(
                    f'{{ for k, v in ({collection}) : k => "secret:${{local.secrets[k]}}" }}'
                )
        found[target] = f"merge({', '.join(parts)})"
    return found


def aws_environments(module: Body, rewrite: Rewriter) -> dict[str, str]:
    (function,) = [b for b in module.blocks if b.labels == ["aws_lambda_function", "fanfuse"]]
    (environment,) = nested(function, "environment")
    variables = rewrite(items(environment.body).attributes["variables"])
    return {
        name: as_strings(re.sub(r"\beach\.key\b", json.dumps(name), variables))
        for name in render.AWS_FUNCTIONS
    }


def needed_locals(module: Body, roots: Mapping[str, str], rewrite: Rewriter) -> list[str]:
    """The locals the environments read, directly or through other locals, verbatim
    (references rewritten): Terraform evaluates every local it is given, the evaluator only
    those it is asked for, so the others (IAM members, alert filters) stay out."""
    written = {
        name: expression
        for block in module.blocks
        if block.kind == "locals"
        for name, expression in items(block.body).attributes.items()
    }
    wanted = re.compile(r"(?<![\w.])local\.([A-Za-z_][A-Za-z0-9_]*)")
    todo = [name for text in roots.values() for name in wanted.findall(text)]
    kept: dict[str, str] = {}
    while todo:
        name = todo.pop()
        if name in kept or name not in written:
            continue
        kept[name] = rewrite(written[name])
        todo += wanted.findall(written[name])
    return [f"  {name} = {expression}" for name, expression in sorted(kept.items())]


def console_module(directory: Path, stand_ins: Mapping[str, Any], cloud: str) -> str:
    """The module Terraform plans: the variables and locals verbatim (references rewritten),
    the stand-ins, and one output per function: its environment."""
    module = module_text(directory)
    rewrite = Rewriter(module)
    environments = (gcp_environments if cloud == "gcp" else aws_environments)(module, rewrite)
    parts = [b.text for b in module.blocks if b.kind == "variable"]
    parts.append("locals {\n" + "\n".join(needed_locals(module, environments, rewrite)) + "\n}")
    parts.append("locals {\n" + "\n".join(stand_in_locals(rewrite, stand_ins)) + "\n}")
    parts += [
        f'output "{name}" {{\n  value = {expression}\n}}'
        for name, expression in environments.items()
    ]
    return "\n\n".join(parts) + "\n"


# -- Terraform ------------------------------------------------------------------------------------


def terraform(workdir: Path, *args: str) -> str:
    cli_config = workdir / "cli.tfrc"
    if not cli_config.exists():  # never a registry: the machine's mirror only
        cli_config.write_text(
            f'provider_installation {{\n  filesystem_mirror {{\n    path = "{MIRROR}"\n  }}\n}}\n'
        )
    env = {
        **os.environ,
        "TF_CLI_CONFIG_FILE": str(cli_config),
        "TF_IN_AUTOMATION": "1",
        "CHECKPOINT_DISABLE": "1",
    }
    done = subprocess.run(
        [TERRAFORM, *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"terraform {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def terraform_outputs(
    workdir: Path, text: str, var_files: list[Path], overrides: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "main.tf").write_text(text)
    terraform(workdir, "init", "-input=false", "-no-color")
    flags = [f"-var-file={f}" for f in var_files] + [f"-var={k}={v}" for k, v in overrides.items()]
    terraform(workdir, "plan", "-input=false", "-no-color", "-out=plan", *flags)
    shown = json.loads(terraform(workdir, "show", "-json", "plan"))
    outputs: dict[str, dict[str, Any]] = shown["planned_values"]["outputs"]
    return {name: output["value"] for name, output in outputs.items()}


def test_terraform_is_installed() -> None:
    assert shutil.which(TERRAFORM), (
        f"{TERRAFORM} not found: install terraform >= 1.6 (or set FANFUSE_TERRAFORM)"
    )
    version = json.loads(
        subprocess.run(
            [TERRAFORM, "version", "-json"], capture_output=True, text=True, check=True
        ).stdout
    )
    major, minor = map(int, version["terraform_version"].split(".")[:2])
    assert (major, minor) >= (1, 6), version


@pytest.mark.parametrize("case", GCP_CASES)
def test_gcp_environments_are_what_terraform_renders(case: str, tmp_path: Path) -> None:
    var_files = GCP_CASES[case]
    module = render.gcp_module(var_files)
    resolver = module.resolve
    assert isinstance(resolver, render.Resolver)
    secrets = {env: f"secret:{secret}" for env, secret in module.local("secrets").items()}
    ours = render.gcp_environments(module, secrets)
    text = console_module(render.INFRA, resolver.stand_ins, "gcp")
    overrides = {"project_id": "demo-fanfuse", "function_source_object": "fanfuse-rehearsal.zip"}
    theirs = terraform_outputs(tmp_path / "gcp", text, var_files, overrides)
    assert theirs == ours


@pytest.mark.parametrize("case", AWS_CASES)
def test_aws_environments_are_what_terraform_renders(case: str, tmp_path: Path) -> None:
    var_files = AWS_CASES[case]
    module = render.aws_module(var_files)
    resolver = module.resolve
    assert isinstance(resolver, render.Resolver)
    ours = render.aws_environments(module)
    text = console_module(render.AWS_INFRA, resolver.stand_ins, "aws")
    theirs = terraform_outputs(
        tmp_path / "aws", text, var_files, {"lambda_s3_key": "lambda/build.zip"}
    )
    assert theirs == ours


def test_the_cutter_keeps_strings_heredocs_and_comments_whole() -> None:
    text = (
        'locals {\n  a = "}{ ${jsonencode({x = "}"})}" # }\n  b = <<-EOT\n  }\n  EOT\n'
        "  c = [1,\n    2] // ]\n}\n"
        'resource "t" "n" {\n  /* } */ x = 1\n  inner {\n    y = "z"\n  }\n}\n'
    )
    body = items(text)
    assert [(b.kind, b.labels) for b in body.blocks] == [("locals", []), ("resource", ["t", "n"])]
    assert items(body.blocks[0].body).attributes == {
        "a": '"}{ ${jsonencode({x = "}"})}"',
        "b": "<<-EOT\n  }\n  EOT",
        "c": "[1,\n    2]",
    }
    resource = items(body.blocks[1].body)
    assert resource.attributes == {"x": "1"} and resource.blocks[0].kind == "inner"


def test_references_become_their_stand_ins() -> None:
    module = items('resource "aws_x" "main" {\n  name = "n-${var.p}"\n}\ndata "aws_y" "d" {}\n')
    rewrite = Rewriter(module)
    assert rewrite("${aws_x.main.name}/${data.aws_y.d[0].id} local.aws_x.main var.aws_x") == (
        "${local.__r_aws_x__main.name}/${local.__d_aws_y__d[0].id} local.aws_x.main var.aws_x"
    )
    lines = stand_in_locals(rewrite, {"data.aws_y.d[0].id": "i-1"})
    assert lines == [
        '  __r_aws_x__main = { name = "n-${var.p}" }',
        '  __d_aws_y__d = [{"id": "i-1"}]',
    ]
