"""A reader for the block-style YAML subset deploy/ uses (compose.yaml, slack-manifest.yaml):
mappings, lists of scalars, lists of mappings, comments. PyYAML is not a dependency of the
project; anything outside this subset fails loudly."""

from __future__ import annotations

import re
from typing import Any


def _scalar(text: str) -> str | None:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text or None


def _lines(text: str) -> list[tuple[int, str]]:
    lines = []
    for raw in text.splitlines():
        content = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if content.strip():
            lines.append((len(content) - len(content.lstrip()), content.strip()))
    return lines


def _is_pair(content: str) -> bool:
    return bool(re.match(r"^[A-Za-z_][\w.-]*:(\s|$)", content))


def parse_yaml_subset(text: str) -> dict[str, Any]:
    lines = _lines(text)
    root: dict[str, Any] = {}
    stack: list[tuple[int, Any]] = [(-1, root)]
    for index, (indent, content) in enumerate(lines):
        while indent <= stack[-1][0]:
            stack.pop()
        parent = stack[-1][1]
        if content.startswith("- "):
            assert isinstance(parent, list), f"unexpected list item: {content}"
            item = content[2:].strip()
            if not _is_pair(item):
                parent.append(_scalar(item))
                continue
            mapping: dict[str, Any] = {}   # "- key: value", more keys of it indented below
            parent.append(mapping)
            stack.append((indent, mapping))
            parent, indent, content = mapping, indent + 2, item
        assert isinstance(parent, dict) and ":" in content, f"unsupported YAML line: {content}"
        key, _, value = content.partition(":")
        if value.strip():
            parent[_scalar(key)] = _scalar(value)
            continue
        following = lines[index + 1] if index + 1 < len(lines) else None
        if following is not None and following[0] > indent:
            child: Any = [] if following[1].startswith("- ") else {}
            parent[_scalar(key)] = child
            stack.append((indent, child))
        else:
            parent[_scalar(key)] = None
    return root
