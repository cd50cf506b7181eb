"""Django admin: where admins tune quotas, cohorts, priority classes, prices and teams."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django import forms
from django.apps import apps as django_apps
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME, ActionForm
from django.contrib.admin.utils import NestedObjects, quote
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin as DjangoGroupAdmin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import models, router, transaction
from django.db.models import Count, F, QuerySet, Sum, Window
from django.db.models.functions import Lead
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import capfirst

from controlplane.admin_forms import (
    AdminSignInForm,
    DeletesSelectedLocked,
    IntegerColumnBounds,
    KeepsOthersChanges,
    NamedControls,
    NamedInlineControls,
    OneProjectPerName,
    OneQuotaPerGpuType,
    OneRolePerTeam,
    OpenedAsForm,
    PlainTextColumns,
    ShownWhole,
)
from controlplane.choices import AllocationState, NodeState, Role
from controlplane.models import (
    Allocation,
    AllocationGpu,
    ApiToken,
    Cohort,
    Event,
    GpuType,
    Job,
    MaintenanceWindow,
    Membership,
    Node,
    NotificationHook,
    PriceRate,
    PriorityClass,
    Project,
    Quota,
    QuotaRollup,
    SchedulerLease,
    Team,
)
from controlplane.models.fleet import PRICE_HORIZON_YEARS
from controlplane.models.jobs import HOLD_REASON_MAX_LENGTH
from controlplane.models.maintenance import MaintenanceWindowState
from controlplane.models.quotas import MAX_QUOTA_GPUS, PAST_QUOTA_CEILING
from controlplane.models.teams import team_classes_problem
from controlplane.services import (
    access,
    api_tokens,
    cohorts,
    config_audit,
    maintenance,
    nodes,
    notifications,
    preemption_budgets,
    quota_text,
    quotas,
    scheduler_policy,
)
from controlplane.services import jobs as job_service
from controlplane.services.hold_text import reason_problem
from controlplane.services.whole_words import whole_words_html
from scheduler_core.sentences import counted

# The admin is where fleet admins tune quotas and priorities: it says whose it is.
admin.site.site_header = "Quartermaster administration"
admin.site.site_title = "Quartermaster admin"
admin.site.index_title = "Fleet configuration"
_models_app_list = admin.site.get_app_list


def _may_use_admin(request: HttpRequest) -> bool:
    """The site's door (AdminSite.has_permission: Django's asks `is_staff` alone): a fleet admin
    by membership is let in as a staff user is, and what each page then allows is their
    permissions' (services/access.py: one home for both rules)."""
    return access.may_use_admin_site(request.user)


admin.site.has_permission = _may_use_admin  # type: ignore[method-assign]
admin.site.login_form = AdminSignInForm


#: The permission the "Scheduler policy" page asks (models/scheduling.SchedulerLease.Meta).
VIEW_POLICY = "controlplane.view_scheduler_policy"


def _app_list_with_policy(request: HttpRequest, app_label: str | None = None) -> list[dict[str, Any]]:
    """The index's and the sidebar's list, with "Scheduler policy" among the fleet's records
    (SchedulerLeaseAdmin.policy_view) for whoever may view the policy: admins tune quotas and
    priorities here and need the policy the cycle runs with beside them. One who may view
    nothing else of the app (an operator given only the policy) is shown the app with it alone."""
    apps = _models_app_list(request, app_label)
    if not request.user.has_perm(VIEW_POLICY) or app_label not in (None, "controlplane"):
        return apps
    ours = next((app for app in apps if app["app_label"] == "controlplane"), None)
    if ours is None:
        config = django_apps.get_app_config("controlplane")
        ours = {"name": config.verbose_name, "app_label": config.label,
                "app_url": reverse("admin:app_list", kwargs={"app_label": config.label}),
                "has_module_perms": True, "models": []}
        apps = sorted([*apps, ours], key=lambda app: str(app["name"]).lower())
    ours["models"].append({
        "model": None, "name": "Scheduler policy", "object_name": "SchedulerPolicy",
        "perms": {"add": False, "change": False, "delete": False, "view": True},
        "admin_url": reverse("admin:controlplane_scheduler_policy"), "add_url": None, "view_only": True,
    })
    ours["models"].sort(key=lambda m: str(m["name"]))
    return apps


admin.site.get_app_list = _app_list_with_policy  # type: ignore[method-assign]


class MembershipInline(NamedInlineControls, IntegerColumnBounds, admin.TabularInline):
    model = Membership
    form = OpenedAsForm
    formset = OneRolePerTeam
    extra = 0


class ProjectInline(NamedInlineControls, IntegerColumnBounds, PlainTextColumns, admin.TabularInline):
    model = Project
    form = OpenedAsForm
    formset = OneProjectPerName
    extra = 0


class QuotaWords:
    """A quota's fields say what they hold, on the quota page and on the team page's quota rows:
    above all what an empty limit means (the list's "no limit"), since a 0 means the opposite."""

    HELP = {
        "nominal_gpus": "GPUs of this type guaranteed to the team: it may always run this many, and reclaims them "
                        "from borrowers by preemption.",
        "borrowing_limit": "Most GPUs above its nominal the team may borrow from idle guarantees of its cohort. "
                           "Empty: no limit. 0: it borrows none. In no cohort it borrows nothing.",
        "lending_limit": "Most of its unused nominal GPUs the other teams of its cohort may borrow. Empty: all of "
                         "it. 0: it lends none. In no cohort it lends nothing.",
    }

    def formfield_for_dbfield(self, db_field, request, **kwargs):  # type: ignore[no-untyped-def]
        if db_field.name in self.HELP:
            # The quota's ceiling, not its integer column's (IntegerColumnBounds): a figure past
            # 2147483647 was told "less than or equal to 2147483647", one under it the ceiling.
            kwargs["max_value"] = MAX_QUOTA_GPUS
        field = super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]
        if field is not None and db_field.name in self.HELP:
            field.help_text = self.HELP[db_field.name]
            field.error_messages["max_value"] = f"%(value)s {PAST_QUOTA_CEILING}"
        return field


class QuotaInline(NamedInlineControls, QuotaWords, IntegerColumnBounds, admin.TabularInline):
    model = Quota
    form = OpenedAsForm
    formset = OneQuotaPerGpuType
    extra = 0


