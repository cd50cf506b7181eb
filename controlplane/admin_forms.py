"""Admin change pages that never silently undo another admin's save.

A page remembers what it showed when it was opened (a hidden field); on saving, a field another
admin changed meanwhile is kept as she saved it when this page left it alone, and refused on the
field when this page changed it too (tests/controlplane/test_admin_stale_form.py)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.actions import delete_selected
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.admin.utils import model_ngettext
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.db import models, router, transaction
from django.forms.models import _get_foreign_key
from django.forms.utils import pretty_name
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from controlplane.api.serializers.fields import INTEGER_COLUMN_RANGES
from controlplane.models.field_names import FieldNamed
from controlplane.models.names import node_name, visible_name
from controlplane.services import access, config_audit
from controlplane.services.plain_text import hidden_character_problem


class AdminSignInForm(AdminAuthenticationForm):
    """The admin's sign-in form: whoever `access.may_use_admin_site` lets in, a fleet admin by
    membership among them. Django's own asks `is_staff`, which a membership with role admin
    does not set: the fleet's admins were told to enter "a staff account" (until 7 Dec). A
    right password of someone it refuses is told as a wrong one is, as Django tells it."""

    error_messages = {
        **AdminAuthenticationForm.error_messages,
        "invalid_login": "Please enter the correct %(username)s and password of an admin account. Note that both "
                         "fields may be case-sensitive.",
    }

    def confirm_login_allowed(self, user: Any) -> None:
        AuthenticationForm.confirm_login_allowed(self, user)  # an inactive account is refused
        if not access.may_use_admin_site(user):
            raise ValidationError(self.error_messages["invalid_login"], code="invalid_login",
                                  params={"username": self.username_field.verbose_name})


class _OpenedAsField(forms.CharField):
    """What the page showed when it was opened; never a change of its own."""

    def has_changed(self, initial: Any, data: Any) -> bool:
        return False


def _plain(value: Any) -> Any:
    """A field's value as JSON compares it: a related record by its key, numbers and times
    as text."""
    if isinstance(value, models.Model):
        return value.pk
    if isinstance(value, list | tuple | models.QuerySet):  # a many-to-many field: its keys, in order
        return sorted(_plain(v) for v in value)
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if timezone.is_aware(value) else value).isoformat(timespec="seconds")
    if isinstance(value, date | time):
        return value.isoformat()
    return value


class OpenedAsForm(forms.ModelForm):
    """A change page that remembers what it showed when it was opened (a hidden field), so a
    save never silently undoes what another admin saved meanwhile. On saving, each field
    another admin changed since then:

    - left as shown here: keeps the other admin's value (``kept_changes``, said on the page);
    - changed here too, to something else: refused on the field, naming who changed it and to
      what; the page then shows the stored value, so saving again is a decision.

    A page posted without it (a script posting the fields only) saves as before."""

    opened_as = _OpenedAsField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kept_changes: list[str] = []
        if self.instance.pk is not None and not self.is_bound:
            self.initial["opened_as"] = self._shown_now()

    def _stored(self) -> dict[str, Any]:
        """The record's values as the page shows them (for a bound form: as stored now)."""
        return {name: _plain(self.get_initial_for_field(field, name))
                for name, field in self.fields.items() if name != "opened_as"}

    def _shown_now(self) -> str:
        return json.dumps({"at": timezone.now().isoformat(), "pk": self.instance.pk, "values": self._stored()},
                          default=str)

    def _opened(self) -> tuple[datetime, dict[str, Any]] | None:
        """When the page was opened and the values it showed (with the record's key as "pk")."""
        try:
            opened = json.loads(self.data.get(self.add_prefix("opened_as")) or "null")
            at = parse_datetime(opened["at"])
            values = {**opened["values"], "pk": opened.get("pk")}
        except (ValueError, TypeError, KeyError):
            return None
        return (at, values) if at is not None else None

    def _shown(self, name: str, value: Any) -> str:
        field = self.fields[name]
        if value is None or value == "":
            return "none"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(field, forms.ModelMultipleChoiceField):  # a team's priority classes
            return ", ".join(str(r) for r in field.queryset.model._default_manager.filter(pk__in=value)) or "none"
        if isinstance(field, forms.ModelChoiceField):
            return str(field.queryset.model._default_manager.filter(pk=value).first() or value)
        return str(value)

    def _show_stored(self, data: Any, name: str, value: Any) -> None:
        """Set the page's field to the stored ``value`` (for the page shown again)."""
        key, field = self.add_prefix(name), self.fields[name]
        if isinstance(field, forms.ModelMultipleChoiceField):
            data.setlist(key, [str(pk) for pk in _plain(list(value.all()) if hasattr(value, "all") else value)])
            return
        prepared = field.prepare_value(value)
        if isinstance(field.widget, forms.MultiWidget):
            for suffix, part in zip(field.widget.widgets_names, field.widget.decompress(prepared), strict=False):
                data[key + suffix] = "" if part is None else str(part)
        elif isinstance(field.widget, forms.CheckboxInput):
            data[key] = "true" if prepared else "false"
        else:
            data[key] = "" if prepared is None else str(prepared)

    def _update_errors(self, errors: ValidationError) -> None:
        """The model's refusals name other fields as this page labels them ("5 is more than
        Nominal GPUs (4)"), where the API says its names (models/field_names.py): until 7 Dec
        the quota page said "nominal_gpus", a name it shows nowhere."""
        for error in _each_error(errors):
            if error.params:
                error.params = {key: self._label_of(value.name) if isinstance(value, FieldNamed) else value
                                for key, value in error.params.items()}
        super()._update_errors(errors)

    def _label_of(self, name: str) -> str:
        if name in self.fields:
            return _label(name, self.fields[name])
        label = str(self._meta.model._meta.get_field(name).verbose_name)
        return label[:1].upper() + label[1:]

    def _deleted_meanwhile(self) -> None:
        """A row of an inline another admin deleted since the page opened: its hidden id is
        refused, and the page cannot show the row again (it is no longer in the team's rows),
        so it answered "Please correct the error below." with no error on it and saved nothing
        until reloaded. The row is left out instead, as deleted, and the page says so."""
        opened = self._opened()
        if "id" not in self._errors or opened is None or opened[1]["pk"] is None or self.prefix is None:
            return
        model, pk = self._meta.model, opened[1]["pk"]
        deleted = config_audit.deleted_since(model, pk, opened[0])
        who, shown = deleted if deleted is not None else ("another admin", f"{model._meta.verbose_name} {pk}")
        del self._errors["id"]
        self.cleaned_data["DELETE"] = True  # the formset leaves it out: nothing of it is saved
        label = str(model._meta.verbose_name)
        self.kept_changes.append(f"{label[:1].upper()}{label[1:]} {shown} was deleted by {who} since you opened this "
                                 "page: its row on your page was left out, nothing of it saved.")

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean()
        if self.instance.pk is None:
            self._deleted_meanwhile()
        opened = self._opened() if self.instance.pk is not None else None
        if opened is None:
            return cleaned
        at, was = opened
        now = self._stored()
        moved = [name for name in now if name in was and name != "pk" and was[name] != now[name] and name in cleaned]
        if not moved:
            return cleaned
        who = ", ".join(config_audit.changed_by_since(self.instance, at)) or "another admin"
        data = self.data.copy()
        kept = []
        for name in moved:
            sent = _plain(cleaned[name])
            if sent == now[name]:
                continue
            label = str(self.fields[name].label or name).lower()
            stored = getattr(self.instance, name)
            if hasattr(stored, "all"):  # many to many: the records stored now
                stored = list(stored.all())
            self._show_stored(data, name, stored)
            if sent == was[name]:
                cleaned[name] = stored
                kept.append(f"{label} {self._shown(name, was[name])} → {self._shown(name, now[name])}")
            else:
                self.add_error(name, (
                    f"{who} changed this from {self._shown(name, was[name])} to {self._shown(name, now[name])} "
                    f"since you opened this page; your {self._shown(name, sent)} was not saved. The field now shows "
                    f"the stored value: save again to replace it."))
        if kept:
            self.kept_changes.append(f"Kept the change {who} saved since you opened this page: " + ", ".join(kept)
                                     + f" (on {self.instance}).")
        data[self.add_prefix("opened_as")] = self._shown_now()
        self.data = data
        self.__dict__.pop("changed_data", None)  # a formset asks before cleaning; ask again
        return cleaned


