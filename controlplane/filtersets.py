"""One FilterSet per model, shared by the API and the pages.

Related objects are filtered by name (`?team=ml`, NamedRecordFilter), checked against the
records the reader may see, never against every row: a name that names none of them is a 400
naming the parameter ("no team named 'ml' whose jobs you may read"), in the same words whether
the record does not exist or is one the reader may not see, so a typo is not read as "none"
and filters leak no existence. Records everyone may see (priority classes, GPU types, nodes,
cohorts) are refused plainly, the short lists with the names there are. A filterset built
without a `request` has no reader: it sees no team, project or user.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import django_filters as filters
from django import forms
from django.contrib.auth.models import AnonymousUser
from django.db.models import F, Q, QuerySet
from django.utils import timezone
from django_filters.fields import BaseCSVField
from django_filters.utils import get_model_field
from drf_spectacular.utils import extend_schema_field

from controlplane.api.serializers.fields import no_record_named
from controlplane.choices import WAITING_CODES, CapacityTier, EventKind, JobState, NodeState, WorkloadClass
from controlplane.models import (
    AllocationGpu,
    Cohort,
    Event,
    GpuType,
    Job,
    MaintenanceWindow,
    Node,
    PriceRate,
    PriorityClass,
    Project,
    Quota,
    Team,
)
from controlplane.models.maintenance import MaintenanceWindowState
from controlplane.services import access, job_history
from controlplane.services.instants import InstantRefused, instant_from_text
from controlplane.services.plain_text import hidden_character_problem
from controlplane.services.whole_numbers import NotAWholeNumber, whole_number
from controlplane.services.yes_or_no import NotYesOrNo, yes_or_no


def choice_refusal(value: Any, field: Any, ordering: bool = False) -> str:
    """A value outside a choice parameter's choices, and the choices it takes: Django's "Select
    a valid choice. bogus is not one of the available choices." left the user guessing
    (`?state=bogus`, `?ordering=bogus`, qm list --state/--sort, the jobs page's address)."""
    values = [str(choice) for choice, _ in getattr(field, "choices", ()) if choice not in ("", None)]
    given = str(value)[:40]
    if ordering:  # FIELD and -FIELD: the fields once each
        fields = [v for v in values if not v.startswith("-")]
        return f"'{given}' is not a field this list sorts by; choose one of: {', '.join(fields)} (-FIELD descends)."
    return f"'{given}' is not a valid choice; choose one of: {', '.join(values)}."


def refusals(filterset: filters.FilterSet) -> dict[str, list[tuple[str, str]]]:
    """A bound, invalid filterset's problems, each parameter's as (message, code): a choice
    outside its choices says the choices (choice_refusal), the rest Django's words. The API's
    400 and the pages' error line say the same."""
    return {
        name: [
            (choice_refusal((error.params or {}).get("value", ""), filterset.form.fields.get(name),
                            isinstance(filterset.filters.get(name), filters.OrderingFilter))
             if error.code == "invalid_choice" else error.message % (error.params or ()), str(error.code))
            for error in errors
        ]
        for name, errors in filterset.errors.as_data().items()
    }


#: The longest value a text filter takes when what it is compared with has no length of its own
#: (a filter method's free search): beyond it no one is searching for anything.
FREE_TEXT_MAX_LENGTH = 200


class PlainTextFormField(forms.CharField):
    """A text query parameter (a name, part of one, an event's reason, a record's name), read by
    the API's one rule for text (services/plain_text.py): one line, holding no character that
    hides what it says, refused in the words a body's field says it ("contains a control
    character (U+001B, an escape) at position 4"). Until 7 Dec a NUL was refused in Django's
    words ("Null characters are not allowed.") and an escape or a right-to-left override was
    looked for (`?name=` listed nothing, `?team=` echoed it back in "no team named …").

    `longest` (characters, after the spaces around it are trimmed) and `longest_why` (the words
    saying why, TextFilter's): a value no row can match is refused before anything reads it,
    where a 10,000-character `?name=` was searched for in every job's name."""

    def __init__(self, *args: Any, longest: int = FREE_TEXT_MAX_LENGTH, longest_why: str = "", **kwargs: Any) -> None:
        self.longest, self.longest_why = longest, longest_why
        super().__init__(*args, **kwargs)

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        attrs: dict[str, Any] = super().widget_attrs(widget)
        if not widget.is_hidden:
            attrs["maxlength"] = str(self.longest)  # the browsable API's filter form: the browser stops there
        return attrs

    def to_python(self, value: Any) -> str:
        text: str = super().to_python(value)
        if len(text) > self.longest:
            # parameters, not the text: refusals() and the form %-format the message
            raise forms.ValidationError(
                "is %(given)d characters long: at most %(longest)d are taken%(why)s", code="max_length",
                params={"given": len(text), "longest": self.longest,
                        "why": f" ({self.longest_why})" if self.longest_why else ""})
        if text:
            trimmed = len(value) - len(value.lstrip()) if self.strip and isinstance(value, str) else 0
            problem = hidden_character_problem(text, offset=trimmed)
            if problem:
                # a parameter, not the text: refusals() and the form %-format the message
                raise forms.ValidationError("%(said)s", code="hidden_character", params={"said": problem})
        return text


def column_length(model: Any, field_name: str) -> tuple[int, str] | None:
    """The longest text the column `field_name` of `model` (through relations: `team__name`)
    holds and the words saying so ("no job's name is longer"), or None when it is no column of
    bounded length."""
    column = get_model_field(model, field_name) if model is not None else None
    longest = getattr(column, "max_length", None)
    if column is None or not longest:
        return None
    owner = column.model._meta.verbose_name
    return longest, f"no {owner}'s {column.verbose_name} is longer"


class TextFilter(filters.CharFilter):
    """A filter on text, its value read by the one rule for text (PlainTextFormField), and no
    longer than the column it is compared with holds (column_length), FREE_TEXT_MAX_LENGTH
    otherwise: longer, it can match no row, and it is a 400 naming the parameter and the limit."""

    field_class = PlainTextFormField

    def compared_column(self) -> tuple[int, str] | None:
        """The length of the column this filter's value is compared with (column_length)."""
        return None if self.method else column_length(getattr(self, "model", None), self.field_name)

    def longest(self) -> tuple[int, str]:
        """The longest value taken, and the words saying why (none for free search)."""
        return self.compared_column() or (FREE_TEXT_MAX_LENGTH, "")

    @property
    def field(self) -> forms.Field:
        # A field built before the filterset gave this filter its model (a class's filter) was
        # built without its column: built again for the model it has now.
        model = getattr(self, "model", None)
        if getattr(self, "_longest_for", None) is not model:
            self.__dict__.pop("_field", None)
            self._longest_for = model
        if not hasattr(self, "_field"):
            self.extra["longest"], self.extra["longest_why"] = self.longest()
        return super().field  # type: ignore[no-any-return]


@functools.cache
def text_filter_lengths(filterset_class: type[filters.FilterSet]) -> Mapping[str, int]:
    """Each text filter of `filterset_class` by its parameter, and the longest value it takes
    (TextFilter.longest): what the schema says (`maxLength`) and a page's input stops at
    (`maxlength`), read where the server reads it, so the limit has one home. Read once a class
    (the columns' lengths are the models'): building the filterset took about 1 ms a page."""
    # a filterset gives its filters their model, which their columns are read from
    filterset = filterset_class(queryset=filterset_class._meta.model.objects.none())
    return MappingProxyType({name: text.longest()[0] for name, text in filterset.filters.items()
                             if isinstance(text, TextFilter)})


class InstantField(forms.Field):
    """A time query parameter, read by the API's one rule for instants (services/instants): an
    RFC 3339 instant with its zone, in UTC before it reaches the database (PostgreSQL refuses
    offsets beyond ±15:59). Text that is no time (`?after=yesterday`), a time no calendar has and
    a time without a zone are a 400 naming the parameter, in the words a maintenance window's
    start_at uses: `?after=2026-12-07T01:00:00` was read as UTC where a window refused it.
    `naive_is_utc` (the pages' forms, their fields labelled UTC): a time without a zone is UTC."""

    naive_is_utc = False

    def to_python(self, value: Any) -> datetime | None:
        if value in self.empty_values:
            return None
        if isinstance(value, datetime):
            return value
        try:
            return instant_from_text(str(value), naive_is_utc=self.naive_is_utc)
        except InstantRefused as refused:
            # a parameter, not the text: refusals() and the form %-format the message
            raise forms.ValidationError("%(said)s", code="invalid", params={"said": str(refused)}) from None


class IsoDateTimeFilter(filters.IsoDateTimeFilter):
    field_class = InstantField

    @property
    def field(self) -> forms.Field:
        field = super().field
        # whose form it is (ListFilterSet.naive_times_are_utc) is known only when it is built
        field.naive_is_utc = bool(getattr(self.parent, "naive_times_are_utc", False))  # type: ignore[attr-defined]
        return field


def given_more_than_once(times: int, several: str = "") -> str:
    """The refusal of a query parameter that takes one value, given `times` times: the last one
    was read and the others dropped without a word (`?pool=a100&pool=h100` listed h100's nodes
    alone, `?limit=10&limit=1000` a page of 1,000). `several`: how it takes several values, if
    it does (a comma-separated list). The API's lists, its other endpoints and the pages say it so."""
    said = "twice" if times == 2 else f"{times} times"
    return f"Given {said}: this parameter takes one value; give it once{several}."


#: How a comma-separated filter (`id`, `ordering`) takes several values, said with its refusal.
COMMA_SEPARATED = ", several values comma-separated in it (id=48,53)"


def reads_several(widget: Any) -> bool:
    """Whether a filter's widget (a class or one built) reads every value of its parameter, given
    repeated: a multiple choice's (`?state=pending&state=running`). Django's widgets read them so
    (getlist) exactly when they allow several to be selected; every other reads the last one alone."""
    return bool(getattr(widget, "allow_multiple_selected", False))


def repeatable_parameters(filterset_class: type[filters.FilterSet]) -> frozenset[str]:
    """The parameters of `filterset_class` that take several values given repeated."""
    # the filter's widget, not its field: building a class's filter's field ties it to no reader
    return frozenset(name for name, one in filterset_class.base_filters.items()
                     if reads_several(one.extra.get("widget") or one.field_class.widget))


class _OneValueEachForm(forms.Form):
    """A filterset's form that refuses a parameter taking one value given more than once, in
    place of judging the one value of them it read."""

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        getlist = getattr(self.data, "getlist", None)
        if getlist is None:  # a plain mapping holds each name once
            return cleaned
        for name, field in self.fields.items():
            times = len(getlist(self.add_prefix(name)))
            if times > 1 and not reads_several(field.widget):
                self._errors.pop(name, None)  # what the last value alone was: not what was asked
                several = COMMA_SEPARATED if isinstance(field, BaseCSVField) else ""
                # a parameter, not the text: refusals() and the form %-format the message
                self.add_error(name, forms.ValidationError("%(said)s", code="given_more_than_once",
                                                           params={"said": given_more_than_once(times, several)}))
        return cleaned


class ListFilterSet(filters.FilterSet):
    """A filterset of this module: as the API reads a query, or (`naive_times_are_utc`) as a
    page's form sends it, its time fields labelled UTC and its browser inputs without a zone.
    A parameter taking one value given more than once is refused naming it (_OneValueEachForm),
    wherever the filterset is read: the API's lists and history exports, and the pages."""

    def __init__(self, *args: Any, naive_times_are_utc: bool = False, **kwargs: Any) -> None:
        self.naive_times_are_utc = naive_times_are_utc
        super().__init__(*args, **kwargs)

    def get_form_class(self) -> type[forms.Form]:
        form_class = super().get_form_class()
        return type(form_class.__name__, (_OneValueEachForm, form_class), {})


# Ids are PostgreSQL bigints (SQLite's integers are as wide): one beyond is no id at all.
MAX_ID = 2**63 - 1


class WholeNumberFormField(forms.IntegerField):
    """A whole number as services/whole_numbers.py reads one. Django's IntegerField reads it
    with int() after dropping a fraction of zeros: `?id=1.0` listed job 1, `?id=٣` job 3."""

    def to_python(self, value: Any) -> int | None:
        if value in self.empty_values:
            return None
        try:
            return whole_number(str(value))
        except NotAWholeNumber as refused:
            # a parameter, not the text: django-filter %-formats the message
            raise forms.ValidationError("%(said)s.", code="invalid", params={"said": str(refused)}) from None


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class IdFilter(filters.NumberFilter):
    """A row's id: a whole number from 1 to MAX_ID, else a 400 (django-filter's NumberFilter
    takes decimals, so `?job=1.5` matched job 1, and a 20-digit id overflowed SQLite: a 500)."""

    field_class = WholeNumberFormField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)

    def get_max_validator(self) -> None:
        return None  # the field's own max_value bounds it