def _actor(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


def _whole(text: str | None) -> SafeString:
    """A list's cell that breaks at its spaces only, never at a hyphen inside a node's or a team's
    name (services/whole_words.py: the pages' rule). Django's admin broke them like any word:
    "gpu-a100-" / "017" in an event's message, "recommendation-" / "systems" in the quota list."""
    return mark_safe(whole_words_html(text))  # noqa: S308 (escaped by whole_words_html)


class TeamColumn:
    """A list's team column, its name held whole (`_whole`)."""

    @admin.display(description="team", ordering="team__name")
    def team_name(self, obj: Any) -> str:
        return _whole(obj.team.name) if obj.team_id is not None else "-"


class ConfigAudited(KeepsOthersChanges):
    """Creations, changes and deletions here are config.changed events, as in the API
    (services/config_audit.py); the change view's transaction holds the row and its event.
    A change writes only the form's own columns (see TeamAdmin, NodeAdmin)."""

    def _write(self, obj: Any, form: Any, change: bool) -> None:
        if change:
            columns = {f.name for f in obj._meta.concrete_fields}
            obj.save(update_fields=[name for name in form.fields
                                    if name in columns and name not in self.get_readonly_fields(None)])
        else:
            obj.save()

    def audit_note(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> tuple[str, dict[str, Any] | None]:
        """What the save's event adds to its words and data (see PriorityClassAdmin), read
        before the row is written; nothing by default."""
        return "", None

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        before = config_audit.before_change(obj) if change else None
        why, data = self.audit_note(request, obj, form, change)
        self._write(obj, form, change)
        config_audit.record_config_change(obj, "changed" if change else "created", before, _actor(request),
                                          why=why, data=data)

    def delete_model(self, request, obj):  # type: ignore[no-untyped-def]
        config_audit.record_config_change(obj, "deleted", config_audit.config_record(obj), _actor(request))
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            for obj in queryset:
                self.delete_model(request, obj)

    def get_deleted_objects(self, objs, request):  # type: ignore[no-untyped-def]
        """The confirmation page also says what changes in the records that stay (a team whose
        default class this is). A record with history (rows that protect it: jobs, rollups,
        allocations) is refused in a few lines counted per kind, one query each, before Django
        would load and list every protecting row (20,160 lines for a week of one quota's minute
        rollups)."""
        history = [line for obj in objs for line in _history(obj)]
        history += [f"{refusal}." for obj in objs
                    if (refusal := config_audit.deletion_refused(obj))]
        if history:
            return [], {}, set(), history
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # `_history` found no quota rollup with anything in it: those Django's collector still
        # calls protected are empty, and go with the record (GpuType.delete, Team.delete).
        empty = f"{capfirst(QuotaRollup._meta.verbose_name)}: "
        protected = [line for line in protected if not str(line).startswith(empty)]
        return [*deleted, *(line for obj in objs for line in config_audit.deletion_consequences(obj))], \
            counts, perms_needed, protected


_RETIRE = {
    Team: "To retire it, take it out of its cohort and delete its quotas and memberships on this team's page.",
    GpuType: ("It stays for the reports: with no nodes and no quotas of this type, no job can run on it (a job "
              "asking for it alone is told it can never run)."),
    Node: ("To retire it, drain it (Nodes: the Drain action), then retire it once it is cordoned (Nodes: the "
           "Retire action): it leaves the fleet's capacity and idle cost, and its history stays."),
}
# Records that refer to another and can be deleted or changed first; every other protecting
# record (jobs, allocations, rollups) is history, kept for good.
_SETTINGS = (Quota, Node)


def _history(obj: Any) -> list[str]:
    """What protects ``obj`` from deletion (Django's PROTECT), counted per kind, with what to do
    instead; nothing when nothing does."""
    lines, history = [], False
    for relation in obj._meta.related_objects:
        if relation.on_delete is not models.PROTECT:
            continue
        rows = relation.related_model._base_manager.filter(**{relation.field.name: obj.pk})
        if relation.related_model is QuotaRollup:
            rows = rows.exclude(QuotaRollup.empty())  # deleted with it (GpuType.delete, Team.delete)
        n = rows.count()
        if n:
            setting = relation.related_model in _SETTINGS
            history = history or not setting
            named = ", ".join(str(row) for row in rows[:10]) + (", …" if n > 10 else "") if setting else ""
            lines.append(f"{str(relation.related_model._meta.verbose_name_plural).capitalize()}: {n:,}"
                         + (f" (delete or change them first): {named}" if setting else ""))
    if not history:
        return lines
    label = str(obj._meta.verbose_name)
    return [*lines, f"{label[:1].upper()}{label[1:]} {getattr(obj, 'name', obj)} has history that accounting and the "
            "audit trail keep. " + (obj.retirement_advice("on its page", "on their pages") if isinstance(obj, PriorityClass) else _RETIRE.get(type(obj), ""))]


def _save_recorded_formset(request: HttpRequest, formset: Any, snapshot: Any, record: Any,
                           after_save: Any = None) -> None:
    """Save an inline formset row by row, each change with its audit event (the change view's
    transaction holds the rows and their events): ``snapshot(obj)`` is what an event's before
    and after hold, ``record(obj, verb, before, actor)`` writes it."""
    ids = [f.instance.pk for f in formset.initial_forms if f.instance.pk]
    before = {o.pk: snapshot(o) for o in formset.model._default_manager.filter(pk__in=ids)}
    saved = formset.save(commit=False)
    for obj in formset.deleted_objects:
        record(obj, "deleted", before.get(obj.pk), _actor(request))
        obj.delete()
    for obj in saved:
        known = before.get(obj.pk)
        obj.save()
        record(obj, "changed" if known else "created", known, _actor(request))
        if after_save is not None:
            after_save(obj, known)
    formset.save_m2m()


class UserMembershipInline(NamedInlineControls, IntegerColumnBounds, admin.TabularInline):
    """A user's roles: a team's (member, admin) or none's (finance reads every team, as an admin
    does). Memberships were edited only on team pages, so a role in no team (the demo's finn)
    could be neither seen nor granted nor taken back here."""

    model = Membership
    fk_name = "user"
    formset = OneRolePerTeam
    extra = 0
    verbose_name = "role"
    verbose_name_plural = "roles (a team's, or none's: finance and admins read every team)"


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)
# No admin page lists API tokens (until 6 Dec DRF's "Tokens" page listed every user's live
# token in clear; since, only their digests are stored: services/api_tokens.py). The users list
# revokes them.


class _UsersRecords(NestedObjects):
    """Django's collector of what a deletion takes with it, reading each membership's team and
    each API token's owner with it: a membership's line names its team ("dora in ml as member"),
    a token's its owner ("token 12 of dora, …"), which Django would read in one query per row,
    so "Delete selected users" would cost a query more for each user."""

    def related_objects(self, related_model, related_fields, objs):  # type: ignore[no-untyped-def]
        found = super().related_objects(related_model, related_fields, objs)
        named_by = {Membership: "team", ApiToken: "user"}.get(related_model)
        return found.select_related(named_by) if named_by else found


def _deleted_objects(objs: Any, request: HttpRequest, admin_site: admin.AdminSite) -> Any:
    """django.contrib.admin.utils.get_deleted_objects (Django 5.2) with `_UsersRecords` for its
    collector, which that function does not let a caller choose: what goes with the users, each
    line as Django says it, perms_needed and protected as Django judges them."""
    if not objs:
        return [], {}, set(), []
    collector = _UsersRecords(using=router.db_for_write(objs[0]._meta.model), origin=objs)
    collector.collect(objs)
    perms_needed: set[str] = set()

    def format_callback(obj: Any) -> Any:
        opts = obj._meta
        no_edit_link = f"{capfirst(opts.verbose_name)}: {obj}"
        if not admin_site.is_registered(obj.__class__):
            return no_edit_link
        if not admin_site.get_model_admin(obj.__class__).has_delete_permission(request, obj):
            perms_needed.add(opts.verbose_name)
        try:
            url = reverse(f"{admin_site.name}:{opts.app_label}_{opts.model_name}_change", None, (quote(obj.pk),))
        except NoReverseMatch:
            return no_edit_link
        return format_html('{}: <a href="{}">{}</a>', capfirst(opts.verbose_name), url, obj)

    to_delete = collector.nested(format_callback)
    protected = [format_callback(obj) for obj in collector.protected]
    counts = {model._meta.verbose_name_plural: len(found) for model, found in collector.model_objs.items()}
    return to_delete, counts, perms_needed, protected


@admin.register(User)
class UserAdmin(DeletesSelectedLocked, NamedControls, ShownWhole, DjangoUserAdmin):
    """Django's user pages with the user's roles (memberships), each change recorded as on a
    team's page (config.changed); the list says each user's roles."""

    inlines = [*DjangoUserAdmin.inlines, UserMembershipInline]
    list_display = (*DjangoUserAdmin.list_display, "roles")
    actions = ["revoke_api_tokens"]

    #: An account as a fleet admin by membership reads it (`_roles_only`): who it is and what
    #: Django lets it do, never its password's hash.
    ACCOUNT_READ = ("username", "first_name", "last_name", "email", "is_active", "is_staff", "is_superuser",
                    "groups", "last_login", "date_joined")

    @staticmethod
    def _roles_only(request: HttpRequest) -> bool:
        """A fleet admin by membership, not given Django's "Can change user": they grant and take
        back roles here (a membership is the fleet's, as on a team's page), and the account is
        read-only. Its password, staff and superuser flags, groups and permissions are Django's,
        beyond the fleet: with them a role admin could make themself a superuser or sign in as
        anyone, which no role gives (users are not in the API). Adding and deleting users stay
        with superusers too (services/access.FleetAdminPermissions grants viewing users only)."""
        return not request.user.has_perm("auth.change_user") and access.access_of(request.user).is_admin

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) or self._roles_only(request)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is not None and self._roles_only(request):
            return [(None, {"fields": self.ACCOUNT_READ})]
        return super().get_fieldsets(request, obj)

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        """For a roles-only admin, a form of no field: Django's UserChangeForm declares the
        password's (its hash summarised), which no fieldset leaves out."""
        if obj is not None and self._roles_only(request):
            kwargs["form"] = forms.ModelForm
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if self._roles_only(request):
            return self.ACCOUNT_READ
        return super().get_readonly_fields(request, obj)

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        """A roles-only save writes nothing of the account: not even the row as it was read,
        which would undo a superuser's change saved meanwhile (staff taken away, say)."""
        if change and self._roles_only(request):
            return
        super().save_model(request, obj, form, change)

    # Asks "change": revoking signs a user out of every client, which one who may only view
    # users (a staff operator's group) must not do; a fleet admin by membership may
    # (has_change_permission), a superuser's tokens too: it takes access away and gives none.
    @admin.action(description="Revoke API tokens (they sign in again: qm login)", permissions=["change"])
    def revoke_api_tokens(self, request: HttpRequest, queryset: Any) -> None:
        revoked, had_none = api_tokens.revoke(list(queryset), _actor(request))
        said = "; ".join(
            ([f"Revoked the API tokens of {', '.join(revoked)}"] if revoked else [])
            + ([f"{', '.join(had_none)} had none"] if had_none else []))
        self.message_user(request, said + ".", messages.SUCCESS if revoked else messages.INFO)

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).prefetch_related("memberships__team")

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):  # type: ignore[no-untyped-def]
        """A user created, or changed in who they are or what they may do (active, staff,
        superuser: an admin of the fleet; groups, permissions), is a config.changed event,
        recorded by the user's save (services/config_audit.user_saved) as this admin's: one for
        the page's columns and its groups and permissions, saved after them; the view's
        transaction holds the user and its event."""
        with config_audit.changing_users(_actor(request)):
            return super().changeform_view(request, object_id, form_url, extra_context)

    def user_change_password(self, request, id, form_url=""):  # type: ignore[no-untyped-def]
        """The user's password page: a password set, or made unusable, is a `UserPasswordChanged`
        event (never the password nor its hash); until 6 Dec it was in Django's own log only.
        Not a roles-only admin's (`_roles_only`): setting one's password is signing in as them."""
        if self._roles_only(request):
            raise PermissionDenied
        return config_audit.password_change_recorded(
            _actor(request), lambda: super(UserAdmin, self).user_change_password(request, id, form_url))

    def delete_model(self, request, obj):  # type: ignore[no-untyped-def]
        """Recorded by the user's delete (services/config_audit.user_deleted) as this admin's, the
        memberships that go with the user each recorded."""
        with config_audit.changing_users(_actor(request)):
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        """"Delete selected users": the users locked and their deletions recorded together, in a
        constant number of queries however many are selected (each user's own pre_delete read
        and wrote a dozen: services/config_audit.users_deleting), then deleted."""
        with config_audit.changing_users(_actor(request)):
            users = config_audit.users_deleting(list(queryset.order_by().values_list("pk", flat=True)))
            super().delete_queryset(request, self.model._default_manager.filter(pk__in=[u.pk for u in users]))

    def get_deleted_objects(self, objs, request):  # type: ignore[no-untyped-def]
        """The confirmation page (and "Delete selected users") also says what the deletion empties
        in the records that stay, which Django's list of what goes leaves out: the jobs the user
        submitted or holds, the maintenance windows they created or cancelled, counted; and the
        API tokens that go with them, by id and issue time, which Django's list names only by
        number. A constant number of queries, however many users are selected."""
        deleted, counts, perms_needed, protected = _deleted_objects(objs, request, self.admin_site)
        return [*deleted, *config_audit.deletions_consequences(list(objs))], counts, perms_needed, protected

    @admin.display(description="roles")
    def roles(self, user: Any) -> str:
        said = sorted(f"{m.role} of {m.team.name}" if m.team_id and m.role != Role.FINANCE else str(m.role) for m in user.memberships.all())
        return _whole(", ".join(said) or "none")

    def save_formset(self, request, form, formset, change):  # type: ignore[no-untyped-def]
        if formset.model is Membership:
            _save_recorded_formset(request, formset, config_audit.config_record, config_audit.record_config_change)
            return None
        return super().save_formset(request, form, formset, change)