def _each_error(errors: ValidationError) -> list[ValidationError]:
    """Each single error of ``errors`` (a dict of fields' lists, or a list)."""
    if hasattr(errors, "error_dict"):
        return [error for listed in errors.error_dict.values() for error in listed]
    return list(errors.error_list)


class IntegerColumnBounds:
    """An integer field of an admin form takes what PostgreSQL's `integer` column would, on every
    database, as the API does (ConstraintCheckedModelSerializer): SQLite, the embedded demo's
    database, bounds every integer column at 2**63 - 1, so a priority class's budget window of
    86400000000 s (a day with four zeros too many) was saved there, and from the next cycle on the
    scheduling loop failed on every step (the snapshot's `now - timedelta(seconds=…)` overflowed)
    until the class was fixed. PostgreSQL refused the same value on the field, in these words
    ("Ensure this value is less than or equal to 2147483647.")."""

    def formfield_for_dbfield(self, db_field, request, **kwargs):  # type: ignore[no-untyped-def]
        low, high = INTEGER_COLUMN_RANGES.get(db_field.get_internal_type(), (None, None))
        if high is not None and not db_field.choices:
            kwargs.setdefault("min_value", low)
            kwargs.setdefault("max_value", high)
        return super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]


class PlainTextColumns:
    """A text box of an admin form takes text by the API's one rule for it (services/plain_text.py):
    nothing that hides or disguises what it says, said on the field with its code point and place.
    A description, as the API's, may hold new lines and tabs; another text (a name) is one line.
    Until 7 Dec the admin saved a team's description holding an escape sequence, or a GPU type
    named with a bidirectional override, that the API refused. A field whose model validates its
    name already (models/names.py), a URL (its own rule) and a secret (any text) are left as they are."""

    def formfield_for_dbfield(self, db_field, request, **kwargs):  # type: ignore[no-untyped-def]
        field = super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]
        if _checked_as_plain_text(db_field) and isinstance(field, forms.CharField):
            several_lines = isinstance(db_field, models.TextField) or db_field.name == "description"
            field.validators.append(_PlainText(several_lines))
        return field


