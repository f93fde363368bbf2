"""A small evaluator of the Terraform expressions infra/ uses, over python-hcl2's parse.

There is no terraform binary in CI (and `terraform console` would need the providers, fetched
from the registry), so the environment Terraform gives each function is rendered here: variable
defaults, then the var files, then the locals and the attributes that read them. The language
covered is the part infra/ uses (references, templates, conditionals, comparisons, `for`
expressions, and the functions in `FUNCTIONS`); anything else fails loudly with the expression,
so a new construct in infra/ is noticed, never mis-rendered. A value known only after apply (a
function's URL, a service account's email) comes from the `resolve` callback, which the
rehearsal answers with the local stand-in of that resource.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hcl2

Node = tuple[Any, ...]


class HclError(ValueError):
    """An expression this evaluator does not cover, or one that fails (a missing variable)."""


# -- Parsed files ---------------------------------------------------------------------------------


def _blocks(path: Path) -> dict[str, list[dict[str, Any]]]:
    with path.open() as handle:
        parsed: dict[str, list[dict[str, Any]]] = hcl2.load(handle)
    return parsed


def load_dir(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """Every block of the `.tf` files of `directory`, raw (expressions kept as `${...}`)."""
    merged: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(directory.glob("*.tf")):
        for kind, blocks in _blocks(path).items():
            merged.setdefault(kind, []).extend(blocks)
    return merged


def unquote(key: str) -> str:
    return key[1:-1] if len(key) >= 2 and key[0] == key[-1] == '"' else key


@dataclass
class Module:
    """One Terraform root module (infra/ or infra/aws) with its variables' values."""

    blocks: dict[str, list[dict[str, Any]]]
    variables: dict[str, Any] = field(default_factory=dict)
    resolve: Callable[[str], Any] | None = None
    _locals: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(
        cls,
        directory: Path,
        var_files: list[Path] = (),  # type: ignore[assignment]
        overrides: Mapping[str, Any] | None = None,
        resolve: Callable[[str], Any] | None = None,
    ) -> Module:
        """Defaults, then each var file in order, then `overrides` (the `-var` flags)."""
        module = cls(load_dir(directory), resolve=resolve)
        declared: dict[str, dict[str, Any]] = {}
        for block in module.blocks.get("variable", []):
            for name, body in block.items():
                declared[unquote(name)] = body
        values: dict[str, Any] = {}
        for name, body in declared.items():
            if "default" in body:
                values[name] = module.value(body["default"], {})
        for var_file in var_files:
            for name, raw in hcl2.load(var_file.open()).items():
                if name.startswith("__"):
                    continue
                if name not in declared:
                    raise HclError(f"{var_file}: {name} is not a variable of {directory}")
                values[name] = module.value(raw, {})
        for name, given in (overrides or {}).items():
            if name not in declared:
                raise HclError(f"-var {name}: not a variable of {directory}")
            values[name] = given
        module.variables = values
        return module

    def missing_variables(self) -> list[str]:
        declared = {unquote(n) for b in self.blocks.get("variable", []) for n in b}
        return sorted(declared - set(self.variables))

    def raw_local(self, name: str) -> Any:
        for block in self.blocks.get("locals", []):
            if name in block:
                return block[name]
        raise HclError(f"local.{name} is not defined")

    def local(self, name: str) -> Any:
        if name not in self._locals:
            self._locals[name] = self.value(self.raw_local(name), {})
        return self._locals[name]

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        """name -> body of every `resource "kind"`."""
        return self._named("resource", kind)

    def data(self, kind: str) -> dict[str, dict[str, Any]]:
        """name -> body of every `data "kind"`."""
        return self._named("data", kind)

    def _named(self, block_type: str, kind: str) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for block in self.blocks.get(block_type, []):
            for block_kind, named in block.items():
                if unquote(block_kind) == kind:
                    found.update({unquote(name): body for name, body in named.items()})
        return found

    # -- values and expressions --

    def value(self, raw: Any, scope: Mapping[str, Any]) -> Any:
        """A python-hcl2 value evaluated: maps and lists member by member, strings as HCL."""
        if isinstance(raw, dict):
            return {
                unquote(k): self.value(v, scope)
                for k, v in raw.items()
                if k not in ("__is_block__", "__comments__")
            }
        if isinstance(raw, list):
            return [self.value(v, scope) for v in raw]
        if isinstance(raw, str):
            if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
                return self.evaluate(("template", raw[1:-1]), scope)
            if raw.startswith("${") and raw.endswith("}"):
                return self.expression(raw[2:-1], scope)
            return raw
        return raw

    def expression(self, text: str, scope: Mapping[str, Any]) -> Any:
        try:
            return self.evaluate(Parser(text).parse(), scope)
        except HclError as exc:
            raise HclError(f"{exc}\n  in: {text}") from None

    def evaluate(self, node: Node, scope: Mapping[str, Any]) -> Any:
        kind = node[0]
        if kind == "lit":
            return node[1]
        if kind == "template":
            parts = list(_template_parts(node[1]))
            if len(parts) == 1 and parts[0][0] == "expr":
                return self.expression(parts[0][1], scope)
            return "".join(
                _to_string(self.expression(text, scope)) if what == "expr" else _unescape(text)
                for what, text in parts
            )
        if kind == "ref":
            return self.reference(node[1], node[2], scope)
        if kind == "tuple":
            return [self.evaluate(item, scope) for item in node[1]]
        if kind == "object":
            return {_key(self.evaluate(k, scope)): self.evaluate(v, scope) for k, v in node[1]}
        if kind == "cond":
            return self.evaluate(
                node[2] if _truthy(self.evaluate(node[1], scope)) else node[3], scope
            )
        if kind == "binop":
            return _binop(node[1], self.evaluate(node[2], scope), self.evaluate(node[3], scope))
        if kind == "not":
            return not _truthy(self.evaluate(node[1], scope))
        if kind == "neg":
            return -self.evaluate(node[1], scope)
        if kind == "call":
            args = [self.evaluate(a, scope) for a in node[2]]
            if node[3]:  # f(list...): the last argument's elements become arguments
                args = [*args[:-1], *args[-1]]
            function = FUNCTIONS.get(node[1])
            if function is None:
                raise HclError(f"function {node[1]}() is not covered")
            return function(*args)
        if kind == "for":
            return self.for_expression(node, scope)
        if kind == "index":
            collection, index = self.evaluate(node[1], scope), self.evaluate(node[2], scope)
            return collection[_key(index) if isinstance(collection, dict) else int(index)]
        raise HclError(f"node {kind} is not covered")

    def for_expression(self, node: Node, scope: Mapping[str, Any]) -> Any:
        _, shape, names, collection, key_expr, value_expr, condition = node
        items = self.evaluate(collection, scope)
        pairs: Iterator[tuple[Any, Any]] = (
            iter(sorted(items.items())) if isinstance(items, dict) else enumerate(items)
        )
        out_list: list[Any] = []
        out_map: dict[str, Any] = {}
        for key, val in pairs:
            inner = dict(scope)
            if len(names) == 2:
                inner[names[0]], inner[names[1]] = key, val
            else:
                inner[names[0]] = val
            if condition is not None and not _truthy(self.evaluate(condition, inner)):
                continue
            if shape == "tuple":
                out_list.append(self.evaluate(value_expr, inner))
            else:
                out_map[_key(self.evaluate(key_expr, inner))] = self.evaluate(value_expr, inner)
        return out_list if shape == "tuple" else out_map

    def reference(self, root: str, path: list[Any], scope: Mapping[str, Any]) -> Any:
        if root in scope:
            value = scope[root]
            rest = path
        elif root == "var":
            name = path[0]
            if name not in self.variables:
                raise HclError(f"var.{name} has no value (required, and not given)")
            value, rest = self.variables[name], path[1:]
        elif root == "local":
            value, rest = self.local(path[0]), path[1:]
        else:
            text = root + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
            if self.resolve is None:
                raise HclError(f"{text} is known only after apply")
            return self.resolve(text)
        for step in rest:
            try:
                value = value[step]
            except (KeyError, IndexError, TypeError):
                raise HclError(f"{root}.{path}: no {step!r}") from None
        return value