if admin.site.is_registered(Group):
    admin.site.unregister(Group)


@admin.register(Group)
class GroupAdmin(NamedControls, ShownWhole, DjangoGroupAdmin):
    """A group's permissions are what its staff members may change on these pages ("Can change
    quota": every team's quota): a group created, renamed, given or refused a permission, or
    deleted is a config.changed event (GroupCreated, GroupChanged, GroupDeleted, each member's
    UserChanged with it), as a user's own groups and permissions are; until 7 Dec none was."""

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        request.group_before = config_audit.before_change(obj) if change else None
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change):  # type: ignore[no-untyped-def]
        """Recorded once its permissions (many to many, saved after the group) are saved too."""
        super().save_related(request, form, formsets, change)
        config_audit.record_config_change(form.instance, "changed" if change else "created",
                                          getattr(request, "group_before", None), _actor(request))

    def delete_model(self, request, obj):  # type: ignore[no-untyped-def]
        with transaction.atomic():  # its members leave it, each recorded
            config_audit.record_config_change(obj, "deleted", config_audit.config_record(obj), _actor(request))
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            for group in queryset:
                self.delete_model(request, group)


class TeamForm(OpenedAsForm):
    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if problem := team_classes_problem(cleaned.get("default_priority_class"), cleaned.get("priority_classes")):
            self.add_error("default_priority_class", problem)
        return cleaned


@admin.register(Team)
class TeamAdmin(ConfigAudited):
    form = TeamForm
    list_display = ("team", "cohort", "default_priority_class")
    list_select_related = ("cohort", "default_priority_class")
    list_filter = ("cohort",)
    search_fields = ("name",)
    inlines = [MembershipInline, ProjectInline, QuotaInline]
    # The team's decayed past usage (fair share) is the scheduling loop's, folded forward every
    # cycle: shown, never an input (saving the page wrote back the values it was opened with).
    readonly_fields = ("fair_share_usage", "usage_as_of")
    exclude = ("decayed_gpu_seconds", "decayed_cpu_seconds", "decayed_memory_gb_seconds")

    @admin.display(description="name", ordering="name")
    def team(self, obj: Team) -> str:
        return _whole(obj.name)

    @admin.display(description="fair-share usage (decayed)")
    def fair_share_usage(self, obj: Team) -> str:
        half_life_days = float(settings.QM["FAIR_SHARE_HALF_LIFE_S"]) / 86400
        return (f"{obj.decayed_gpu_seconds / 3600:,.1f} GPU-hours, {obj.decayed_cpu_seconds / 3600:,.1f} CPU-hours, "
                f"{obj.decayed_memory_gb_seconds / 3600:,.1f} GB-hours of memory; past use counts half after "
                f"{half_life_days:g} days (QM_FAIR_SHARE_HALF_LIFE_S). The scheduler orders teams by it.")

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        """A change writes only the form's own columns, so a cycle's usage fold committed while
        the request ran is kept. The cohort it was in is read first: `save_related` records the
        move."""
        request.cohort_before = cohorts.cohort_of(obj.pk) if change else None
        # recorded in save_related, once its priority classes (many to many) are saved too
        request.team_before = config_audit.before_change(obj) if change else None
        self._write(obj, form, change)

    def formfield_for_manytomany(self, db_field, request, **kwargs):  # type: ignore[no-untyped-def]
        """The priority classes as checkboxes, highest class first. Given here, not swapped in
        afterwards, so Django leaves out its list-box hint (hold down Control to select more
        than one), which checkboxes do not need."""
        if db_field.name == "priority_classes":
            kwargs["widget"] = forms.CheckboxSelectMultiple()
            kwargs["queryset"] = PriorityClass.objects.order_by("-value", "name")
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def save_related(self, request, form, formsets, change):  # type: ignore[no-untyped-def]
        """A team joining, leaving or changing cohort is recorded as in the API
        (services/cohorts.py; the change view's transaction holds the team and its event), once
        its inline quotas are saved: leaving for no cohort clears their borrowing and lending
        limits, each with its event, and the page says so (a quota row saved after the move
        wrote back the limits it was opened with)."""
        super().save_related(request, form, formsets, change)
        config_audit.record_config_change(form.instance, "changed" if change else "created",
                                          getattr(request, "team_before", None), _actor(request))
        team, before = form.instance, getattr(request, "cohort_before", None)
        moved = cohorts.record_team_move(team, before, _actor(request))
        if moved is None:
            return
        if moved.data.get("limits_cleared"):
            self.message_user(request, (
                f"Team {team.name} left cohort {before}: in no cohort it borrows and lends nothing, so its quotas' "
                f"borrowing and lending limits were cleared ({'; '.join(moved.data['limits_cleared'])}), each "
                "recorded as a quota change. Set them again once it joins a cohort."), level=messages.WARNING)
        if change:
            for warning in quotas.held_above_nominal_after_move(team, before):
                self.message_user(request, warning, level=messages.WARNING)

    def save_formset(self, request, form, formset, change):  # type: ignore[no-untyped-def]
        """The team page's quotas are recorded as quota.changed events, as on the quota pages
        and in the API, each row saved said against the fleet as there (until 7 Dec a nominal of
        500 on 96 GPUs was "changed successfully" here alone); its memberships and projects as
        config.changed events."""
        if formset.model is Quota:
            def said(quota: Quota, before: dict[str, Any] | None) -> None:
                _warn_held_above_nominal(self, request, quota, before)
                for warning in quotas.above_fleet_warnings(quota):
                    self.message_user(request, warning, level=messages.WARNING)

            _save_recorded_formset(request, formset, quotas.quota_record, quotas.record_quota_change, said)
        else:
            _save_recorded_formset(request, formset, config_audit.config_record, config_audit.record_config_change)
        return None