# PostgreSQL `integer` columns (exit codes, seconds): beyond them a 400, not a database error.
MAX_INT = 2**31 - 1


@extend_schema_field({"type": "integer"})
class IntegerFilter(filters.NumberFilter):
    """A whole number within `min_value`..`max_value` (default: a PostgreSQL integer), else a 400
    naming the parameter (NumberFilter takes `1.5`, and a 20-digit number reached the database)."""

    field_class = WholeNumberFormField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", -MAX_INT - 1)
        kwargs.setdefault("max_value", MAX_INT)
        super().__init__(*args, **kwargs)

    def get_max_validator(self) -> None:
        return None  # the field's own max_value bounds it


class StrictBooleanField(forms.NullBooleanField):
    """true/false (or 1/0, any case), or absent. django-filter's field reads anything else as
    "no filter", so `?preemptible=maybe` answered with every row."""

    widget = forms.TextInput  # NullBooleanSelect would turn "maybe" into None before us

    def to_python(self, value: Any) -> bool | None:
        if value in (None, ""):
            return None
        if isinstance(value, bool):
            return value
        try:
            return yes_or_no(str(value))
        except NotYesOrNo:
            # The value goes in as a parameter: django-filter %-formats the message.
            raise forms.ValidationError(
                "'%(value)s' is not true or false.", code="invalid", params={"value": str(value)[:40]}
            ) from None

    def validate(self, value: Any) -> None:
        pass


