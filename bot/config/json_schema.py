"""JSON Schema validation without importing jsonschema for the schemas this project writes.

The configuration schema and the built-in tools' input schemas use a small set of draft 2020-12
keywords (types, properties, enums, bounds, lengths, patterns). `validator(schema)` compiles such
a schema into a `SubsetValidator`, which reports the same problems, in the same order and with
the same messages, as jsonschema's Draft202012Validator, at a fraction of the import cost (about
2 MiB and 30 modules a process would otherwise load at start-up) and of the time per check. A
schema using any other keyword ($ref, anyOf, …: custom and MCP tools may) gets jsonschema's
own validator, imported then. `check_schema` is the registration-time check, likewise.

    v = validator({"type": "object", "required": ["path"]})
    [p.message for p in v.iter_errors({})]   # ["'path' is a required property"]
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated",
                         "readOnly", "writeOnly", "format", "$schema"})
TYPES = {"object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
         "string": lambda v: isinstance(v, str), "null": lambda v: v is None,
         "boolean": lambda v: isinstance(v, bool),
         "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
         "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
         or (isinstance(v, float) and v.is_integer())}


class SchemaProblem(ValueError):
    """The schema itself is malformed (`message` says where and how)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass
class Problem:
    """One departure of an instance from the schema; the attributes of jsonschema's
    ValidationError that callers read."""

    message: str
    validator: str                 # the keyword that failed
    validator_value: Any
    instance: Any
    schema: dict[str, Any]
    path: deque[str | int] = field(default_factory=deque)

    @property
    def absolute_path(self) -> deque[str | int]:
        return self.path


def _is_schema(value: Any) -> bool:
    return isinstance(value, dict | bool)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _regex(value: Any) -> bool:
    try:
        re.compile(value)
    except (re.error, TypeError):
        return False
    return True


def _type_value(value: Any) -> bool:
    names = value if isinstance(value, list) else [value]
    return bool(names) and len(set(map(str, names))) == len(names) \
        and all(isinstance(n, str) and n in TYPES for n in names)


# keyword -> (is its value well formed, the subschemas it holds)
_SHAPES: dict[str, tuple[Callable[[Any], bool], Callable[[Any], list[Any]]]] = {
    "type": (_type_value, lambda v: []),
    "enum": (lambda v: isinstance(v, list), lambda v: []),
    "const": (lambda v: True, lambda v: []),
    "properties": (lambda v: isinstance(v, dict) and all(map(_is_schema, v.values())),
                   lambda v: list(v.values())),
    "patternProperties": (lambda v: isinstance(v, dict) and all(map(_regex, v))
                          and all(map(_is_schema, v.values())), lambda v: list(v.values())),
    "additionalProperties": (_is_schema, lambda v: [v]),
    "propertyNames": (_is_schema, lambda v: [v]),
    "items": (_is_schema, lambda v: [v]),
    "required": (lambda v: isinstance(v, list) and all(isinstance(k, str) for k in v)
                 and len(set(v)) == len(v), lambda v: []),
    "uniqueItems": (lambda v: isinstance(v, bool), lambda v: []),
    "pattern": (lambda v: isinstance(v, str) and _regex(v), lambda v: []),
    **{k: (_count, lambda v: []) for k in ("minLength", "maxLength", "minItems", "maxItems",
                                           "minProperties", "maxProperties")},
    **{k: (_number, lambda v: []) for k in ("minimum", "maximum", "exclusiveMinimum",
                                            "exclusiveMaximum")},
}


def in_subset(schema: Any) -> bool:
    """Does the schema use only keywords this module implements (recursively)?"""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    for key, value in schema.items():
        if key in ANNOTATIONS:
            continue
        shape = _SHAPES.get(key)
        if shape is None or not shape[0](value) or not all(map(in_subset, shape[1](value))):
            return False
    return True


def check_schema(schema: Any) -> None:
    """Raise SchemaProblem when `schema` is not a valid draft 2020-12 schema."""
    if in_subset(schema):
        return
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SchemaProblem(exc.message) from exc


def validator(schema: dict[str, Any]) -> Any:
    """A validator with `iter_errors(instance)` and `is_valid(instance)`: ours for a schema in
    the subset, jsonschema's Draft202012Validator otherwise."""
    if in_subset(schema):
        return SubsetValidator(schema)
    import jsonschema

    return jsonschema.Draft202012Validator(schema)


def _equal(one: Any, two: Any) -> bool:
    """JSON equality: true is not 1, and containers compare element by element."""
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(_equal(one[k], two[k]) for k in one)
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(map(_equal, one, two))
    if isinstance(one, dict | list | str) or isinstance(two, dict | list | str):
        return type(one) is type(two) and one == two
    return bool(one == two)


def _joined(values: list[Any]) -> str:
    return ", ".join(repr(v) for v in values)


class SubsetValidator:
    """Draft 2020-12 validation for schemas within the subset (see the module docstring)."""

    def __init__(self, schema: dict[str, Any]):
        self.schema = schema

    def is_valid(self, instance: Any) -> bool:
        return next(self.iter_errors(instance), None) is None

    def iter_errors(self, instance: Any) -> Iterator[Problem]:
        return _errors(self.schema, instance, deque())