def _warn_held_above_nominal(modeladmin: admin.ModelAdmin, request: HttpRequest, quota: Quota,
                             before: dict[str, Any] | None) -> None:
    for warning in (quotas.held_above_nominal(quota, before), quotas.lent_beyond_lending_limit(quota, before)):
        if warning:
            modeladmin.message_user(request, warning, level=messages.WARNING)


def _borrowed(held: int, quota: Quota) -> str:
    """What the team holds above its nominal, and by how much that passes its borrowing limit
    (after its quota or limit was lowered under what it runs)."""
    return quota_text.borrowed_within_limit_said(max(0, held - quota.nominal_gpus), quota.borrowing_limit)


def cohort_overcommit_warnings(cohort: Cohort) -> list[str]:
    """Guarantees in a cohort that exceed the fleet's capacity of that GPU type."""
    warnings = []
    guaranteed = (
        Quota.objects.filter(team__cohort=cohort)
        .values("gpu_type__name", "gpu_type_id")
        .annotate(total=Sum("nominal_gpus"))
    )
    fleet = quotas.fleet_gpus_by_type()
    for row in guaranteed:
        capacity = fleet.get(row["gpu_type_id"], 0)
        if row["total"] > capacity:
            warnings.append(
                f"Cohort {cohort.name} guarantees {row['total']} {row['gpu_type__name']} GPUs "
                f"but the fleet has {capacity}: these guarantees cannot all be honoured at once."
            )
    return warnings


