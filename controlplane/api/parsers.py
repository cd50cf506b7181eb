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

MAX_BODY_BYTES = 1024 * 1024


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        parser_context = parser_context or {}
        request = parser_context.get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise PayloadTooLarge(f"The request body is {declared} bytes; the limit is {MAX_BODY_BYTES}.")
        raw = stream.read(MAX_BODY_BYTES + 1)
        if len(raw) > MAX_BODY_BYTES:
            raise PayloadTooLarge(f"The request body exceeds {MAX_BODY_BYTES} bytes.")
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.decode(raw, encoding)
            return json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"Malformed JSON: {str(exc)[:200]}") from exc