class BooleanFilter(filters.BooleanFilter):
    field_class = StrictBooleanField


class NoEmptyItemsCSVField(BaseCSVField):
    """A comma-separated list without empty items: `?ordering=id,,gpus` (or `gpus,`) is a 400
    naming the parameter, where the empty name passed the choice check and then failed (a 500)."""

    def clean(self, value: Any) -> Any:
        if value and any(item in self.empty_values for item in value):
            raise forms.ValidationError(
                "'%(value)s' has an empty field: separate the fields by single commas.",
                code="invalid", params={"value": ",".join(str(item) for item in value)[:80]},
            )
        return super().clean(value)


@extend_schema_field({"type": "string", "example": "48,53"})
class IdsFilter(filters.BaseInFilter, IdFilter):
    """Several ids, comma-separated (`?id=48,53`), each one as IdFilter takes it."""

    base_field_class = NoEmptyItemsCSVField


class NamedRecordFilter(TextFilter):
    """A related record by its name, refused unless it names one of `records(reader)`, the
    records the request's user may see (module docstring): a 400 naming the parameter, where a
    typo matched nothing and read as "no jobs". `scope` says whose the records are when they
    are not everyone's (" whose jobs you may read"); `lists_names` lists the names there are
    (records everyone may see, few of them). `called` (singular, plural): what a column of the
    records names when it is not the record itself (`slug_field="pool"` of the nodes: "no pool
    named …"). The filtering itself is the CharFilter's, or `method`'s."""

    def __init__(self, *args: Any, records: Callable[[Any], QuerySet[Any]], scope: str = "",
                 lists_names: bool = False, slug_field: str = "name", called: tuple[str, str] | None = None,
                 **kwargs: Any) -> None:
        self.records, self.scope, self.lists_names, self.slug_field = records, scope, lists_names, slug_field
        self.called = called  # (`label` is django-filter's: the form field's)
        super().__init__(*args, **kwargs)

    @property
    def field(self) -> forms.Field:
        # A filterset's filters are deep copies of its class's, and a form field's copy keeps the
        # validators it had, bound to the class's filter (no reader): each copy checks with its own.
        if getattr(self, "_checked_by", None) != id(self):
            self.__dict__.pop("_field", None)
            super().field.validators.append(self.refuse_unknown)
            self._checked_by = id(self)
        return self._field  # type: ignore[no-any-return]

    def compared_column(self) -> tuple[int, str] | None:
        # the column of `records` its value names, whether the filtering is a column's or a method's
        return column_length(self.records(AnonymousUser()).model, self.slug_field)

    def refuse_unknown(self, value: str) -> None:
        request = getattr(self.parent, "request", None)
        records = self.records(getattr(request, "user", None) or AnonymousUser())
        if not records.filter(**{self.slug_field: value}).exists():
            said = no_record_named(records, value, slug_field=self.slug_field, lists_names=self.lists_names,
                                   scope=self.scope, label=self.called)
            # A parameter, not the text: refusals() and the form %-format the message.
            raise forms.ValidationError("%(said)s", code="does_not_exist", params={"said": said})