@admin.register(Cohort)
class CohortAdmin(KeepsOthersChanges):
    """Cohorts created, changed or deleted here are recorded as the API's are
    (services/cohorts.py: cohort.changed events, reasons Cohort*)."""

    list_display = ("name", "description", "member_teams")
    readonly_fields = ("members",)

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).annotate(team_count=Count("teams"))

    @admin.display(description="teams", ordering="team_count")
    def member_teams(self, obj: Cohort) -> int:
        return int(getattr(obj, "team_count", 0))

    @admin.display(description="members and their quotas")
    def members(self, obj: Cohort) -> str:
        """What the cohort pools, read where it is tuned: each member's quota per GPU type with
        its limits and what it holds now (edit them on the team or quota pages)."""
        if obj.pk is None:
            return "Add teams to this cohort on their team pages."
        rows = quotas.with_held_gpus(
            Quota.objects.filter(team__cohort=obj).select_related("team", "gpu_type").order_by("gpu_type__name", "team__name")
        )
        lent = quotas.lent_now()
        body = format_html_join(
            # A row is named by its GPU type and team: both head it (th scope="row"), so a screen
            # reader says "H100-80GB, vision, held now, 8", not a bare "8" (until 6 Dec, plain cells).
            "", "<tr><th scope=\"row\">{}</th><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                "<td>{}</td><td>{}</td></tr>",
            ((q.gpu_type.name, q.team.name, q.nominal_gpus, quota_text.limit_said(q.borrowing_limit, True),
              quota_text.limit_said(q.lending_limit, True),
              q.held_gpus, _borrowed(q.held_gpus, q),
              quota_text.lent_within_limit_said(lent.get((q.team_id, q.gpu_type_id), 0.0), q.lending_limit, True))
             for q in rows),
        )
        if not body:
            return "No member team has a quota yet."
        shares = any(quota_text.is_share(lent.get((q.team_id, q.gpu_type_id), 0.0)) for q in rows)
        return format_html(
            "<table><thead><tr><th scope=\"col\">GPU type</th><th scope=\"col\">team</th><th scope=\"col\">nominal</th>"
            "<th scope=\"col\">borrowing limit</th><th scope=\"col\">lending limit</th><th scope=\"col\">held now</th>"
            "<th scope=\"col\">borrowed</th><th scope=\"col\">lent</th></tr></thead><tbody>{}</tbody></table>"
            "{}", body, format_html("<p>{}</p>", quota_text.LENT_SHARE_NOTE) if shares else "")

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        # The admin's change view runs in one transaction: the cohort and its event go together.
        before = cohorts.cohort_record(Cohort.objects.get(pk=obj.pk)) if change else None
        super().save_model(request, obj, form, change)
        cohorts.record_cohort_change(obj, "changed" if change else "created", before, _actor(request))

    def delete_model(self, request, obj):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            cohorts.record_cohort_change(obj, "deleted", cohorts.cohort_record(obj), _actor(request))
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            for cohort in queryset:
                cohorts.record_cohort_change(cohort, "deleted", cohorts.cohort_record(cohort), _actor(request))
            super().delete_queryset(request, queryset)

    def get_deleted_objects(self, objs, request):  # type: ignore[no-untyped-def]
        """The confirmation page also names the teams that leave the cohort."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        return [*deleted, *(line for cohort in objs for line in cohorts.leaving_teams(cohort))], \
            counts, perms_needed, protected

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None):  # type: ignore[no-untyped-def]
        cohort = self.get_object(request, object_id)
        if cohort is not None:
            for warning in cohort_overcommit_warnings(cohort):
                self.message_user(request, warning, level=messages.WARNING)
        return super().change_view(request, object_id, form_url, extra_context)


@admin.register(Quota)
class QuotaAdmin(TeamColumn, QuotaWords, KeepsOthersChanges):
    list_display = ("team_name", "cohort", "gpu_type", "nominal_gpus", "held_now", "above_nominal", "lent",
                    "borrowing", "lending")
    list_filter = ("gpu_type", "team__cohort")
    list_select_related = ("team__cohort", "gpu_type")
    # What the team runs and lends under the quota, read before a nominal or a limit is lowered
    # under it (the save's warnings then say what follows).
    readonly_fields = ("in_use_now",)

    def get_queryset(self, request: HttpRequest) -> Any:
        return quotas.with_held_gpus(super().get_queryset(request))

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):  # type: ignore[no-untyped-def]
        """A save locks the rows of the teams it judges (the quota's and the one it names)
        before the quota's own (get_object) and before either is read, as a team's move out of
        its cohort takes them: a limit saved while the move is in flight waits for it and is
        judged in no cohort (quotas.lock_teams_for_quota_write)."""
        if request.method != "POST":
            return super().changeform_view(request, object_id, form_url, extra_context)
        with transaction.atomic(using=router.db_for_write(self.model)):
            quotas.lock_teams_for_quota_write(quota_pk=object_id, team_pk=request.POST.get("team"))
            return super().changeform_view(request, object_id, form_url, extra_context)

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        """The page's quotas with what each lends now (quotas.lent_now: two queries)."""
        changelist = super().get_changelist_instance(request)
        lent = quotas.lent_now()
        for quota in changelist.result_list:
            quota.lent_gpus = lent.get((quota.team_id, quota.gpu_type_id), 0.0)
        if any(quota_text.is_share(quota.lent_gpus) for quota in changelist.result_list):
            self.message_user(request, quota_text.LENT_SHARE_NOTE, level=messages.INFO)
        return changelist

    @admin.display(description="in use now")
    def in_use_now(self, obj: Quota) -> str:
        if obj.pk is None:
            return "-"
        held = int(obj.held_gpus) if hasattr(obj, "held_gpus") else quotas.held_gpus(obj)
        lent = quotas.lent_now().get((obj.team_id, obj.gpu_type_id), 0.0)
        return (f"holds {held} {obj.gpu_type.name} GPUs: {_borrowed(held, obj)} above its nominal (borrowed); "
                f"lends {quota_text.lent_within_limit_said(lent, obj.lending_limit, obj.team.cohort_id is not None)}")

    @admin.display(description="lent now")
    def lent(self, obj: Quota) -> str:
        return quota_text.lent_within_limit_said(getattr(obj, "lent_gpus", 0.0), obj.lending_limit,
                                                 obj.team.cohort_id is not None)

    @admin.display(description="borrowing limit", ordering="borrowing_limit")
    def borrowing(self, obj: Quota) -> str:
        return quota_text.limit_said(obj.borrowing_limit, obj.team.cohort_id is not None)

    @admin.display(description="lending limit", ordering="lending_limit")
    def lending(self, obj: Quota) -> str:
        return quota_text.limit_said(obj.lending_limit, obj.team.cohort_id is not None)

    @admin.display(description="cohort", ordering="team__cohort__name")
    def cohort(self, obj: Quota) -> str:
        return _whole(obj.team.cohort.name) if obj.team.cohort_id is not None else "-"

    @admin.display(description="held now", ordering="held_gpus")
    def held_now(self, obj: Quota) -> int:
        return int(getattr(obj, "held_gpus", 0))

    @admin.display(description="above nominal (borrowed)")
    def above_nominal(self, obj: Quota) -> str:
        return _borrowed(self.held_now(obj), obj)

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        # The admin's change view runs in one transaction: the quota and its event go together.
        before = quotas.quota_record(Quota.objects.select_related("team", "gpu_type").get(pk=obj.pk)) if change else None
        super().save_model(request, obj, form, change)
        quotas.record_quota_change(obj, "changed" if change else "created", before, _actor(request))
        _warn_held_above_nominal(self, request, obj, before)
        # The quota's own words against the fleet (the API's `warnings`). A quota with a nominal
        # hears there of all teams' guarantees adding up past the fleet, which a cohort's doing
        # implies, so the cohort's words are kept for a quota of nominal 0 only (not said twice).
        for warning in quotas.above_fleet_warnings(obj):
            self.message_user(request, warning, level=messages.WARNING)
        if obj.team.cohort is not None and not obj.nominal_gpus:
            for warning in cohort_overcommit_warnings(obj.team.cohort):
                self.message_user(request, warning, level=messages.WARNING)

    def delete_model(self, request, obj):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            quotas.record_quota_change(obj, "deleted", quotas.quota_record(obj), _actor(request))
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            for quota in queryset.select_related("team", "gpu_type"):
                quotas.record_quota_change(quota, "deleted", quotas.quota_record(quota), _actor(request))
            super().delete_queryset(request, queryset)

    def get_deleted_objects(self, objs, request):  # type: ignore[no-untyped-def]
        """The confirmation page also says what becomes of the GPUs the team's running jobs
        hold under the quota (the API's DELETE answers the same)."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        return [*deleted, *(line for obj in objs for line in config_audit.deletion_consequences(obj))], \
            counts, perms_needed, protected


_span = config_audit.span


@admin.register(PriorityClass)
class PriorityClassAdmin(ConfigAudited):
    def audit_note(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> tuple[str, dict[str, Any] | None]:
        """A budget lowered under what unfinished jobs of the class already used in the window
        protects them from preemption until their preemptions leave it: taken, said on the page
        (save_model) and in the event, with the numbers (services/preemption_budgets.py)."""
        request._budget_spent_said = ""  # type: ignore[attr-defined]
        if not change or "preemption_budget" not in form.changed_data:
            return "", None
        said, spent = preemption_budgets.lowered_under_use(obj, form.initial.get("preemption_budget"))
        if not spent:
            return "", None
        request._budget_spent_said = said  # type: ignore[attr-defined]
        return preemption_budgets.audit_of(spent)

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        """A stop's deadline is fixed when it is ordered (Allocation.release_deadline): a new grace
        period changes only later stops, which the admin is told when jobs of the class are
        stopping now."""
        super().save_model(request, obj, form, change)
        if spent_said := getattr(request, "_budget_spent_said", ""):
            self.message_user(request, spent_said, level=messages.WARNING)
        if "value" in form.changed_data and (shared := obj.value_shared_warning()):
            self.message_user(request, f"{shared}.", level=messages.WARNING)
        if {"preemption_budget", "preemptible"} & set(form.changed_data) and (none := obj.budget_warning()):
            self.message_user(request, f"{none}.", level=messages.WARNING)
        if change and "max_runtime_limit_s" in form.changed_data and (beyond := job_service.beyond_class_maximum(obj)):
            self.message_user(request, beyond, level=messages.WARNING)
        touched = {"grace_period_s", "preemptible", "min_runtime_s"} & set(form.changed_data)
        if not change or not touched:
            return
        stopping = list(
            Allocation.objects.filter(state=AllocationState.RELEASING, job__priority_class=obj)
            .order_by("release_deadline", "job_id").values_list("job_id", "release_deadline")
        )
        if stopping:
            jobs = "; ".join(f"job {job_id}" + (f", by {deadline:%H:%M:%S} UTC" if deadline else "")
                             for job_id, deadline in stopping[:5])
            more = f" and {len(stopping) - 5} more" if len(stopping) > 5 else ""
            one = len(stopping) == 1
            what = (f"{'it keeps' if one else 'they keep'} the grace {'it was' if one else 'they were'} given; the new "
                    f"{obj.grace_period_s} s applies to stops ordered from now on." if touched == {"grace_period_s"} else
                    f"{'its stop goes' if one else 'their stops go'} ahead; the change applies to stops ordered from "
                    "now on.")
            self.message_user(request, (
                f"{counted(len(stopping), 'job')} of class {obj.name} {'is' if one else 'are'} stopping "
                f"now ({jobs}{more}): {what}"), level=messages.INFO)

    list_display = ("name", "value", "preemptible", "may_preempt_lower", "grace_period", "min_runtime", "budget",
                    "runtime_limits")

    @admin.display(description="grace period", ordering="grace_period_s")
    def grace_period(self, obj: PriorityClass) -> str:
        return _span(obj.grace_period_s)

    @admin.display(description="min runtime before preemption", ordering="min_runtime_s")
    def min_runtime(self, obj: PriorityClass) -> str:
        return _span(obj.min_runtime_s) if obj.min_runtime_s else "none"

    @admin.display(description="preemption budget", ordering="preemption_budget")
    def budget(self, obj: PriorityClass) -> str:
        """The budget governs reclaims of borrowed GPUs too (PriorityClass.budget_warning): a class
        not preemptible says it (until 6 Dec it read "not preemptible", its budget hidden, and a
        budget of 0 kept its borrowed GPUs from their lenders with no word)."""
        if obj.preemption_budget == 0:
            return "none: never preempted, borrowed GPUs included"
        budget = f"{counted(obj.preemption_budget, 'preemption')} per job per {_span(obj.budget_window_s)}"
        return budget if obj.preemptible else f"not by priority; of borrowed GPUs, {budget}"

    @admin.display(description="runtime limit: default / max")
    def runtime_limits(self, obj: PriorityClass) -> str:
        return f"{_span(obj.default_runtime_limit_s)} / {_span(obj.max_runtime_limit_s)}"


@admin.register(GpuType)
class GpuTypeAdmin(ConfigAudited):
    list_display = ("name", "memory_gb", "relative_throughput")


@admin.register(PriceRate)
class PriceRateAdmin(ConfigAudited):
    """Prices as finance types and reads them: "$ per GPU-hour", a start in UTC, and in the list
    until when each rate is in force (the next start of its GPU type and tier: the rule every
    cost is priced by, `PriceBook.rate_at`) and whether it is now."""

    list_display = ("gpu_type", "capacity_tier", "price", "effective_from", "until", "in_force")
    list_filter = ("gpu_type", "capacity_tier")

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).annotate(next_from=Window(
            Lead("effective_from"), partition_by=[F("gpu_type_id"), F("capacity_tier")],
            order_by=[F("effective_from").asc(), F("usd_per_gpu_hour").asc()]))

    def formfield_for_dbfield(self, db_field, request, **kwargs):  # type: ignore[no-untyped-def]
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "usd_per_gpu_hour":
            field.label = "$ per GPU-hour"
        elif db_field.name == "effective_from":
            field.help_text = ("UTC, whatever your browser's time zone: the instant this price starts for its GPU "
                               "type and capacity tier; their price before it holds until then. Hours already "
                               "rolled from then on are repriced (docs/accounting.md, Cost). At most "
                               f"{PRICE_HORIZON_YEARS} years ahead.")
        return field

    @admin.display(description="$ per GPU-hour", ordering="usd_per_gpu_hour")
    def price(self, obj: PriceRate) -> str:
        return f"${obj.usd_per_gpu_hour}"

    @admin.display(description="in force until")
    def until(self, obj: PriceRate) -> str:
        following = getattr(obj, "next_from", None)
        return "no later rate" if following is None else f"{following.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"

    @admin.display(description="in force now")
    def in_force(self, obj: PriceRate) -> str:
        now, following = timezone.now(), getattr(obj, "next_from", None)
        if obj.effective_from > now:
            return "not yet"
        return "no: replaced" if following is not None and following <= now else "yes"


class NodeForm(OpenedAsForm):
    """A node's GPU type and count do not change under its running work: the API's rule
    (services/nodes.py), said on the field."""

    def clean_gpu_type(self) -> GpuType:
        gpu_type: GpuType = self.cleaned_data["gpu_type"]
        refusal = nodes.gpu_type_refusal(self.instance, gpu_type) if gpu_type is not None else None
        if refusal:
            raise forms.ValidationError(refusal)
        return gpu_type

    def clean_gpu_count(self) -> int:
        gpu_count: int = self.cleaned_data["gpu_count"]
        refusal = nodes.gpu_count_refusal(self.instance, gpu_count) if gpu_count is not None else None
        if refusal:
            raise forms.ValidationError(refusal)
        return gpu_count

    def _host(self, field: str) -> int:
        value: int = self.cleaned_data[field]
        refusal = nodes.host_refusal(self.instance, field, value) if value is not None else None
        if refusal:
            raise forms.ValidationError(refusal)
        return value

    def clean_cpus(self) -> int:
        return self._host("cpus")

    def clean_memory_gb(self) -> int:
        return self._host("memory_gb")


class NodeActionForm(ActionForm):
    """The node list's action bar, with the reason a cordon or drain takes (Slurm's `Reason=`,
    the API's `reason`, `qm nodes drain --reason`): until 6 Dec the list's actions took none, so a
    node drained here read no reason in `qm nodes` and its event said no why."""

    reason = forms.CharField(
        required=False, label="Reason (cordon, drain)", max_length=10_000, strip=True,
        widget=forms.TextInput(attrs={"size": 40, "placeholder": "e.g. XID 79 on GPU 3"}),
        help_text=f"Why the nodes are taken out of service: one line, at most {HOLD_REASON_MAX_LENGTH} characters.")


def confirm_first(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: Any, *, action: str,
                  title: str, question: str, lines: list[str], button: str) -> TemplateResponse | None:
    """Before an action that cannot simply be undone (a retire, a window's cancel), the page
    that says what each selected record would become and asks, as Django asks before deleting;
    None once the admin said yes (its form posts `post=yes` back with the same selection)."""
    if request.POST.get("post") == "yes":
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "opts": modeladmin.model._meta, "title": title, "question": question, "lines": lines,
        "queryset": queryset, "action": action, "button": button, "action_checkbox_name": ACTION_CHECKBOX_NAME,
        "reason": (request.POST.get("reason") or "").strip(), "media": modeladmin.media,
    }
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(request, "admin/controlplane/action_confirmation.html", context)


def _retire_said(node: Node) -> str:
    if node.state == NodeState.RETIRED:
        return f"{node.name}: already retired, nothing happens"
    refusal = nodes.retire_refusal(node)
    if refusal:
        return f"Refused, left as it is: {refusal}"
    return (f"{node.name} ({node.state}, {node.gpu_count} GPUs): leaves the fleet: no work, no capacity or idle "
            "cost, its agent refused, until an admin returns it to service")


def _node_action(verb: Any, label: str) -> Any:
    """An admin list action over the selected nodes; says what moved, what already was there
    and what was refused (before, a successful action said nothing at all). A cordon or drain
    takes the action bar's reason (NodeActionForm); another action given one does nothing."""
    name = "return" if verb is nodes.return_to_service else verb.__name__
    action = label.split(":")[0]

    def act(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: Any) -> TemplateResponse | None:
        reason = (request.POST.get("reason") or "").strip()
        problem = (reason_problem(reason) if name in nodes.TAKES_REASON else
                   f"only Cordon and Drain take one (it says why a node is taken out of service); nothing was "
                   f"done. Clear it to {action}") if reason else ""
        if problem:
            if name in nodes.TAKES_REASON:
                problem += "; nothing was done"
            modeladmin.message_user(request, f"Reason: {problem}.", level=messages.ERROR)
            return None
        if name == "retire":  # out of the fleet for good: asked first, as the Nodes page's button asks
            chosen = list(queryset.order_by("name"))
            asked = confirm_first(
                modeladmin, request, queryset, action=name, title="Retire nodes",
                question=(f"Retire {counted(len(chosen), 'node')}? A retired node is out of the fleet for good, until "
                          "an admin returns it to service (then down until its agent registers again)."),
                lines=[_retire_said(node) for node in chosen], button="Yes, retire")
            if asked is not None:
                return asked
        moved: list[str] = []
        already: list[str] = []
        reasoned: list[str] = []  # already there, given a new reason: recorded (services/nodes._apply)
        left: list[str] = []
        for node in queryset.order_by("name"):
            before, wished = node.state, node.unschedulable
            try:
                done = nodes.act(name, node, request.user, reason=reason)
            except nodes.NodeActionRefused as exc:
                modeladmin.message_user(request, str(exc), level=messages.ERROR)
                continue
            after = done.node
            if done.running_jobs:  # a cordon or drain: what it leaves running there, and until when
                left.append(done.detail)
            if after.state != before:
                moved.append(f"{node.name} ({before} → {after.state})")
            elif after.unschedulable != wished:  # away: only the wish for its return changed
                returns = NodeState.CORDONED if after.unschedulable else NodeState.READY
                moved.append(f"{node.name} ({before}, returns {returns})")
            elif reason and after.state == (NodeState.CORDONED if name == "cordon" else NodeState.DRAINING):
                reasoned.append(node.name)
            else:
                already.append(node.name)
        if moved:
            modeladmin.message_user(request, f"{action}: " + ", ".join(moved), level=messages.SUCCESS)
        if reasoned:
            modeladmin.message_user(request, f"Already there, its reason now recorded ({reason}): "
                                    + ", ".join(reasoned), level=messages.INFO)
        if already:
            modeladmin.message_user(request, "Already there, nothing recorded: " + ", ".join(already),
                                    level=messages.INFO)
        for said in left:
            # "Node" first: the admin writes a message's first letter capitalised, and
            # "h100-04: ready → draining" read "H100-04: …", a name no node has.
            modeladmin.message_user(request, f"Node {said}", level=messages.INFO)
        return None
    act.__name__ = verb.__name__
    # "change": Django offers an action that asks nothing to whoever may view the list, and a
    # view-only operator cordoned, drained and retired nodes until 7 Dec.
    return admin.action(description=label, permissions=["change"])(act)


class NodeMaintenanceFilter(admin.SimpleListFilter):
    """The nodes a maintenance window holds now, those with one coming, those with none: the
    windows read as the list's column reads them (services/maintenance.concerning_each_node)."""

    title = "maintenance"
    parameter_name = "maintenance"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("now", "In maintenance now"), ("upcoming", "Window upcoming"), ("none", "None")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Node]) -> QuerySet[Node] | None:
        chosen = {"now": {"maintenance_held": True},
                  "upcoming": {"maintenance_held": False, "maintenance_window__isnull": False},
                  "none": {"maintenance_window__isnull": True}}.get(self.value() or "")
        return queryset.filter(**chosen) if chosen is not None else queryset


