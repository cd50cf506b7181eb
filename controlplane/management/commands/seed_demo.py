from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from controlplane.demo_fleet import seed_demo_fleet


class Command(BaseCommand):
    help = "Seed the demo fleet, teams, quotas, priority classes, prices and demo users (idempotent)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--no-nodes", action="store_true", help="Leave node registration to the agents.")

    def handle(self, *args: Any, **options: Any) -> None:
        seed_demo_fleet(with_nodes=not options["no_nodes"])
        self.stdout.write(self.style.SUCCESS("demo fleet seeded"))