def _errors(schema: Any, instance: Any, path: deque[str | int]) -> Iterator[Problem]:
    if schema is True:
        return
    if schema is False:
        yield Problem(f"False schema does not allow {instance!r}", "false", False, instance, {},
                      deque(path))
        return
    for key, value in schema.items():
        check = _CHECKS.get(key)
        if check is None:
            continue
        for found in check(value, instance, schema, path):
            if isinstance(found, str):
                yield Problem(found, key, value, instance, schema, deque(path))
            else:
                yield found


def _descend(schema: Any, instance: Any, path: deque[str | int],
             step: str | int) -> Iterator[Problem]:
    path.append(step)
    try:
        yield from _errors(schema, instance, path)
    finally:
        path.pop()


def _type(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[str]:
    names = value if isinstance(value, list) else [value]
    if not any(TYPES[n](instance) for n in names):
        yield f"{instance!r} is not of type {_joined(names)}"


def _enum(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[str]:
    if not any(_equal(each, instance) for each in value):
        yield f"{instance!r} is not one of {value!r}"


def _const(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[str]:
    if not _equal(instance, value):
        yield f"{value!r} was expected"


def _properties(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[Any]:
    if isinstance(instance, dict):
        for name, subschema in value.items():
            if name in instance:
                yield from _descend(subschema, instance[name], path, name)


def _pattern_properties(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[Any]:
    if isinstance(instance, dict):
        for pattern, subschema in value.items():
            for name, item in instance.items():
                if re.search(pattern, name):
                    yield from _descend(subschema, item, path, name)


def _extras(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = "|".join(schema.get("patternProperties", {}))
    return [k for k in instance if k not in properties and not (patterns and re.search(patterns, k))]


def _additional(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[Any]:
    if not isinstance(instance, dict):
        return
    extras = _extras(instance, schema)
    if isinstance(value, dict):
        for extra in set(extras):   # jsonschema walks a set of them too
            yield from _descend(value, instance[extra], path, extra)
    elif not value and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            yield (f"{_joined(sorted(extras))} {verb} not match any of the regexes: "
                   f"{_joined(sorted(schema['patternProperties']))}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield f"Additional properties are not allowed ({_joined(sorted(extras))} {verb} unexpected)"


def _property_names(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[Any]:
    if isinstance(instance, dict):
        for name in instance:
            yield from _errors(value, name, path)


def _items(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[Any]:
    if not isinstance(instance, list) or not instance:
        return
    if value is False:
        rest = instance if len(instance) != 1 else instance[0]
        yield f"Expected at most 0 items but found {len(instance)} extra: {rest!r}"
        return
    for index, item in enumerate(instance):
        yield from _descend(value, item, path, index)


def _required(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[str]:
    if isinstance(instance, dict):
        for name in value:
            if name not in instance:
                yield f"{name!r} is a required property"


def _unique(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[str]:
    if value and isinstance(instance, list) and any(
            _equal(a, b) for i, a in enumerate(instance) for b in instance[i + 1:]):
        yield f"{instance!r} has non-unique elements"


def _pattern(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[str]:
    if isinstance(instance, str) and not re.search(value, instance):
        yield f"{instance!r} does not match {value!r}"


def _size(kind: str, most: bool) -> Callable[..., Iterator[str]]:
    """minLength/maxLength, minItems/maxItems, minProperties/maxProperties."""
    def check(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[str]:
        if not TYPES[kind](instance) or (len(instance) <= value if most else len(instance) >= value):
            return
        if most:
            yield f"{instance!r} " + ("is expected to be empty" if value == 0 else
                                      "has too many properties" if kind == "object" else
                                      "is too long")
        else:
            yield f"{instance!r} " + ("should be non-empty" if value == 1 else
                                      "does not have enough properties" if kind == "object" else
                                      "is too short")
    return check


def _bound(test: Callable[[Any, Any], bool], words: str) -> Callable[..., Iterator[str]]:
    def check(value: Any, instance: Any, schema: Any, path: Any) -> Iterator[str]:
        if TYPES["number"](instance) and test(instance, value):
            yield f"{instance!r} is {words} {value!r}"
    return check


_CHECKS: dict[str, Callable[..., Iterator[Any]]] = {
    "type": _type, "enum": _enum, "const": _const, "properties": _properties,
    "patternProperties": _pattern_properties, "additionalProperties": _additional,
    "propertyNames": _property_names, "items": _items, "required": _required,
    "uniqueItems": _unique, "pattern": _pattern,
    "minLength": _size("string", False), "maxLength": _size("string", True),
    "minItems": _size("array", False), "maxItems": _size("array", True),
    "minProperties": _size("object", False), "maxProperties": _size("object", True),
    "minimum": _bound(lambda i, v: i < v, "less than the minimum of"),
    "maximum": _bound(lambda i, v: i > v, "greater than the maximum of"),
    "exclusiveMinimum": _bound(lambda i, v: i <= v, "less than or equal to the minimum of"),
    "exclusiveMaximum": _bound(lambda i, v: i >= v, "greater than or equal to the maximum of"),
}