def _checked_as_plain_text(db_field: Any) -> bool:
    return (isinstance(db_field, models.CharField | models.TextField) and not isinstance(db_field, models.URLField)
            and not db_field.choices and db_field.name not in ("secret", "password")
            and not any(v is visible_name or v is node_name for v in db_field.validators))


class _PlainText:
    """services/plain_text.py's rule as a form field's validator."""

    def __init__(self, several_lines: bool) -> None:
        self.several_lines = several_lines

    def __call__(self, value: str) -> None:
        problem = hidden_character_problem(value, lines=self.several_lines)
        if problem:
            raise ValidationError(problem, code="hidden_character")


class ShownWhole:
    """Quartermaster's admin pages show what they hold whole (controlplane/static/controlplane/admin.css):
    a list fits a 1,400 px desktop beside its filters, its headers, times and related records
    wrapping at their spaces instead of scrolling the table sideways, and a number box is wide
    enough for the largest value its column takes."""

    class Media:
        css = {"all": ("controlplane/admin.css",)}


def _label(name: str, field: forms.Field) -> str:
    return str(field.label or pretty_name(name))


def name_controls(fields: dict[str, forms.Field], *, in_a_row: bool) -> None:
    """Give a name to each control a screen reader would meet unnamed. A date and time field
    (Django's split widget) is one label over two boxes, and Chromium named neither: each box is
    "<label>, date" / "<label>, time (UTC)", the time zone every admin time is in, which its help
    text says only to the eye (Django gives that help no id to describe the boxes by). In a tabular
    inline's row (``in_a_row``) no box has a label of its own, only the column's header: each is
    named as its column ("User", "Role", "Delete")."""
    for name, field in fields.items():
        label = _label(name, field)
        widget = getattr(field.widget, "widget", field.widget)  # inside Django's related-field wrapper
        if isinstance(widget, forms.SplitDateTimeWidget):
            parts = ("date", f"time ({settings.TIME_ZONE})")
            for sub, part in zip(widget.widgets, parts, strict=True):
                sub.attrs.setdefault("aria-label", f"{label}, {part}")
        elif in_a_row and not widget.is_hidden:
            widget.attrs.setdefault("aria-label", label)


