"""Limit/offset pages with a `count`, so a CLI can say "50 of 1,234"."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

# PostgreSQL's OFFSET is a bigint; anything past a billion rows is past the end anyway.
MAX_OFFSET = 1_000_000_000


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 1000

    def get_offset(self, request: Request) -> int:
        return min(super().get_offset(request), MAX_OFFSET)
