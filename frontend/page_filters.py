"""A listing page's query filtered as the API filters it: the same FilterSet, and a bad or
unknown parameter, or one taking one value given twice, refused naming it (the history and
Nodes pages)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest
from rest_framework.exceptions import ValidationError

from controlplane.api.filter_backends import refuse_unknown_parameters
from controlplane.filtersets import ListFilterSet, refusals

#: The query parameters a listing page takes besides its filters.
PAGE_PARAMETERS = frozenset({"page"})


def filtered(request: HttpRequest, filterset_class: type[ListFilterSet], queryset: QuerySet[Any]
             ) -> tuple[ListFilterSet, QuerySet[Any] | None, dict[str, list[str]]]:
    """``queryset`` under the query's filters, or None and the errors naming each bad parameter
    (an unknown one too, as the API refuses it). A time without a zone is UTC, as the page's
    fields say (the API refuses one)."""
    filterset = filterset_class(request.GET, queryset=queryset, request=request, naive_times_are_utc=True)
    try:
        refuse_unknown_parameters(SimpleNamespace(query_params=request.GET),  # type: ignore[arg-type]
                                  set(filterset_class.base_filters) | PAGE_PARAMETERS, "page",
                                  judged_elsewhere=frozenset(filterset_class.base_filters))
    except ValidationError as exc:
        return filterset, None, {name: [str(m) for m in messages] for name, messages in exc.detail.items()}
    if not filterset.is_valid():
        return filterset, None, {name: [message for message, _ in problems] for name, problems in refusals(filterset).items()}
    return filterset, filterset.qs, {}