class NamedControls:
    """A change form's controls all named (`name_controls`): its date and time boxes."""

    def get_form(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        form = super().get_form(request, *args, **kwargs)  # type: ignore[misc]
        name_controls(form.base_fields, in_a_row=False)
        return form


class NamedInlineControls:
    """A tabular inline's controls named as their columns, its Delete box too (`name_controls`):
    Chromium's accessibility tree had no name for a membership's user and role selects, a
    project's name box or any row's Delete checkbox, which Django labels by the column's header alone."""

    def get_formset(self, request: Any, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)  # type: ignore[misc]
        name_controls(formset.form.base_fields, in_a_row=True)

        class Named(formset):  # type: ignore[misc, valid-type]
            def add_fields(self, form: Any, index: Any) -> None:
                super().add_fields(form, index)
                name_controls({k: form.fields[k] for k in ("DELETE",) if k in form.fields}, in_a_row=True)

        Named.__name__ = formset.__name__
        return Named


class DeletesSelectedLocked:
    """Django's "Delete selected" deletes under row locks here (`delete_selected_locked`)."""

    def get_actions(self, request):  # type: ignore[no-untyped-def]
        actions = super().get_actions(request)  # type: ignore[misc]
        if "delete_selected" in actions:
            _, name, description = actions["delete_selected"]
            actions["delete_selected"] = (delete_selected_locked, name, description)
        return actions


class KeepsOthersChanges(DeletesSelectedLocked, NamedControls, ShownWhole, IntegerColumnBounds, PlainTextColumns,
                         admin.ModelAdmin):
    """Change pages (and their inlines) that never silently undo another admin's save
    (OpenedAsForm), and say which of her changes they kept."""

    form = OpenedAsForm

    def get_object(self, request, object_id, from_field=None):  # type: ignore[no-untyped-def]
        """On a save or a deletion (a POST: the admin's change and delete views each run in one
        transaction) the record's row is locked before it is read, so the form is judged against
        the row as it is and nothing else writes it until the save commits; a record deleted
        meanwhile is then gone, and Django says so ("… doesn't exist. Perhaps it was deleted?").
        Before, it was read unlocked: a change committed between that read and the save was
        undone by the save (OpenedAsForm judged the page against the row as read), and a record
        deleted in between made the save a 500 ("Save with update_fields did not affect any
        rows").

        A deletion locks it FOR UPDATE, as the API's DELETE does: no row referring to it (a job
        submitted for the team meanwhile) can appear between the page's check of what protects
        it and the deletion. A save locks it FOR NO KEY UPDATE, and its inline rows too (a
        team's quotas, memberships and projects), so an inline row changed or deleted by
        another admin or the API meanwhile is judged as it is now rather than written back
        (before, a quota's borrowing limit set meanwhile was undone by the team page's save of
        its nominal, and a quota deleted meanwhile was inserted again)."""
        if request.method == "POST" and from_field is None and transaction.get_connection().in_atomic_block:
            try:
                key = self.model._meta.pk.to_python(object_id)
            except (ValidationError, ValueError):
                key = None
            if key is not None:
                deleting = getattr(request, "_deleting_record", False)
                if self.model._base_manager.select_for_update(no_key=not deleting).filter(pk=key).exists() \
                        and not deleting:
                    self._lock_inline_rows(key)
        return super().get_object(request, object_id, from_field)

    def _lock_inline_rows(self, key: Any) -> None:
        """Lock the rows this page's inlines edit (after their parent's, each inline's by key:
        every writer takes them in that order)."""
        for inline in self.inlines:
            parent = _get_foreign_key(self.model, inline.model, fk_name=inline.fk_name)
            list(inline.model._base_manager.select_for_update(no_key=True).filter(**{parent.name: key})
                 .order_by("pk").values_list("pk", flat=True))

    def delete_view(self, request, object_id, extra_context=None):  # type: ignore[no-untyped-def]
        request._deleting_record = True  # get_object locks the record for its deletion
        return super().delete_view(request, object_id, extra_context)

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):  # type: ignore[no-untyped-def]
        """A save refused on its fields heads the page (its title, heading and breadcrumb) with
        the record as stored: Django's form writes the values sent onto the record before the
        model's checks refuse them, and the page read "language × H100-80GB: 5000000" above the
        refusal of that 5000000, nothing saved."""
        if change and obj is not None and obj.pk is not None and context.get("errors"):
            stored = self.model._base_manager.filter(pk=obj.pk).first()
            if stored is not None:
                context["subtitle"], context["original"] = str(stored), stored
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)

    def save_related(self, request, form, formsets, change):  # type: ignore[no-untyped-def]
        super().save_related(request, form, formsets, change)
        for each in [form, *(f for formset in formsets for f in formset.forms)]:
            for line in getattr(each, "kept_changes", ()):
                self.message_user(request, line, level=messages.WARNING)


