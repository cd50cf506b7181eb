"""The API's filter backend: django-filter's, plus one rule of ours.

A query parameter a filtered list does not know is a 400 naming it. django-filter ignores
unknown parameters, so `GET /api/v1/jobs/?tema=vision` (a typo for `team`) answered every job
in scope: a script that lists then cancels would act on all of them."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

#: Parameters every list takes besides its filters: pagination and the format override.
LIST_PARAMETERS = frozenset({"limit", "offset", "format"})


class StrictFilterBackend(DjangoFilterBackend):
    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> QuerySet[Any]:
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is not None:
            filters = set(filterset_class.base_filters)
            unknown = sorted(set(request.query_params) - filters - LIST_PARAMETERS)
            if unknown:
                known = ", ".join(sorted(filters | LIST_PARAMETERS))
                raise ValidationError({
                    name[:40]: [f"Unknown query parameter; this list takes: {known}."] for name in unknown[:10]
                })
        return super().filter_queryset(request, queryset, view)  # type: ignore[no-any-return]