def _everyone(model: Any) -> Callable[[Any], QuerySet[Any]]:
    return lambda reader: model.objects.all()


def _job_projects(reader: Any) -> QuerySet[Project]:
    return Project.objects.filter(team__in=access.member_teams(reader))


JOBS_SCOPE = " whose jobs you may read"
READ_SCOPE = " that you may read"


class JobOrderingFilter(filters.OrderingFilter):
    """`?ordering=queue_position` (`-` for descending, several comma-separated): a choice, so a
    field it does not sort by is a 400 naming `ordering`. Rows without the value (a running job
    has no queue position) come last either way, on SQLite as on PostgreSQL, and the newest id
    breaks ties, so pages do not overlap."""

    base_field_class = NoEmptyItemsCSVField

    def filter(self, qs: Any, value: Any) -> Any:
        if not value:
            return qs
        ordering = []
        for param in value:
            descending = param.startswith("-")
            field = self.param_map[param.lstrip("-")]
            if field == "elapsed" and "elapsed" not in qs.query.annotations:
                # The latest run's length, to now for a job still running (job_history).
                qs = qs.annotate(elapsed=job_history.elapsed_expression(timezone.now()))
            ordering.append(F(field).desc(nulls_last=True) if descending else F(field).asc(nulls_last=True))
        return qs.order_by(*ordering, "-id")