# -- Functions ----------------------------------------------------------------------------------


def _to_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float | str):
        return str(value)
    raise HclError(f"cannot convert {value!r} to a string")


def _key(value: Any) -> str:
    return _to_string(value)


def _truthy(value: Any) -> bool:
    if not isinstance(value, bool):
        raise HclError(f"a condition must be a bool, got {value!r}")
    return value


def _merge(*maps: Mapping[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for item in maps:
        if item is None:
            continue
        merged.update(item)
    return merged


def _binop(op: str, left: Any, right: Any) -> Any:
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    if op == "&&":
        return _truthy(left) and _truthy(right)
    if op == "||":
        return _truthy(left) or _truthy(right)
    table: dict[str, Callable[[Any, Any], Any]] = {
        "<": lambda a, b: a < b,
        ">": lambda a, b: a > b,
        "<=": lambda a, b: a <= b,
        ">=": lambda a, b: a >= b,
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
        "/": lambda a, b: a / b,
    }
    return table[op](left, right)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "merge": _merge,
    "jsonencode": lambda v: json.dumps(v, separators=(",", ":"), sort_keys=isinstance(v, dict)),
    "tostring": _to_string,
    "tonumber": float,
    "sort": lambda v: sorted(v),
    "keys": lambda m: sorted(m),
    "values": lambda m: [m[k] for k in sorted(m)],
    "upper": lambda s: s.upper(),
    "lower": lambda s: s.lower(),
    "replace": lambda s, a, b: s.replace(a, b),
    "contains": lambda c, v: v in c,
    "length": len,
    "lookup": lambda m, k, default=None: m.get(k, default),
    "trimprefix": lambda s, p: s[len(p) :] if s.startswith(p) else s,
    "toset": lambda v: sorted(set(v)),
    "tolist": list,
    "concat": lambda *ls: [x for item in ls for x in item],
    "coalesce": lambda *vs: next(v for v in vs if v is not None and v != ""),
    "distinct": lambda v: list(dict.fromkeys(v)),
    "setproduct": lambda a, b: [[x, y] for x in a for y in b],
    "sum": sum,
    "alltrue": lambda v: all(v),
    "anytrue": lambda v: any(v),
    "min": min,
    "max": max,
}


# -- Templates ------------------------------------------------------------------------------------


def _scan_interpolation(text: str, start: int) -> int:
    """Index just past the `}` closing the `${` at `start`, over nested strings and braces."""
    depth, i = 0, start + 2
    while i < len(text):
        char = text[i]
        if char == '"':
            i = _scan_string(text, i)
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            if depth == 0:
                return i + 1
            depth -= 1
        i += 1
    raise HclError(f"unclosed interpolation in {text!r}")


def _scan_string(text: str, start: int) -> int:
    """Index just past the `"` closing the string opened at `start`."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text.startswith("${", i):
            i = _scan_interpolation(text, i)
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    raise HclError(f"unclosed string in {text!r}")


def _template_parts(text: str) -> Iterator[tuple[str, str]]:
    i, literal = 0, []
    while i < len(text):
        if text.startswith("$${", i):
            literal.append("${")
            i += 3
        elif text.startswith("${", i):
            if literal:
                yield "text", "".join(literal)
                literal = []
            end = _scan_interpolation(text, i)
            yield "expr", text[i + 2 : end - 1]
            i = end
        elif text[i] == "\\":
            literal.append(text[i : i + 2])
            i += 2
        else:
            literal.append(text[i])
            i += 1
    if literal or not text:
        yield "text", "".join(literal)


def _unescape(text: str) -> str:
    return (
        text.encode("latin-1", "backslashreplace").decode("unicode_escape")
        if "\\" in text
        else text
    )


# -- The parser -----------------------------------------------------------------------------------

TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d+)?)|(?P<ident>[A-Za-z_][A-Za-z0-9_-]*)"
    r"|(?P<op>\.\.\.|=>|==|!=|>=|<=|&&|\|\||[?:,()\[\]{}.=!<>+\-*/%]))"
)


class Parser:
    """Recursive descent over one expression (precedence as in HCL's spec)."""

    def __init__(self, text: str) -> None:
        self.tokens = list(self._tokens(text))
        self.pos = 0
        self.text = text

    @staticmethod
    def _tokens(text: str) -> Iterator[tuple[str, str]]:
        i = 0
        while i < len(text):
            if text[i].isspace():
                i += 1
                continue
            if text[i] == '"':
                end = _scan_string(text, i)
                yield "string", text[i + 1 : end - 1]
                i = end
                continue
            match = TOKEN.match(text, i)
            if match is None or match.end() == i:
                raise HclError(f"cannot read {text[i : i + 20]!r}")
            kind = match.lastgroup or "op"
            yield kind, match.group(kind)
            i = match.end()

    def peek(self, offset: int = 0) -> tuple[str, str]:
        index = self.pos + offset
        return self.tokens[index] if index < len(self.tokens) else ("end", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if value is not None and token[1] != value:
            raise HclError(f"expected {value!r}, found {token[1]!r}")
        self.pos += 1
        return token

    def accept(self, value: str) -> bool:
        if self.peek()[1] == value and self.peek()[0] in ("op", "ident"):
            self.pos += 1
            return True
        return False

    def parse(self) -> Node:
        node = self.expr()
        if self.peek()[0] != "end":
            raise HclError(f"unexpected {self.peek()[1]!r}")
        return node

    def expr(self) -> Node:
        condition = self.binary(0)
        if self.accept("?"):
            yes = self.expr()
            self.take(":")
            no = self.expr()
            return ("cond", condition, yes, no)
        return condition

    LEVELS = (("||",), ("&&",), ("==", "!="), ("<", ">", "<=", ">="), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> Node:
        if level == len(self.LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in self.LEVELS[level]:
            op = self.take()[1]
            node = ("binop", op, node, self.binary(level + 1))
        return node

    def unary(self) -> Node:
        if self.accept("!"):
            return ("not", self.unary())
        if self.accept("-"):
            return ("neg", self.unary())
        return self.postfix()

    def postfix(self) -> Node:
        node = self.primary()
        while True:
            if self.accept("."):
                kind, value = self.take()
                step: Any = int(value) if kind == "number" else value
                node = self._extend(node, step)
            elif self.peek()[1] == "[" and self.peek()[0] == "op":
                self.take("[")
                if self.accept("*"):
                    raise HclError("splat expressions are not covered")
                index = self.expr()
                self.take("]")
                if index[0] == "template" and "${" not in index[1]:
                    index = ("lit", _unescape(index[1]))  # a quoted key: local.names["api"]
                if index[0] != "lit":
                    node = ("index", node, index)  # local.names[each.key]: at evaluation
                    continue
                node = self._extend(node, index[1])
            else:
                return node

    @staticmethod
    def _extend(node: Node, step: Any) -> Node:
        if node[0] != "ref":
            raise HclError("attribute access is covered on references only")
        return ("ref", node[1], [*node[2], step])

    def primary(self) -> Node:
        kind, value = self.take()
        if kind == "number":
            return ("lit", float(value) if "." in value else int(value))
        if kind == "string":
            return ("template", value)
        if kind == "ident":
            if value in ("true", "false"):
                return ("lit", value == "true")
            if value == "null":
                return ("lit", None)
            if self.peek()[1] == "(":
                return self.call(value)
            return ("ref", value, [])
        if value == "(":
            node = self.expr()
            self.take(")")
            return node
        if value == "[":
            return self.tuple()
        if value == "{":
            return self.object()
        raise HclError(f"unexpected {value!r}")

    def call(self, name: str) -> Node:
        self.take("(")
        args: list[Node] = []
        expand = False
        while not self.accept(")"):
            args.append(self.expr())
            if self.accept("..."):
                expand = True
            if not self.accept(","):
                self.take(")")
                break
        return ("call", name, args, expand)

    def for_head(self) -> tuple[list[str], Node]:
        self.take("for")
        names = [self.take()[1]]
        if self.accept(","):
            names.append(self.take()[1])
        self.take("in")
        collection = self.expr()
        self.take(":")
        return names, collection

    def tuple(self) -> Node:
        if self.peek()[1] == "for":
            names, collection = self.for_head()
            value = self.expr()
            condition = self.expr() if self.accept("if") else None
            self.take("]")
            return ("for", "tuple", names, collection, None, value, condition)
        items: list[Node] = []
        while not self.accept("]"):
            items.append(self.expr())
            if not self.accept(","):
                self.take("]")
                break
        return ("tuple", items)

    def object(self) -> Node:
        if self.peek()[1] == "for":
            names, collection = self.for_head()
            key_expr = self.expr()
            self.take("=>")
            value = self.expr()
            self.accept("...")
            condition = self.expr() if self.accept("if") else None
            self.take("}")
            return ("for", "object", names, collection, key_expr, value, condition)
        items: list[tuple[Node, Node]] = []
        while not self.accept("}"):
            key_kind, key_text = self.peek()
            if key_kind == "ident" and self.peek(1)[1] in ("=", ":"):
                self.take()
                key: Node = ("lit", key_text)
            else:
                key = self.expr()
            if not self.accept("="):
                self.take(":")
            items.append((key, self.expr()))
            self.accept(",")
        return ("object", items)
