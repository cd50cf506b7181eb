"""The Celery application: Redis is the broker, never the source of truth."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("controlplane", include=["controlplane.tasks_accounting", "frontend.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["controlplane"])