class _JobWindowsForm(forms.Form):
    """A time window that ends at or before its start holds nothing: said on its end, as `qm
    history` refuses an --until not after --since (it answered an empty list, as if no job)."""

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        for when in ("submitted", "started", "finished"):
            start, end = cleaned.get(f"{when}_after"), cleaned.get(f"{when}_before")
            if start is not None and end is not None and end <= start:
                self.add_error(f"{when}_before", f"{_utc_words(end)} is not after {when}_after "
                                                 f"({_utc_words(start)}): the window holds nothing")
        return cleaned


def _utc_words(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")  # InstantField's are in UTC


class JobFilterSet(ListFilterSet):
    team = NamedRecordFilter(field_name="team__name", records=access.member_teams, scope=JOBS_SCOPE,
                             help_text="Team name: one whose jobs you may read, else a 400.")
    project = NamedRecordFilter(field_name="project__name", records=_job_projects, scope=JOBS_SCOPE,
                                help_text="Project name: one of a team whose jobs you may read, else a 400.")
    # distinct=False: a column of the row itself matches each row once. django-filter's default
    # DISTINCT made PostgreSQL de-duplicate every matching row before the page's LIMIT and again
    # for its COUNT (the events of one kind: 410 ms for 100,000 of them, bench/scale_audit.py).
    state = filters.MultipleChoiceFilter(choices=JobState.choices, distinct=False, method="filter_state",
                                         help_text="Repeat for several states. unschedulable (can never run): "
                                                   "the waiting jobs the engine found can never run as asked.")
    # `qm cancel 48 53 99999` reads its jobs in one request and cancels none unless all are there.
    id = IdsFilter(field_name="id", distinct=False,
                   help_text="These jobs only: their ids, comma-separated (`48,53`); an id you may not read, "
                             "or of no job, is simply not listed.")
    priority_class = NamedRecordFilter(field_name="priority_class__name", records=_everyone(PriorityClass),
                                       lists_names=True, help_text="Priority class name (an unknown one is a 400 "
                                                                   "listing them).")
    user = NamedRecordFilter(field_name="submitter__username", records=access.job_users, scope=JOBS_SCOPE,
                             slug_field="username",
                             help_text="Submitter's username: yours, a teammate's or one who submitted a job you "
                                       "may read, else a 400.")
    workload = filters.ChoiceFilter(choices=WorkloadClass.choices)
    submitted_after = IsoDateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = IsoDateTimeFilter(field_name="submitted_at", lookup_expr="lt")
    started_after = IsoDateTimeFilter(field_name="started_at", lookup_expr="gte",
                                      help_text="Started (its latest run) at or after this time.")
    started_before = IsoDateTimeFilter(field_name="started_at", lookup_expr="lt",
                                       help_text="Started (its latest run) before this time.")
    finished_after = IsoDateTimeFilter(field_name="finished_at", lookup_expr="gte",
                                       help_text="Ended (succeeded, failed, cancelled, timed out) at or after this time.")
    finished_before = IsoDateTimeFilter(field_name="finished_at", lookup_expr="lt",
                                        help_text="Ended before this time.")
    exit_code = IntegerFilter(field_name="exit_code", help_text="The exit code its processes ended with.")
    ran_longer_than_s = IntegerFilter(
        method="filter_ran_longer_than_s", min_value=0,
        help_text="Jobs whose latest run lasted more than this many seconds (`elapsed_s`; a running job's "
                  "counts to now).",
    )
    ran_on = NamedRecordFilter(
        method="filter_ran_on", records=_everyone(Node),
        help_text="Node name: every job that ever held GPUs on that node, in any run, finished or not "
                  "(`node` is the jobs holding GPUs there now).",
    )
    array_id = filters.UUIDFilter(field_name="array_id")
    pending_code = filters.ChoiceFilter(
        choices=[(code, code) for code in WAITING_CODES], method="filter_pending_code",
        help_text="Why a job waits, e.g. QuotaExceeded: waiting jobs (and those that can never run) only, "
                  "since a job keeps its last reason after it leaves the queue. A code it does not know is "
                  "a 400 listing the codes (a typo listed nothing).",
    )
    name = TextFilter(field_name="name", lookup_expr="icontains", help_text="Part of the job name.")
    # squeue -n and scancel -n: `qm list -n train` lists what `qm cancel -n train` cancels, not pretrain-7b.
    name_exact = TextFilter(field_name="name", lookup_expr="exact", distinct=False,
                                    help_text="The whole job name, as written (any case differs).")
    node = NamedRecordFilter(
        method="filter_node", records=_everyone(Node),
        help_text="Node name: the jobs holding GPUs on that node now (running, or stopping until its GPUs are "
                  "given back), as `squeue -w` lists them.",
    )
    ordering = JobOrderingFilter(
        fields=(("id", "id"), ("submitted_at", "submitted_at"), ("gpus", "gpus"),
                ("place__queue_position", "queue_position"), ("priority_class__value", "priority"),
                ("name", "name"), ("state", "state"), ("started_at", "started_at"),
                ("finished_at", "finished_at"), ("elapsed", "elapsed")),
        help_text="Sort by id, submitted_at, gpus, queue_position, priority, name, state, started_at, "
                  "finished_at or elapsed; '-' descends; several comma-separated. Default: newest first.",
    )

    def filter_node(self, queryset: Any, name: str, value: str) -> Any:
        # A subquery, not a join: a gang holds several GPU rows on a node, and each job is listed once.
        held = AllocationGpu.objects.filter(node__name=value, live=True).values("allocation__job_id")
        return queryset.filter(pk__in=held)

    def filter_ran_on(self, queryset: Any, name: str, value: str) -> Any:
        # Every GPU row it ever had there, released ones included: a subquery, each job once.
        held = AllocationGpu.objects.filter(node__name=value).values("allocation__job_id")
        return queryset.filter(pk__in=held)

    def filter_ran_longer_than_s(self, queryset: Any, name: str, value: int) -> Any:
        return queryset.filter(job_history.ran_longer_than(value, timezone.now()))

    def filter_state(self, queryset: Any, name: str, value: list[str]) -> Any:
        if not value:
            return queryset
        # The engine never moves a job to `unschedulable`: one it finds can never run as asked
        # stays pending, not resolvable, with its reason. "Can never run" lists those.
        chosen = Q(state__in=value)
        if JobState.UNSCHEDULABLE in value:
            chosen |= Q(state=JobState.PENDING, pending_resolvable=False)
        return queryset.filter(chosen)

    def filter_pending_code(self, queryset: Any, name: str, value: str) -> Any:
        return queryset.filter(pending_code=value, state__in=(JobState.PENDING, JobState.UNSCHEDULABLE))

    class Meta:
        model = Job
        fields: list[str] = []
        form = _JobWindowsForm


class JobHistoryFilterSet(JobFilterSet):
    """The `/history/` page's filters: the jobs list's own (one rule, one home: a bad value is
    refused there as here, naming its parameter), with `state` limited to the states a job ends
    in, and no `ordering` (the history is newest end first)."""

    state = filters.MultipleChoiceFilter(
        choices=[(state.value, state.label) for state in job_history.ENDED_STATES], distinct=False,
        help_text="How it ended; repeat for several.",
    )
    ordering = None  # type: ignore[assignment]

    class Meta(JobFilterSet.Meta):
        pass


class TeamFilterSet(ListFilterSet):
    name = TextFilter(field_name="name")
    cohort = NamedRecordFilter(field_name="cohort__name", records=_everyone(Cohort), lists_names=True,
                               help_text="Cohort name.")

    class Meta:
        model = Team
        fields: list[str] = []


class ProjectFilterSet(ListFilterSet):
    team = NamedRecordFilter(field_name="team__name", records=access.visible_teams, scope=READ_SCOPE,
                             help_text="Team name: one you may read, else a 400.")
    name = TextFilter(field_name="name")

    class Meta:
        model = Project
        fields: list[str] = []


class CohortFilterSet(ListFilterSet):
    name = TextFilter(field_name="name")

    class Meta:
        model = Cohort
        fields: list[str] = []


class QuotaFilterSet(ListFilterSet):
    team = NamedRecordFilter(field_name="team__name", records=access.visible_teams, scope=READ_SCOPE,
                             help_text="Team name: one you may read, else a 400.")
    gpu_type = NamedRecordFilter(field_name="gpu_type__name", records=_everyone(GpuType), lists_names=True,
                                 help_text="GPU type name.")

    class Meta:
        model = Quota
        fields: list[str] = []


class PriorityClassFilterSet(ListFilterSet):
    name = TextFilter(field_name="name")
    preemptible = BooleanFilter(field_name="preemptible")

    class Meta:
        model = PriorityClass
        fields: list[str] = []


class GpuTypeFilterSet(ListFilterSet):
    name = TextFilter(field_name="name")
    min_memory_gb = IntegerFilter(field_name="memory_gb", lookup_expr="gte", min_value=0)

    class Meta:
        model = GpuType
        fields: list[str] = []


class PriceRateFilterSet(ListFilterSet):
    gpu_type = NamedRecordFilter(field_name="gpu_type__name", records=_everyone(GpuType), lists_names=True,
                                 help_text="GPU type name.")
    capacity_tier = filters.ChoiceFilter(choices=CapacityTier.choices)
    effective_after = IsoDateTimeFilter(field_name="effective_from", lookup_expr="gte")
    effective_before = IsoDateTimeFilter(field_name="effective_from", lookup_expr="lt")

    class Meta:
        model = PriceRate
        fields: list[str] = []


class NodeFilterSet(ListFilterSet):
    name = TextFilter(field_name="name")
    # A node's pool, leaf switch and spine are refused as an unknown gpu_type is, listing the
    # ones there are: `?pool=nosuch` answered an empty list, as if the pool had no node.
    pool = NamedRecordFilter(field_name="pool", records=_everyone(Node), slug_field="pool", called=("pool", "pools"),
                             lists_names=True, help_text="Pool name (an unknown one is a 400 listing them).")
    state = filters.MultipleChoiceFilter(choices=NodeState.choices, distinct=False,  # as JobFilterSet.state
                                         help_text="Repeat for several states.")
    gpu_type = NamedRecordFilter(field_name="gpu_type__name", records=_everyone(GpuType), lists_names=True,
                                 help_text="GPU type name.")
    leaf_switch = NamedRecordFilter(field_name="leaf_switch", records=_everyone(Node), slug_field="leaf_switch",
                                    called=("leaf switch", "leaf switches"), lists_names=True,
                                    help_text="Leaf switch name (an unknown one is a 400 listing them).")
    spine = NamedRecordFilter(field_name="spine", records=_everyone(Node), slug_field="spine",
                              called=("spine", "spines"), lists_names=True,
                              help_text="Spine name (an unknown one is a 400 listing them).")
    capacity_tier = filters.ChoiceFilter(choices=CapacityTier.choices)
    simulated = BooleanFilter(field_name="simulated")
    retired = BooleanFilter(method="filter_retired", help_text="true: only retired nodes (out of the fleet); "
                                                                "false: the fleet without them. Unset: every node.")

    class Meta:
        model = Node
        fields: list[str] = []

    def filter_retired(self, queryset: QuerySet[Node], name: str, value: bool | None) -> QuerySet[Node]:
        if value is None:
            return queryset
        return queryset.filter(state=NodeState.RETIRED) if value else queryset.exclude(state=NodeState.RETIRED)


class EventFilterSet(ListFilterSet):
    kind = filters.MultipleChoiceFilter(choices=EventKind.choices, distinct=False,  # as JobFilterSet.state
                                        help_text="Repeat for several kinds.")
    job = IdFilter(field_name="job_id", help_text="Job id.")
    node = NamedRecordFilter(field_name="node__name", records=_everyone(Node), help_text="Node name.")
    team = NamedRecordFilter(field_name="team__name", records=access.member_teams, scope=" whose events you may read",
                             help_text="Team name: one whose events you may read, else a 400.")
    reason = TextFilter(field_name="reason")
    after = IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    before = IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Event
        fields: list[str] = []


class MaintenanceWindowFilterSet(ListFilterSet):
    state = filters.MultipleChoiceFilter(
        choices=MaintenanceWindowState.choices, method="filter_state",
        help_text="upcoming, active (begun, not ended), ended or cancelled, now; repeat for several.")
    node = NamedRecordFilter(method="filter_node", records=_everyone(Node),
                             help_text="Node name: the windows that take it out.")

    class Meta:
        model = MaintenanceWindow
        fields: list[str] = []

    def filter_state(self, queryset: QuerySet[MaintenanceWindow], name: str,
                     value: list[str]) -> QuerySet[MaintenanceWindow]:
        from controlplane.services.maintenance import in_state

        return in_state(queryset, value, timezone.now()) if value else queryset

    def filter_node(self, queryset: QuerySet[MaintenanceWindow], name: str, value: str) -> QuerySet[MaintenanceWindow]:
        # A subquery, not a join: a window is listed once, and its prefetched nodes are all of them.
        return queryset.filter(pk__in=MaintenanceWindow.nodes.through.objects.filter(node__name=value)
                               .values("maintenancewindow_id"))


__all__ = [
    "CohortFilterSet",
    "EventFilterSet",
    "GpuTypeFilterSet",
    "JobFilterSet",
    "MaintenanceWindowFilterSet",
    "NodeFilterSet",
    "PriceRateFilterSet",
    "PriorityClassFilterSet",
    "ProjectFilterSet",
    "QuotaFilterSet",
    "TeamFilterSet",
]
