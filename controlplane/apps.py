from __future__ import annotations

from django.apps import AppConfig


class ControlPlaneConfig(AppConfig):
    name = "controlplane"
    verbose_name = "Quartermaster control plane"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from controlplane import structured_logs

        structured_logs.configure()
