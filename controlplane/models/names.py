"""What a name people read may hold: one line of visible text. The models' fields check it (so
the admin's forms and the API's serializers say it on the field), and so do the serializers and
services that take names outside a model form (the agent's registration). Which characters hide
what a text says is services/plain_text.py's rule, for every text alike."""

from __future__ import annotations

import unicodedata

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from controlplane.services.plain_text import hidden_character_problem

NOTHING_VISIBLE_MESSAGE = ("a name needs at least one visible character: zero-width and other format characters "
                           "alone show as nothing")


def nothing_visible_problem(value: str) -> str | None:
    """NOTHING_VISIBLE_MESSAGE when `value` is nothing but format characters (a zero-width space,
    a soft hyphen, a byte order mark: a job listed with a blank name), or None. Format characters
    between visible ones, as the zero-width joiners of an emoji family, are kept."""
    if value and all(unicodedata.category(ch)[0] in "CZ" for ch in value):
        return NOTHING_VISIBLE_MESSAGE
    return None


def name_problem(value: str) -> str | None:
    """Why `value` (trimmed) is no name people can read, or None: a character that hides what
    it says, a new line or a tab among them (services/plain_text.py: the one rule, said with the
    character's code point and place), or nothing visible at all."""
    return hidden_character_problem(value) or nothing_visible_problem(value)


def visible_name(value: str) -> None:
    """A model field's validator: `name_problem`, as a field error."""
    problem = name_problem(value)
    if problem:
        raise ValidationError(problem, code="invisible")


#: A node's name, as its agent registers it (a host name): letters, digits, '.', '_' and '-'.
NODE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"
NODE_NAME_MESSAGE = "Node names are letters, digits, '.', '_' and '-', starting with a letter or digit."
node_name = RegexValidator(NODE_NAME_PATTERN, NODE_NAME_MESSAGE, code="invalid")
