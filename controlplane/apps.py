from __future__ import annotations

from django.apps import AppConfig


class ControlPlaneConfig(AppConfig):
    name = "controlplane"
    verbose_name = "Quartermaster control plane"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from controlplane import embedded, structured_logs

        structured_logs.configure()
        # SQLite (the embedded default) needs WAL so the loop thread and requests can share it.
        from django.db.backends.signals import connection_created

        connection_created.connect(embedded.sqlite_concurrency, dispatch_uid="qm-sqlite-wal")
