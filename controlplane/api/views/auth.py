"""Signing in and out: a token for a username and password, its revocation, and who the
credentials belong to."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import Throttled, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api.serializers.auth import MeSerializer, TokenRequestSerializer, TokenSerializer
from controlplane.api.throttling import LoginThrottle, username_refusal, username_refused
from controlplane.api.views.api_mixin import ApiMixin
from controlplane.models import ApiToken, Membership
from controlplane.services import access, api_tokens


class TokenView(ApiMixin, APIView):
    """Exchange a username and password for a new API token (`Authorization: Token …`): its key
    is in this answer only (the server keeps its SHA-256: services/api_tokens.py)."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes = [LoginThrottle]

    @extend_schema(request=TokenRequestSerializer, responses={200: TokenSerializer}, auth=[])
    def post(self, request: Request) -> Response:
        body = TokenRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        # too many failures for this username lately, from any address: refused before the
        # password is checked (a failure counts through Django's user_login_failed)
        wait = username_refused(body.validated_data["username"])
        if wait is not None:
            raise Throttled(wait=wait, detail=username_refusal(wait))
        user = authenticate(request._request, username=body.validated_data["username"],
                            password=body.validated_data["password"])
        if user is None or not user.is_active:
            # 400 as DRF's own token view answers: the request carried no credentials to refuse.
            raise ValidationError({"password": ["Wrong username or password."]})
        key = api_tokens.issue(user)
        # no browser or proxy keeps a copy of the token (RFC 6749 asks it of a token's answer)
        return Response({"token": key, "username": user.get_username()}, headers={"Cache-Control": "no-store"})


class LogoutView(ApiMixin, APIView):
    """Revoke the token this request was sent with: the next request with it is 401.

    Each sign-in has its own token, so the user's other clients (another `qm`, a CI job) stay
    logged in. Called with a session (the browser), which names no token, it revokes all of the
    user's API tokens and leaves the session alone. Like logging in, it records no event
    (sign-ins and sign-outs are not in the audit trail)."""

    @extend_schema(request=None, responses={204: None})
    def post(self, request: Request) -> Response:
        if isinstance(request.auth, ApiToken):
            api_tokens.revoke_token(request.auth)
        else:
            api_tokens.revoke_all(request.user)
        return Response(status=204)


class MeView(ApiMixin, APIView):
    """Who the credentials belong to, and what they may do."""

    @extend_schema(responses={200: MeSerializer})
    def get(self, request: Request) -> Response:
        who = access.access_of(request.user)
        team = access.primary_team(request.user)
        memberships = [
            {"team": name, "role": role}
            for name, role in Membership.objects.filter(user=request.user).values_list("team__name", "role")
        ]
        return Response({
            "username": request.user.get_username(),
            "is_admin": who.is_admin,
            "is_finance": who.is_finance,
            "may_submit": access.may_submit(request.user),
            "default_team": team.name if team else None,
            "memberships": memberships,
        })
