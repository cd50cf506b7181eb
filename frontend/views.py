"""Server-rendered pages. They present what the control plane stored; they decide nothing."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from frontend.fleet_view import fleet_overview


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "frontend/overview.html", fleet_overview(request.user))
