"""What a name people read may hold: one line of visible text. The models' fields check it (so
the admin's forms and the API's serializers say it on the field), and so do the serializers and
services that take names outside a model form (the agent's registration)."""

from __future__ import annotations

import re
import unicodedata

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

# Control characters (C0, DEL, C1), Unicode's line and paragraph separators and bidirectional
# overrides: a name is one line of visible text, never an escape sequence for whoever prints it.
# (NUL has Django's and DRF's own message.)
INVISIBLE = re.compile("[\x01-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
INVISIBLE_MESSAGE = "control characters (escape sequences, new lines, tabs) are not allowed in a name"
NOTHING_VISIBLE_MESSAGE = ("a name needs at least one visible character: zero-width and other format characters "
                           "alone show as nothing")


def name_problem(value: str) -> str | None:
    """Why `value` (trimmed) is no name people can read, or None: a control character or a line
    break in it, or nothing but format characters (a zero-width space, a soft hyphen, a byte
    order mark: a job listed with a blank name). Format characters between visible ones, as
    the zero-width joiners of an emoji family, are kept."""
    if INVISIBLE.search(value):
        return INVISIBLE_MESSAGE
    if value and all(unicodedata.category(ch)[0] in "CZ" for ch in value):
        return NOTHING_VISIBLE_MESSAGE
    return None


def visible_name(value: str) -> None:
    """A model field's validator: `name_problem`, as a field error."""
    problem = name_problem(value)
    if problem:
        raise ValidationError(problem, code="invisible")


#: A node's name, as its agent registers it (a host name): letters, digits, '.', '_' and '-'.
NODE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"
NODE_NAME_MESSAGE = "Node names are letters, digits, '.', '_' and '-', starting with a letter or digit."
node_name = RegexValidator(NODE_NAME_PATTERN, NODE_NAME_MESSAGE, code="invalid")
