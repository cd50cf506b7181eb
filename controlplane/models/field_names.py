"""A refusal that speaks of another field names it as its reader knows it: the API by the
field's name in the body (`nominal_gpus`), an admin page by the label its box shows ("Nominal
GPUs"). The rule stays in one place, the model's clean(): it names such a field with
`FieldNamed` among its ValidationError's params, which reads as the API's name wherever the
message is put together as is (the serializers: DRF formats it with str()), and which the admin's
forms (admin_forms.OpenedAsForm) replace by their field's label first."""

from __future__ import annotations

from django.core.exceptions import ValidationError


class FieldNamed:
    """A model field named in a refusal: its name (the API's word) until a form gives its label."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"FieldNamed({self.name!r})"


def refusal(message: str, **params: object) -> ValidationError:
    """A ValidationError whose `message` may name fields (`%(nominal)s` with nominal=FieldNamed(…))
    and other values (`%(value)s`); a literal percent sign is written `%%`."""
    return ValidationError(message, params=params)
