"""The JSON Schema subset reports what jsonschema reports, with its messages, and hands schemas
beyond its keywords to jsonschema."""

from __future__ import annotations

import jsonschema
import pytest

from bot.app import build_registry
from bot.config import settings as config_mod
from bot.config.json_schema import (
    SchemaProblem,
    SubsetValidator,
    check_schema,
    in_subset,
    validator,
)
from bot.config.schema import SCHEMA

TOOLISH = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z/]+$"},
        "count": {"type": "integer", "minimum": 1, "maximum": 5},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "mode": {"enum": ["a", 1, True, None]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2,
                 "uniqueItems": True, "minItems": 1},
        "env": {"type": "object", "additionalProperties": {"type": "string"},
                "maxProperties": 1, "propertyNames": {"pattern": "^[A-Z]+$"}},
        "either": {"type": ["string", "null"]},
        "fixed": {"const": [1, {"a": True}]},
        "grid": {"type": "object", "patternProperties": {"^x": {"type": "integer"}},
                 "additionalProperties": False, "minProperties": 1},
        "none": {"type": "array", "items": False},
    },
    "required": ["path", "count"],
    "additionalProperties": False,
}

INSTANCES = [
    {}, {"path": "a", "count": 1}, {"path": "", "count": 0}, {"path": "UPPER", "count": 9},
    {"path": "much/too/long", "count": 2.0}, {"path": "a", "count": True},
    {"path": "a", "count": 1, "ratio": 0}, {"path": "a", "count": 1, "ratio": 1},
    {"path": "a", "count": 1, "ratio": 0.5, "mode": 1.0}, {"path": "a", "count": 1, "mode": 1},
    {"path": "a", "count": 1, "mode": False}, {"path": "a", "count": 1, "mode": None},
    {"path": "a", "count": 1, "tags": []}, {"path": "a", "count": 1, "tags": ["x", "x", 3]},
    {"path": "a", "count": 1, "env": {"A": 1, "b": "x"}}, {"path": "a", "count": 1, "env": {}},
    {"path": "a", "count": 1, "either": None}, {"path": "a", "count": 1, "either": 3},
    {"path": "a", "count": 1, "fixed": [1, {"a": True}]},
    {"path": "a", "count": 1, "fixed": [1, {"a": 1}]},
    {"path": "a", "count": 1, "grid": {}}, {"path": "a", "count": 1, "grid": {"x1": "no", "y": 1}},
    {"path": "a", "count": 1, "grid": {"y": 1, "z": 2}}, {"path": "a", "count": 1, "none": [1]},
    {"path": "a", "count": 1, "none": [1, 2]},
    {"path": "a", "count": 1, "extra": 1, "more": 2}, [], "text", None,
]


def _seen(v, instance):
    return sorted((list(e.path), e.validator, e.message)
                  for e in v.iter_errors(instance))


@pytest.mark.parametrize("instance", INSTANCES, ids=range(len(INSTANCES)))
def test_each_problem_matches_jsonschemas_path_keyword_and_message(instance):
    mine = SubsetValidator(TOOLISH)
    theirs = jsonschema.Draft202012Validator(TOOLISH)
    assert _seen(mine, instance) == _seen(theirs, instance)
    assert mine.is_valid(instance) == theirs.is_valid(instance)


def test_a_false_subschema_refuses_any_value_at_its_own_path():
    problems = list(SubsetValidator({"properties": {"never": False}}).iter_errors({"never": 1}))
    assert [(list(p.path), p.message) for p in problems] == [
        (["never"], "False schema does not allow 1")]


def test_the_configuration_schema_and_every_builtin_tools_schema_keep_to_the_subset(tmp_path):
    cfg = config_mod.from_dict({"agent": {"workspace": str(tmp_path)}},
                               env={"HOME": str(tmp_path), "ANTHROPIC_API_KEY": "x"})
    schemas = {name: e.tool.meta.schema for name, e in build_registry(cfg).entries.items()}
    assert in_subset(SCHEMA)
    assert [name for name, schema in schemas.items() if not in_subset(schema)] == []
    for schema in schemas.values():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_a_schema_beyond_the_subset_is_validated_by_jsonschema():
    schema = {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"},
                                                              {"type": "integer"}]}}}
    checker = validator(schema)
    assert not isinstance(checker, SubsetValidator)
    assert checker.is_valid({"x": 1}) and not checker.is_valid({"x": 1.5})


@pytest.mark.parametrize("schema", [
    {"type": "strnig"}, {"required": "path"}, {"minLength": -1}, {"pattern": "("},
    {"properties": {"x": 3}}, {"anyOf": "no"}])
def test_a_malformed_schema_is_refused_as_jsonschema_would(schema):
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.Draft202012Validator.check_schema(schema)
    with pytest.raises(SchemaProblem):
        check_schema(schema)
