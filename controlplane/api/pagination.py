"""Limit/offset pages with a `count`, so a CLI can say "50 of 1,234".

`limit` and `offset` are whole numbers or absent: anything else (`?limit=abc`, `?limit=-5`,
`?offset=1.5`) is a 400 naming the parameter, as any other bad query parameter is, rather than a
page of a size nobody asked for."""

from __future__ import annotations

import re

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

# PostgreSQL's OFFSET is a bigint; anything past a billion rows is past the end anyway.
MAX_OFFSET = 1_000_000_000
_WHOLE = re.compile(r"^[0-9]+$")


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 1000

    def _whole(self, request: Request, name: str, least: int) -> int | None:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return None
        if not _WHOLE.match(raw) or int(raw) < least:
            raise ValidationError({name: [f"'{raw[:40]}' is not a whole number of at least {least}."]})
        return int(raw)

    def get_limit(self, request: Request) -> int:
        limit = self._whole(request, self.limit_query_param, 1)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request: Request) -> int:
        offset = self._whole(request, self.offset_query_param, 0)
        return 0 if offset is None else min(offset, MAX_OFFSET)
