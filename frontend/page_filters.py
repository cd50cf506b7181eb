"""A listing page's query filtered as the API filters it: the same FilterSet, and a bad or
unknown parameter, or one taking one value given twice, refused naming it (the history, Nodes
and jobs pages)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest, QueryDict
from rest_framework.exceptions import ValidationError

from controlplane.api.filter_backends import refuse_unknown_parameters
from controlplane.filtersets import ListFilterSet, refusals

#: The query parameters a listing page takes besides its filters.
PAGE_PARAMETERS = frozenset({"page"})


def query_refusals(query: QueryDict, filterset_class: type[ListFilterSet]) -> dict[str, list[str]]:
    """The errors naming each parameter of ``query`` outside the filterset's and the page's
    (`PAGE_PARAMETERS`), listing what the page takes, else each given more than once but those
    the filterset judges itself (a state may be given several times): {} for none."""
    try:
        refuse_unknown_parameters(SimpleNamespace(query_params=query),  # type: ignore[arg-type]
                                  set(filterset_class.base_filters) | PAGE_PARAMETERS, "page",
                                  judged_elsewhere=frozenset(filterset_class.base_filters))
    except ValidationError as exc:
        return {name: [str(m) for m in messages] for name, messages in exc.detail.items()}
    return {}


def filtered(request: HttpRequest, filterset_class: type[ListFilterSet], queryset: QuerySet[Any]
             ) -> tuple[ListFilterSet, QuerySet[Any] | None, dict[str, list[str]]]:
    """``queryset`` under the query's filters, or None and the errors naming each bad parameter
    (an unknown one too, as the API refuses it). A time without a zone is UTC, as the page's
    fields say (the API refuses one)."""
    filterset = filterset_class(request.GET, queryset=queryset, request=request, naive_times_are_utc=True)
    errors = query_refusals(request.GET, filterset_class)
    if errors:
        return filterset, None, errors
    if not filterset.is_valid():
        return filterset, None, {name: [message for message, _ in problems] for name, problems in refusals(filterset).items()}
    return filterset, filterset.qs, {}
