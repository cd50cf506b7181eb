"""The API's filter backend: django-filter's, plus two rules of ours.

A query parameter a filtered list does not know is a 400 naming it. django-filter ignores
unknown parameters, so `GET /api/v1/jobs/?tema=vision` (a typo for `team`) answered every job
in scope: a script that lists then cancels would act on all of them.

A parameter taking one value given more than once is a 400 naming it and how many times it was
given: the last one was read and the others dropped, so `nodes/?pool=a100&pool=h100` listed
h100's nodes as if a100 had not been asked. A filter's repeat the filterset refuses
(filtersets.ListFilterSet, also for the pages); the rest here (`limit`, `offset`, `format`,
a page's `page`, and every parameter of an endpoint that is no filtered list)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend, FilterSet
from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.request import Request

from controlplane.filtersets import given_more_than_once, refusals

#: Parameters every list takes besides its filters: pagination and the format override.
LIST_PARAMETERS = frozenset({"limit", "offset", "format"})


def refuse_unknown_parameters(request: Request, takes: set[str] | frozenset[str], what: str = "endpoint",
                              judged_elsewhere: frozenset[str] = frozenset()) -> None:
    """A 400 naming each query parameter outside `takes`, and listing what this `what` takes;
    then one naming each given more than once (refuse_repeated_parameters), but those of
    `judged_elsewhere` (a filterset's, which judges its own)."""
    unknown = sorted(set(request.query_params) - takes)
    if unknown:
        listed = ", ".join(sorted(takes))
        raise ValidationError({
            name[:40]: [f"Unknown query parameter; this {what} takes: {listed}."] for name in unknown[:10]
        })
    refuse_repeated_parameters(request, judged_elsewhere)


def refuse_repeated_parameters(request: Request, judged_elsewhere: frozenset[str] = frozenset()) -> None:
    """A 400 naming each query parameter given more than once, outside `judged_elsewhere`."""
    query = request.query_params
    repeated = {name: len(query.getlist(name)) for name in query
                if name not in judged_elsewhere and len(query.getlist(name)) > 1}
    if repeated:
        raise ValidationError({name[:40]: [ErrorDetail(given_more_than_once(times), code="given_more_than_once")]
                               for name, times in sorted(repeated.items())[:10]})


def filters_refused(filterset: FilterSet) -> ValidationError:
    """The 400 of a bound, invalid filterset, each parameter's problems as `refusals` says them
    (a choice's refusal lists the choices): the lists' and every view that reads a filterset
    itself (jobs/history.csv, whose `?state=running` said Django's "Select a valid choice."
    until 7 Dec)."""
    return ValidationError({name: [ErrorDetail(message, code=code) for message, code in problems]
                            for name, problems in refusals(filterset).items()})


class StrictFilterBackend(DjangoFilterBackend):
    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> QuerySet[Any]:
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is not None:
            filtered_by = frozenset(filterset_class.base_filters)
            refuse_unknown_parameters(request, filtered_by | LIST_PARAMETERS, "list", judged_elsewhere=filtered_by)
        filterset = self.get_filterset(request, queryset, view)
        if filterset is None:
            return queryset
        if not filterset.is_valid() and self.raise_exception:
            raise filters_refused(filterset)
        return filterset.qs  # type: ignore[no-any-return]
