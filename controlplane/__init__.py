"""Quartermaster's control plane: the Django project and app.

The Celery app (controlplane/celery.py) is imported when Django starts (apps.ControlPlaneConfig.ready),
so `@shared_task` binds to it in every Django process; `celery -A controlplane` finds it as the
`celery` module. It is not imported here: `qm`, which imports controlplane.cli and never sends a
task, started 0.4 s slower with Celery loaded.
"""