def delete_selected_locked(modeladmin: admin.ModelAdmin, request: Any, queryset: models.QuerySet[Any]) -> Any:
    """Django's "Delete selected" action, its confirmed deletion run in one transaction that
    first locks the selected rows (FOR UPDATE, by key: as a single deletion and the API's DELETE
    lock theirs), then judges them as they are: what protects one (a team's jobs) is counted
    under the lock and refuses the deletion on Django's "Cannot delete" page, and a row another
    admin or the API deleted meanwhile is said, not deleted nor recorded again.

    The admin is told how many rows this deletion deleted, the rows it locked ("Deleted 0 users."
    when another admin had deleted them all), beside the rows deleted meanwhile: Django's
    "Successfully deleted N" counted the rows as its page read them, before the lock.

    Before, the rows were read unlocked: two deletions at once each recorded a deleted event
    per row, a deletion racing a change recorded the row as it was before that change, and a
    team that got a job between the confirmation and the deletion made the deletion a 500."""
    if not request.POST.get("post"):
        return delete_selected(modeladmin, request, queryset)  # the confirmation page: reads only
    model = modeladmin.model
    with transaction.atomic(using=router.db_for_write(model)):
        if request.POST.get("select_across") not in (None, "", "0", "False", "false"):
            chosen = list(queryset.order_by().values_list("pk", flat=True))
        else:
            chosen = []
            for raw in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
                try:
                    chosen.append(model._meta.pk.to_python(raw))
                except (ValidationError, ValueError):
                    continue
        present = set(model._base_manager.select_for_update().filter(pk__in=chosen).order_by("pk")
                      .values_list("pk", flat=True))
        gone = sorted(pk for pk in chosen if pk not in present)
        deleted = 0
        if present:
            locked = queryset.filter(pk__in=present)
            _, _, perms_needed, protected = modeladmin.get_deleted_objects(locked, request)
            if perms_needed or protected:  # Django's refusal: PermissionDenied, or its "Cannot delete" page
                return delete_selected(modeladmin, request, locked)
            deleted = len(locked)  # every row is locked: delete_queryset deletes each
            modeladmin.log_deletions(request, locked)
            modeladmin.delete_queryset(request, locked)
        said = model_ngettext(modeladmin.opts, deleted)
        modeladmin.message_user(request, f"Successfully deleted {deleted} {said}." if deleted else f"Deleted 0 {said}.",
                                messages.SUCCESS if deleted else messages.INFO)
        if gone:
            label = model._meta.verbose_name if len(gone) == 1 else model._meta.verbose_name_plural
            modeladmin.message_user(
                request, f"{len(gone)} {label} ({', '.join(map(str, gone))}) had been deleted meanwhile (by another "
                         "admin, or through the API): not deleted nor recorded again here.", messages.WARNING)
    return None


class SaysWhatIsOnce(forms.BaseInlineFormSet):
    """An inline whose rows must differ in a column (a unique constraint with the page's record),
    refused in words that say the rule and what to do (`ONCE`), on the formset and on the row
    that repeats another. Django's own, "Please correct the duplicate data for user." and "Please
    correct the duplicate values below.", named no rule: an admin making a member the team's
    admin by adding a row, or giving a new team two rows of one GPU type, was left to guess."""

    ONCE = ""

    def get_unique_error_message(self, unique_check: Any) -> str:
        return self.ONCE

    def get_form_error(self) -> str:
        return "This row repeats another. " + self.ONCE


class OneRolePerTeam(SaysWhatIsOnce):
    """A user's memberships, on a team's page or a user's (unique on user and team)."""

    ONCE = "A user has one role in a team: change the role on the row already there instead of adding another."


class OneQuotaPerGpuType(SaysWhatIsOnce):
    """A team's quotas on its page (unique on team and GPU type)."""

    ONCE = "A team has one quota per GPU type: give all of this type's GPUs and limits in one row."


class OneProjectPerName(SaysWhatIsOnce):
    """A team's projects on its page (unique on team and name)."""

    ONCE = "A team has one project of a name: give each row another name."
