"""Limit/offset pages with a `count`, so a CLI can say "50 of 1,234".

`limit` and `offset` are whole numbers or absent: anything else (`?limit=abc`, `?limit=-5`,
`?offset=1.5`) is a 400 naming the parameter, as any other bad query parameter is, rather than a
page of a size nobody asked for."""

from __future__ import annotations

import re
from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

# PostgreSQL's OFFSET is a bigint; anything past a billion rows is past the end anyway.
MAX_OFFSET = 1_000_000_000
_WHOLE = re.compile(r"^[0-9]+\Z")


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 1000

    def _whole(self, request: Request, name: str, least: int) -> int | None:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return None
        digits = raw.lstrip("0") or "0"
        if not _WHOLE.match(raw) or (len(digits) <= 18 and int(digits) < least):
            raise ValidationError({name: [f"'{raw[:40]}' is not a whole number of at least {least}."]})
        # More digits than any limit or offset taken (and than Python reads into an int: 4,300).
        return int(digits) if len(digits) <= 18 else MAX_OFFSET

    def get_limit(self, request: Request) -> int:
        limit = self._whole(request, self.limit_query_param, 1)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request: Request) -> int:
        offset = self._whole(request, self.offset_query_param, 0)
        return 0 if offset is None else min(offset, MAX_OFFSET)


class RunsPagination(Pagination):
    """A job's runs (jobs/{id}/runs/): a page of them, and what all of the job's runs have cost
    (`total_cost_usd`, whatever the page: the sum of every run's `cost_usd`). The view sets
    `total_cost_usd` before it answers."""

    total_cost_usd: float = 0.0

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"count": self.count, "next": self.get_next_link(), "previous": self.get_previous_link(),
                         "total_cost_usd": self.total_cost_usd, "results": data})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        paged = super().get_paginated_response_schema(schema)
        paged["required"] = [*paged["required"], "total_cost_usd"]
        paged["properties"] = {
            **{k: v for k, v in paged["properties"].items() if k != "results"},
            "total_cost_usd": {"type": "number", "format": "double", "example": 41.37,
                               "description": "What all of the job's runs have cost, in US dollars: the sum of "
                                              "every run's cost_usd, on this page or not."},
            "results": paged["properties"]["results"],
        }
        return paged
