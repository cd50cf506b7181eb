"""The `code_words` filter: a reason code may break between its words in a narrow cell (the job
page's Runs at 1,000 px), and nowhere else; what it shows is escaped."""

from __future__ import annotations

from frontend.templatetags.qm import code_words


def test_a_code_may_break_between_its_words_only() -> None:
    assert code_words("RuntimeLimitExceeded") == "Runtime<wbr>Limit<wbr>Exceeded"
    assert code_words("Preempted") == "Preempted"
    assert code_words("GPU2Failed") == "GPU2<wbr>Failed"


def test_what_it_shows_is_escaped() -> None:
    assert code_words("<b>BadCode</b>") == "&lt;b&gt;Bad<wbr>Code&lt;/b&gt;"
    assert code_words(None) == ""
