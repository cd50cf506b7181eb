"""Where a sentence or a name in a table's cell may break, in one place: at its spaces only, each
word with a hyphen in it held together (a node's name "gpu-a100-017", "h100-01:0,1,2,3", a GPU
type "H100-80GB", a date "2026-12-05", a team's name "recommendation-systems"), since Chromium
otherwise breaks after any hyphen ("Bound to 24 GPUs (h100-" / "01:0,1,…"). The web pages (the
`whole_words` template filter: a job's and a node's events, a run's notice) and the Django admin's
lists (the events' message and actor, the team columns: controlplane/admin.py) share it. Imports
no Django: the HTML it writes is a `<span class="nobr">` around each such word, and both the
pages' and the admin's styles keep a `.nobr` on one line."""

from __future__ import annotations

import html
import re

#: A word of a sentence with a hyphen inside it. At most 40 characters: a longer one (a job's
#: name, up to 128; a team's, up to 64) may still break, rather than widen its table.
HYPHENATED_WORD = re.compile(r"(?<!\S)(?=\S{0,39}\w-\w)\S{3,40}(?!\S)")


def held_together(escaped: str) -> str:
    """HTML already escaped (`&amp;` for `&`) with each hyphenated word in a `nobr` span. A word
    is cut at whitespace only, and an escaped character has none, so no entity is cut in two."""
    return HYPHENATED_WORD.sub(lambda m: f'<span class="nobr">{m.group(0)}</span>', escaped)


def whole_words_html(text: str | None) -> str:
    """`text` (plain, as stored) as HTML for a table's cell that breaks at its spaces only."""
    return held_together(html.escape(text or ""))
