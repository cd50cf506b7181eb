"""services/whole_words.py: the one rule for where a cell's sentence may break, shared by the
pages' `whole_words` filter and the Django admin's lists, and importable without Django."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from controlplane.services.whole_words import whole_words_html
from frontend.templatetags.qm import whole_words

REPO = Path(__file__).resolve().parents[3]


def test_hyphenated_words_are_held_together_and_the_rest_escaped() -> None:
    said = whole_words_html('Bound to 8 GPUs (gpu-a100-017:0,1) for <team> "recommendation-systems" & co')
    assert said == ('Bound to 8 GPUs <span class="nobr">(gpu-a100-017:0,1)</span> for &lt;team&gt; '
                    '<span class="nobr">&quot;recommendation-systems&quot;</span> &amp; co')


def test_a_word_longer_than_forty_characters_may_still_break() -> None:
    long = "sweep-" + "x" * 40
    assert whole_words_html(f"job {long} ran") == f"job {long} ran"
    assert whole_words_html("a-b") == '<span class="nobr">a-b</span>'


def test_the_pages_filter_says_what_the_admin_says() -> None:
    text = "Node gpu-h100-0042 cordoned by user:alice & <b>"
    assert str(whole_words(text)) == whole_words_html(text)


def test_it_imports_no_django() -> None:
    probe = ("import json, sys; import controlplane.services.whole_words; "
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert "django" not in json.loads(done.stdout)
