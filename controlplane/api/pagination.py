"""Limit/offset pages with a `count`, so a CLI can say "50 of 1,234".

`limit` and `offset` are whole numbers or absent: anything else (`?limit=abc`, `?limit=-5`,
`?offset=1.5`) is a 400 naming the parameter, as any other bad query parameter is, rather than a
page of a size nobody asked for. An `offset` is at most 2⁶³−1 (PostgreSQL's bigint, the bound of
every id), beyond it a 400 naming it; one past the list's end is an empty page whose `previous`
is the last real page (until 5 Dec an offset was capped at a billion and stepped back one page:
`?offset=99999999999999999999` linked `previous` to `offset=999999950`, a page not there)."""

from __future__ import annotations

import re
from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from controlplane.api.serializers.scheduling_loop import loop_state

# PostgreSQL's OFFSET is a bigint: the largest offset there can be.
MAX_OFFSET = 2**63 - 1
_WHOLE = re.compile(r"^[0-9]+\Z")


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 1000

    def _whole(self, request: Request, name: str, least: int) -> int | None:
        """The parameter as a whole number of at least `least`, capped at MAX_OFFSET + 1 (more
        digits than that are read no further: Python reads at most 4,300 into an int)."""
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return None
        digits = raw.lstrip("0") or "0"
        if not _WHOLE.match(raw) or (len(digits) <= 19 and int(digits) < least):
            raise ValidationError({name: [f"'{raw[:40]}' is not a whole number of at least {least}."]})
        return min(int(digits), MAX_OFFSET + 1) if len(digits) <= 19 else MAX_OFFSET + 1

    def get_limit(self, request: Request) -> int:
        limit = self._whole(request, self.limit_query_param, 1)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request: Request) -> int:
        offset = self._whole(request, self.offset_query_param, 0)
        if offset is not None and offset > MAX_OFFSET:
            raw = request.query_params[self.offset_query_param]
            raise ValidationError({self.offset_query_param: [
                f"'{raw[:40]}' is beyond the largest offset, {MAX_OFFSET} (2⁶³−1): "
                f"give a whole number from 0 to {MAX_OFFSET}."]})
        return 0 if offset is None else offset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        """DRF's, with the bounds said: `limit` 1–1,000, `offset` 0–2⁶³−1."""
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.offset_query_param:
                parameter["schema"] = {**parameter["schema"], "minimum": 0, "maximum": MAX_OFFSET}
            elif parameter["name"] == self.limit_query_param:
                parameter["schema"] = {**parameter["schema"], "minimum": 1}
        return parameters

    def get_previous_link(self) -> str | None:
        """As DRF's, but from past the end (an empty page) the last real page: `offset` =
        count − limit, or the first page when the list is shorter than a page."""
        if self.offset <= 0 or self.offset < self.count:
            return super().get_previous_link()
        url = replace_query_param(self.request.build_absolute_uri(), self.limit_query_param, self.limit)
        last = max(0, self.count - self.limit)
        return replace_query_param(url, self.offset_query_param, last) if last else remove_query_param(
            url, self.offset_query_param)


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


class JobsPagination(Pagination):
    """The jobs list (jobs/): a page of jobs, and the scheduling loop's state as /healthz says it
    (`loop`, one query): a waiting job's reason, place and ETA are the last cycle's word, so a
    stalled loop's are that old and none of them starts (`qm list` says so)."""

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"count": self.count, "next": self.get_next_link(), "previous": self.get_previous_link(),
                         "loop": loop_state(), "results": data})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        paged = super().get_paginated_response_schema(schema)
        paged["required"] = [*paged["required"], "loop"]
        paged["properties"] = {
            **{k: v for k, v in paged["properties"].items() if k != "results"},
            "loop": {"type": "object", "description": "The scheduling loop, as /healthz says it (last_cycle_at, "
                                                      "last_cycle_age_s, stalled, stalled_after_s): a waiting job's "
                                                      "reason, place and ETA are as of its last cycle."},
            "results": paged["properties"]["results"],
        }
        return paged
