"""Signing in: a token for a username and password, and who the credentials belong to."""

from __future__ import annotations

from rest_framework import serializers

from controlplane.api.serializers.fields import StrictFieldsMixin, TextField


class TokenRequestSerializer(StrictFieldsMixin, serializers.Serializer):
    username = TextField(max_length=150)
    password = TextField(max_length=4096, trim_whitespace=False, any_character=True, style={"input_type": "password"})


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField()
    username = serializers.CharField()


class MembershipInfoSerializer(serializers.Serializer):
    team = serializers.CharField(allow_null=True)
    role = serializers.CharField()


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    is_admin = serializers.BooleanField()
    is_finance = serializers.BooleanField()
    may_submit = serializers.BooleanField()
    default_team = serializers.CharField(allow_null=True)
    memberships = MembershipInfoSerializer(many=True)
