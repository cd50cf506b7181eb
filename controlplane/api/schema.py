"""OpenAPI schema details drf-spectacular cannot infer: the error responses every operation
can give, in the API's one error format (see errors.py), and a PUT's body requiring every
writable field (serializers/fields.PutReplacesWholeMixin), a component of its own
("WholeQuotaRequest") as PATCH's is ("PatchedQuotaRequest"). Documenting them keeps the schema
honest, so a schemathesis run can check that every status code we answer is a documented one."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import force_instance
from rest_framework import serializers

from controlplane.api.serializers.fields import PutReplacesWholeMixin, WholeNumberField
from controlplane.filtersets import text_filter_lengths


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="One sentence naming what went wrong and, for input, which field.")
    code = serializers.CharField(help_text="Machine-readable error code, e.g. invalid, not_found, throttled.")
    errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Validation errors only: each field (nested ones joined with dots) and its problems.",
    )


class DatabaseUnavailableSerializer(ErrorSerializer):
    retry_after = WholeNumberField(help_text="Seconds to wait before retrying, as in the Retry-After header.")


_DESCRIPTIONS = {
    "400": "Invalid input: the body or a query parameter is wrong; `detail` and `errors` name the fields.",
    "401": "No valid credentials: send `Authorization: Token …` or a session cookie.",
    "403": "Signed in, but your role does not allow this.",
    "404": "No such object, or not yours to see.",
    "406": "Not acceptable: the Accept header asks for no format this endpoint renders (it renders JSON; "
           "a CSV endpoint CSV).",
    "409": "Conflicts with the current state (e.g. cancelling a finished job, deleting what is in use).",
    "413": "Request body too large.",
    "415": "Unsupported content type: send application/json.",
    "429": "Too many requests: retry after the number of seconds in Retry-After.",
    "503": "Database unavailable: the server cannot reach its database (or it refused the statement); "
           "nothing was written; retry after the number of seconds in Retry-After and `retry_after`.",
}


class QuartermasterAutoSchema(AutoSchema):
    def _replaces_whole(self, serializer: Any, direction: str) -> bool:
        return self.method == "PUT" and direction == "request" and isinstance(force_instance(serializer),
                                                                              PutReplacesWholeMixin)

    def _get_serializer_name(self, serializer: Any, direction: str, bypass_extensions: bool = False) -> str:
        name: str = super()._get_serializer_name(serializer, direction, bypass_extensions)
        return f"Whole{name}" if self._replaces_whole(serializer, direction) else name

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        if self._replaces_whole(serializer, direction):
            fields = force_instance(serializer).fields
            schema["required"] = sorted(
                set(schema.get("required", []))
                | {name for name in schema.get("properties", {}) if not fields[name].write_only})
        return schema

    def _get_filter_parameters(self) -> list[dict[str, Any]]:
        """A text filter's parameter says its longest value (`maxLength`), which the server
        refuses beyond (filtersets.TextFilter: the length of the column it is compared with)."""
        parameters: list[dict[str, Any]] = super()._get_filter_parameters()
        filterset_class = getattr(self.view, "filterset_class", None)
        if filterset_class is None or not parameters:
            return parameters
        lengths = text_filter_lengths(filterset_class)
        for parameter in parameters:
            if parameter["name"] in lengths and parameter["schema"].get("type") == "string":
                parameter["schema"]["maxLength"] = lengths[parameter["name"]]
        return parameters

    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:  # type: ignore[override]
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        # 404 on every operation: besides unknown ids, a filter naming a team the caller may
        # not read is answered "not found" so its existence does not leak.
        # 406: an Accept header no renderer meets (application/xml), answered by content negotiation.
        # 503: the database unreachable, on any operation (errors.database_unavailable).
        codes = ["400", "401", "403", "404", "406", "429", "503"]
        if self.method in ("POST", "PUT", "PATCH", "DELETE"):
            codes.append("409")
        if self.method in ("POST", "PUT", "PATCH"):
            codes += ["413", "415"]
        for code in codes:
            if code not in responses:
                serializer = DatabaseUnavailableSerializer if code == "503" else ErrorSerializer
                response = self._get_response_for_code(serializer, code, direction=direction)
                response["description"] = _DESCRIPTIONS[code]
                responses[code] = response
        return responses
