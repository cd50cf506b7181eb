"""A listing page's query filtered as the API filters it: the same FilterSet, and a bad or
unknown parameter, or one taking one value given twice, refused naming it (the history, Nodes
and jobs pages)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Literal

from django.db.models import QuerySet
from django.http import HttpRequest, QueryDict
from rest_framework.exceptions import ValidationError

from controlplane.api.filter_backends import refuse_unknown_parameters
from controlplane.filtersets import ListFilterSet, refusals

#: The query parameters a listing page takes besides its filters.
PAGE_PARAMETERS = frozenset({"page"})

#: What is wrong with a refused query: a parameter the page does not take, one taking one value
#: given more than once, or a filter's value.
Wrong = Literal["unknown", "repeated", "value"]


class Refusals(dict[str, list[str]]):
    """The errors of a refused query, naming each parameter, and `wrong`: what is wrong with them
    all (a query is refused for one kind at a time: unknown parameters first, then repeated
    ones, then bad values). The pages' error line heads them with it (qm.refused_heading): it
    said "fix this filter" of `?tema=vision` and of `?page=2&page=3`, which no filter fixes.
    `times`: how many times each repeated one is given."""

    def __init__(self, errors: dict[str, list[str]], wrong: Wrong, times: dict[str, int] | None = None) -> None:
        super().__init__(errors)
        self.wrong: Wrong = wrong
        self.times: dict[str, int] = times or {}


def query_refusals(query: QueryDict, filterset_class: type[ListFilterSet]) -> Refusals:
    """The errors naming each parameter of ``query`` outside the filterset's and the page's
    (`PAGE_PARAMETERS`), listing what the page takes, else each given more than once but those
    the filterset judges itself (a state may be given several times): empty for none."""
    try:
        refuse_unknown_parameters(SimpleNamespace(query_params=query),  # type: ignore[arg-type]
                                  set(filterset_class.base_filters) | PAGE_PARAMETERS, "page",
                                  judged_elsewhere=frozenset(filterset_class.base_filters))
    except ValidationError as exc:
        errors = {name: [str(m) for m in messages] for name, messages in exc.detail.items()}
        codes = {code for listed in exc.get_codes().values() for code in listed}
        if codes == {"given_more_than_once"}:
            # the names are cut at 40 characters in the errors, as the API cuts them
            times = {name: len(query.getlist(name)) for name in query if name[:40] in errors}
            return Refusals(errors, "repeated", {name[:40]: n for name, n in times.items()})
        return Refusals(errors, "unknown")
    return Refusals({}, "value")


def value_refusals(filterset: ListFilterSet) -> Refusals:
    """The errors of a bound, invalid filterset: each parameter's problems as `refusals` says them;
    "repeated" when each is a filter given more than once (the filterset judges its own
    repeats: `?team=a&team=b`), else "value"."""
    problems = refusals(filterset)
    errors = {name: [message for message, _ in said] for name, said in problems.items()}
    if {code for said in problems.values() for _, code in said} == {"given_more_than_once"}:
        return Refusals(errors, "repeated", {name: len(filterset.data.getlist(name)) for name in errors})
    return Refusals(errors, "value")


def filtered(request: HttpRequest, filterset_class: type[ListFilterSet], queryset: QuerySet[Any]
             ) -> tuple[ListFilterSet, QuerySet[Any] | None, Refusals]:
    """``queryset`` under the query's filters, or None and the errors naming each bad parameter
    (an unknown one too, as the API refuses it). A time without a zone is UTC, as the page's
    fields say (the API refuses one)."""
    filterset = filterset_class(request.GET, queryset=queryset, request=request, naive_times_are_utc=True)
    errors = query_refusals(request.GET, filterset_class)
    if errors:
        return filterset, None, errors
    if not filterset.is_valid():
        return filterset, None, value_refusals(filterset)
    return filterset, filterset.qs, errors
