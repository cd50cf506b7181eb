from __future__ import annotations

from django.apps import AppConfig


class ControlPlaneConfig(AppConfig):
    name = "controlplane"
    verbose_name = "Quartermaster control plane"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # the configured Celery app becomes the current one, for the tasks this process sends
        # and the receivers of controlplane/signals.py connect (webhooks, repricing)
        import controlplane.celery  # noqa: F401
        import controlplane.signals  # noqa: F401
        from controlplane import embedded, structured_logs

        structured_logs.configure()
        # SQLite (the embedded default) needs WAL so the loop thread and requests can share it.
        from django.db.backends.signals import connection_created

        connection_created.connect(embedded.sqlite_concurrency, dispatch_uid="qm-sqlite-wal")
        _check_scheduler_settings()


def _check_scheduler_settings() -> None:
    """The engine's configuration as the loop will build it, checked when any process starts:
    an unknown QM_PLACEMENT_POLICY used to start fine, then failed every scheduling cycle and
    answered 500 on the priority listing."""
    from django.core.exceptions import ImproperlyConfigured

    from controlplane.services.snapshot import scheduler_config
    from scheduler_core.errors import ConfigError
    from scheduler_core.plugins.registry import build_plugins

    try:
        build_plugins(scheduler_config())
    except ConfigError as exc:
        raise ImproperlyConfigured(
            f"The scheduler refuses its settings: {exc}. They come from QM_PLACEMENT_POLICY, "
            "QM_FAIR_SHARE_HALF_LIFE_S and QM_MAX_PLACEMENTS_PER_CYCLE (docs/operations.md)."
        ) from exc
