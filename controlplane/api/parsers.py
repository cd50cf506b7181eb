"""JSON bodies only, and bounded: a body larger than MAX_BODY_BYTES is refused (413) before it
is parsed, so nobody can make a worker decode a gigabyte. A job array is one small request
whatever its size, so the bound never limits real use."""

from __future__ import annotations

import codecs
import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from controlplane.api.errors import PayloadTooLarge
from controlplane.services.given_once import given_twice
from controlplane.services.whole_numbers import is_whole_number

MAX_BODY_BYTES = 1024 * 1024


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object giving one key twice is refused: Python's json keeps the last silently, where
    another reader of the same body (a proxy, an audit log) may take the first (RFC 8259 leaves
    it to each), so `{"gpus": 1, "gpus": 64}` would queue a job nobody reviewed."""
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(given_twice(f"the key {key[:64]!r}", "key", where=" in one object"))
            seen.add(key)
    return obj


class BoundedJSONParser(JSONParser):
    #: The most a body may hold; more is a 413 before any of it is decoded.
    max_body_bytes = MAX_BODY_BYTES

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        parser_context = parser_context or {}
        request = parser_context.get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        limit = self.max_body_bytes
        if declared and is_whole_number(declared, signed=False) and int(declared) > limit:
            raise PayloadTooLarge(f"The request body is {declared} bytes; the limit is {limit}.")
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise PayloadTooLarge(f"The request body exceeds {limit} bytes.")
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.decode(raw, encoding)
            return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_refuse_duplicate_keys)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"Malformed JSON: {str(exc)[:200]}") from exc