@admin.register(Node)
class NodeAdmin(ConfigAudited):
    """A node's state moves by the cordon, drain, uncordon, retire and return actions
    (services/nodes.py: a compare-and-set with a node.state event) and by the control loop; it
    is not edited here.
    A change writes only the form's columns: the state, lease and heartbeat the control loop and
    the agent wrote while the request ran are kept (a whole-row save wrote back the ones read
    at its start)."""

    form = NodeForm
    action_form = NodeActionForm
    list_display = ("name", "pool", "gpu_type", "gpu_count", "leaf_switch", "spine", "state", "maintenance",
                    "last_heartbeat_at")
    list_filter = ("pool", "state", NodeMaintenanceFilter, "gpu_type", "leaf_switch")
    search_fields = ("name",)
    exclude = ("agent_token_hash",)
    # What its agent declared at its last registration: the agent's, shown as why a GPU type or
    # count may be refused (services/nodes.py), set again at each registration.
    readonly_fields = ("state", "unschedulable", "agent_lease_expires_at", "last_heartbeat_at", "retired_at",
                       "agent_gpu_type", "agent_gpu_count", "agent_registered_at")
    actions = [
        _node_action(nodes.cordon, "Cordon: take no new work"),
        _node_action(nodes.drain, "Drain: take no new work, let running jobs finish"),
        _node_action(nodes.uncordon, "Uncordon: take work again"),
        _node_action(nodes.retire, "Retire selected nodes: out of the fleet for good (refused while jobs run there)"),
        _node_action(nodes.return_to_service, "Return selected nodes to service: down until their agents register"),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        # Each node's maintenance window, as the Nodes page and the API read them: the one
        # holding it now, else the next (subqueries of the list's own query).
        return maintenance.concerning_each_node(super().get_queryset(request), timezone.now())

    @admin.display(description="maintenance", ordering="maintenance_start_at")
    def maintenance(self, node: Node) -> str:
        said = maintenance.concerning_said(node)
        if said is None:
            return "-"
        return format_html('<a href="{}">{}</a>', reverse("admin:controlplane_maintenancewindow_change",
                                                        args=[node.maintenance_window]),  # type: ignore[attr-defined]
                           _whole(said))

    def get_object(self, request, object_id, from_field=None):  # type: ignore[no-untyped-def]
        """A save takes the scheduler lease row before the node's (services/nodes.py,
        lock_before_inventory_change), as the API's PATCH does."""
        if request.method == "POST" and from_field is None and transaction.get_connection().in_atomic_block:
            nodes.lock_before_inventory_change()
        return super().get_object(request, object_id, from_field)



class ShownNotEdited(ShownWhole, admin.ModelAdmin):
    """Records whose changes go through the services (submit, cancel, the control loop, the
    agents), which keep lease fencing and the audit trail: the admin shows them, nothing more.
    Editing a job's state here halted every scheduling cycle; deleting a running job would free
    GPUs its processes still use; an edited event or lease epoch would falsify the audit trail
    or the fencing."""

    def has_add_permission(self, request: HttpRequest, *args: object) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(TeamColumn, ShownNotEdited):
    list_display = ("id", "name", "team_name", "priority_class", "gpus", "state", "pending_code", "submitted_at")
    list_select_related = ("team", "priority_class")
    list_filter = ("state", "team", "priority_class", "workload")
    search_fields = ("name",)
    raw_id_fields = ("submitter", "project")


class AllocationGpuInline(admin.TabularInline):
    model = AllocationGpu
    extra = 0
    readonly_fields = ("node", "gpu_index", "live")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Allocation)
