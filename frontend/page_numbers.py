"""Which page of a paginated list (nodes, jobs, history) a `?page=` asks for, and what is wrong
with it: a page the list does not have is said above the list, naming the parameter and the page
shown instead, as `windows.window_choice` says a window a page cannot read. Django's
`Paginator.get_page` put page 1 or the last page in its place unsaid (until 7 Dec)."""

from __future__ import annotations

import re
from typing import Any

from django.core.paginator import Page, Paginator


def page_choice(paginator: Paginator[Any], raw: str | None) -> tuple[Page[Any], str]:
    """The page `raw` names, or the nearest the list has, and the sentence saying so ("" for
    nothing wrong). Missing or empty: page 1, nothing said."""
    text = (raw or "").strip()
    if not text:
        return paginator.page(1), ""
    if not re.fullmatch(r"[0-9]+", text):
        return paginator.page(1), f"page: '{text[:40]}' is not a page number; showing page 1."
    number = int(text)
    if number < 1:
        return paginator.page(1), f"page: {number} is not a page: pages are numbered from 1; showing page 1."
    last = paginator.num_pages  # 1 for an empty list: its one page says it lists nothing
    if number > last:
        return paginator.page(last), f"page: {number} is past the last page, {last}; showing page {last}."
    return paginator.page(number), ""