class AllocationAdmin(ShownNotEdited):
    list_display = ("generation", "job", "epoch", "state", "borrowed", "created_at", "released_at")
    list_filter = ("state", "borrowed")
    raw_id_fields = ("job",)
    inlines = [AllocationGpuInline]


@admin.register(Event)
class EventAdmin(ShownNotEdited):
    """The audit trail: searched by its words (who, why, what: "vision", "user:carol",
    "QuotaChanged") and filtered by kind (not by reason: listing a long trail's distinct
    reasons would scan it on every page)."""

    list_display = ("created_at", "kind", "actor_text", "reason", "message_text")
    list_filter = ("kind",)
    search_fields = ("message", "actor", "reason")
    show_full_result_count = False  # a busy fleet's trail is long: no second count of it per page
    raw_id_fields = ("job", "allocation", "node", "team")

    @admin.display(description="actor", ordering="actor")
    def actor_text(self, obj: Event) -> str:
        return _whole(obj.actor)  # "agent:gpu-a100-017" broke at its hyphens too

    @admin.display(description="message", ordering="message")
    def message_text(self, obj: Event) -> str:
        return _whole(obj.message)


@admin.register(NotificationHook)
class NotificationHookAdmin(DeletesSelectedLocked, TeamColumn, NamedControls, ShownWhole, IntegerColumnBounds, admin.ModelAdmin):
    """Users' webhooks (docs/api.md, Notifications by webhook), which users add and change
    through the API or `qm notify` (where the URL is checked): here an admin sees every hook and
    how its deliveries go, and pauses one (active) or deletes it. The secret is never shown."""

    list_display = ("id", "user", "url", "team_name", "active", "consecutive_failures", "last_status", "last_delivery_at")
    list_filter = ("active",)
    search_fields = ("url", "user__username", "last_status")
    fields = ("user", "team", "url", "events", "active", "created_at", "last_delivery_at", "last_status",
              "consecutive_failures")
    readonly_fields = ("user", "team", "url", "events", "created_at", "last_delivery_at", "last_status",
                       "consecutive_failures")
    list_select_related = ("user", "team")

    def has_add_permission(self, request: HttpRequest, *args: object) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: NotificationHook, form: Any, change: bool) -> None:
        """A pause or a resume, locked and recorded as the API's PATCH is. A hook deleted after
        this view read it (another admin, or its owner through the API) is `_HookGone`."""
        try:
            notifications.change_hook(obj, {"active": obj.active}, actor=_actor(request))
        except NotificationHook.DoesNotExist:
            raise _HookGone(obj.pk, "nothing was changed") from None

    def delete_model(self, request: HttpRequest, obj: NotificationHook) -> None:
        if not notifications.delete_hook(obj, actor=_actor(request)):
            raise _HookGone(obj.pk, "there was nothing left to delete")

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[NotificationHook]) -> None:
        """"Delete selected" locked the hooks (DeletesSelectedLocked) and told of those deleted
        meanwhile: each one here is there to delete."""
        for hook in queryset.select_related("user", "team"):
            notifications.delete_hook(hook, actor=_actor(request))

    def changeform_view(self, request: HttpRequest, object_id: str | None = None, form_url: str = "",
                        extra_context: dict[str, Any] | None = None) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except _HookGone as gone:  # the view's transaction is rolled back: no change logged
            return self._gone(request, gone)

    def delete_view(self, request: HttpRequest, object_id: str,
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        try:
            return super().delete_view(request, object_id, extra_context)
        except _HookGone as gone:  # rolled back: no deletion logged
            return self._gone(request, gone)

    def _gone(self, request: HttpRequest, gone: _HookGone) -> HttpResponse:
        self.message_user(request, f"Notification hook {gone.pk} no longer exists: it was deleted meanwhile (by "
                                   f"another admin, or by its owner through the API or the Notifications page), "
                                   f"so {gone.what}.", messages.WARNING)
        return HttpResponseRedirect(reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist",
                                            current_app=self.admin_site.name))


class _HookGone(Exception):
    """The hook an admin view was saving or deleting was deleted by another request meanwhile."""

    def __init__(self, pk: int, what: str) -> None:
        super().__init__(f"notification hook {pk} was deleted meanwhile")
        self.pk = pk
        self.what = what


@admin.register(SchedulerLease)
class SchedulerLeaseAdmin(ShownNotEdited):
    """The lease, and beside it the scheduler policy the cycle runs with (`policy/`, listed in
    the admin's index as "Scheduler policy"): every setting, its value, unit, meaning and the
    environment variable that sets it (services/scheduler_policy.py, the API's source too).
    Read-only: the environment is the source of truth."""

    list_display = ("name", "holder", "epoch", "expires_at", "last_cycle_at", "last_cycle_took")

    def get_urls(self) -> list[Any]:
        from django.urls import path
        return [path("policy/", self.admin_site.admin_view(self.policy_view), name="controlplane_scheduler_policy"),
                *super().get_urls()]

    def policy_view(self, request: HttpRequest) -> HttpResponse:
        if not request.user.has_perm(VIEW_POLICY):
            raise PermissionDenied
        current = scheduler_policy.policy()
        rows = scheduler_policy.settings_described(current)
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/controlplane/schedulerlease/policy.html", {
            **self.admin_site.each_context(request), "title": "Scheduler policy", "opts": self.opts,
            "parts": [(part, [r for r in rows if r.part == part]) for part in ("engine", "loop")],
            "leader": current["leader"],
        })
    fields = ("name", "holder", "epoch", "expires_at", "renewed_at", "last_cycle_at", "last_cycle_took", "cycles",
              "generation_counter")
    readonly_fields = ("last_cycle_took",)

    @admin.display(description="last cycle took")
    def last_cycle_took(self, lease: SchedulerLease) -> str:
        """"114 ms": it read "Last cycle ms 114.18800200044643", the float as stored."""
        ms = lease.last_cycle_ms
        if ms is None:
            return "–"
        return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


class MaintenanceWindowForm(forms.ModelForm):
    """A window's nodes (or a pool), times and reason, checked by services/maintenance.py as the
    API checks them, each refusal on its field."""

    pool = forms.CharField(required=False, max_length=64,
                           help_text="Every node of this pool (as it is now) joins the nodes chosen above.")

    class Meta:
        model = MaintenanceWindow
        fields = ("nodes", "pool", "start_at", "end_at", "reason")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["nodes"].required = False
        self.fields["nodes"].queryset = Node.objects.exclude(state=NodeState.RETIRED).order_by("name")
        self.fields["nodes"].help_text = "The nodes it takes out of service (or give a pool)."
        self.fields["start_at"].help_text = (
            f"UTC; now or later ({maintenance.span(maintenance.START_GRACE.total_seconds())} earlier is taken, for "
            "clock skew). Once it has begun, its start stays. No node may be in two windows at once.")
        self.fields["end_at"].help_text = f"UTC; at most {maintenance.span(maintenance.max_length_s())} after the start."
        self.given: dict[str, Any] = {}

    def clean(self) -> dict[str, Any]:
        """The service's checks, each refusal on its field, also beside another field's error (a
        node retired while the form was open): until 7 Dec they waited for every field to be right,
        and an end before the start was said only by the database's constraint, in its words
        ("Constraint “maintenance_window_ends_after_start” is violated."). A field already refused
        keeps its own error alone."""
        data = super().clean()
        already = set(self.errors)
        names = [n.name for n in data.get("nodes") or []]
        pool = (data.get("pool") or "").strip() or None
        try:
            if self.instance.pk is None:
                self.given = {"nodes": names or None, "pool": pool, "start_at": data.get("start_at"),
                              "end_at": data.get("end_at"), "reason": data.get("reason")}
                maintenance.check_new(**self.given)
            else:
                changed = set(self.changed_data)
                self.given = {name: value for name, value in (("start_at", data.get("start_at")),
                                                              ("end_at", data.get("end_at")),
                                                              ("reason", data.get("reason"))) if name in changed}
                if "nodes" in changed or pool:
                    self.given["nodes"] = names
                if pool:
                    self.given["pool"] = pool
                maintenance.check_change(self.instance, self.given)
        except maintenance.Refused as refused:
            self._log_refused(refused)
            for field, message in refused.errors.items():
                if field not in already:
                    self.add_error(field if field in self.fields else None, message)
        except maintenance.Conflicted as conflict:
            self._log_refused(conflict)
            raise forms.ValidationError(str(conflict)) from None
        return data

    #: Who submits the form (MaintenanceWindowAdmin.get_form sets it): its refusals are logged
    #: as the API's are (maintenance.log_refused).
    requested_by: Any = None

    def _log_refused(self, problem: maintenance.Refused | maintenance.Conflicted) -> None:
        if self.requested_by is not None:
            maintenance.log_refused("create" if self.instance.pk is None else "change", self.requested_by, problem,
                                    window=self.instance.pk, given=self.given)


class _WindowRefused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@admin.register(MaintenanceWindow)
class MaintenanceWindowAdmin(NamedControls, ShownWhole, IntegerColumnBounds, admin.ModelAdmin):
    """Maintenance windows (docs/operations.md, Maintenance windows), written through
    services/maintenance.py as the API and `qm maint` write them: checked, recorded
    (config.changed and an event on each node), never deleted: "Cancel selected windows" keeps
    them with who cancelled them and when."""

    form = MaintenanceWindowForm
    list_display = ("id", "reason_text", "state", "start_at", "end_at", "node_names", "created_by", "cancelled_at")
    list_filter = ("cancelled_at",)
    search_fields = ("reason", "nodes__name")
    readonly_fields = ("created_by", "created_at", "cancelled_by", "cancelled_at")
    filter_horizontal = ("nodes",)
    actions = ["cancel_windows"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[MaintenanceWindow]:
        return super().get_queryset(request).select_related("created_by").prefetch_related("nodes")

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        form.requested_by = request.user  # its refusals are logged with who asked
        return form

    @admin.display(description="state")
    def state(self, window: MaintenanceWindow) -> str:
        from django.utils import timezone

        return window.state_at(timezone.now()).label

    @admin.display(description="reason", ordering="reason")
    def reason_text(self, window: MaintenanceWindow) -> str:
        return _whole(window.reason)  # "… on the gpu-a100-017 rack": a node's name held whole

    @admin.display(description="nodes")
    def node_names(self, window: MaintenanceWindow) -> str:
        names = sorted(n.name for n in window.nodes.all())
        return _whole(", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else ""))

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: MaintenanceWindow, form: Any, change: bool) -> None:
        try:
            if change:
                saved = maintenance.change(obj.pk, request.user, form.given)
            else:
                saved = maintenance.create(request.user, **form.given)
        except (maintenance.Refused, maintenance.Conflicted) as exc:  # changed by another admin meanwhile
            raise _WindowRefused(str(exc)) from None
        obj.pk, obj.created_at, obj.created_by = saved.pk, saved.created_at, saved.created_by
        obj.start_at, obj.end_at, obj.reason = saved.start_at, saved.end_at, saved.reason

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        """The service wrote the window's nodes (a pool expanded): nothing more to save."""

    def changeform_view(self, request: HttpRequest, object_id: str | None = None, form_url: str = "",
                        extra_context: dict[str, Any] | None = None) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except _WindowRefused as refused:  # the view's transaction is rolled back: nothing written
            self.message_user(request, f"Nothing was saved: {refused.message}.", messages.ERROR)
            return HttpResponseRedirect(reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist",
                                                current_app=self.admin_site.name))

    @admin.action(description="Cancel selected windows: their nodes take any work again (kept in the history)",
                  permissions=["change"])  # not one who may only view them (see _node_action)
    def cancel_windows(self, request: HttpRequest, queryset: QuerySet[MaintenanceWindow]) -> TemplateResponse | None:
        chosen = list(queryset.order_by("pk"))
        now = timezone.now()
        asked = confirm_first(
            self, request, queryset, action="cancel_windows", title="Cancel maintenance windows",
            question=(f"Cancel {counted(len(chosen), 'maintenance window')}? A cancelled window is kept in the "
                      "history and cannot be changed again; to move one, change its times instead."),
            lines=[self._cancel_said(window, now) for window in chosen], button="Yes, cancel")
        if asked is not None:
            return asked
        done: list[str] = []
        for window in queryset.order_by("pk"):
            if window.cancelled_at is not None:
                continue
            try:
                maintenance.cancel(window.pk, request.user)
            except maintenance.Conflicted as exc:
                self.message_user(request, str(exc), messages.ERROR)
                continue
            done.append(str(window.pk))
        if done:
            self.message_user(request, f"Cancelled maintenance window{'s' if len(done) > 1 else ''} "
                                       f"{', '.join(done)}: their nodes take any work again from the next cycle.",
                              messages.SUCCESS)
        return None

    @staticmethod
    def _cancel_said(window: MaintenanceWindow, now: Any) -> str:
        names = ", ".join(sorted(n.name for n in window.nodes.all()))
        state = window.state_at(now)
        said = (f"Window {window.pk} ({window.reason}) on {names}, {state.label.lower()}, "
                f"{maintenance.span((window.end_at - window.start_at).total_seconds())} from "
                f"{window.start_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC")
        if state in (MaintenanceWindowState.CANCELLED, MaintenanceWindowState.ENDED):
            return f"{said}: already {state.label.lower()}, nothing happens"
        return f"{said}: cancelled, its nodes take any work again from the next cycle"
