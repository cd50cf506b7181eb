"""`qm nodes --retired` on a fleet with no retired node printed the table's header over nothing,
then "No retired nodes.": now the sentence alone."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_no_retired_node_is_a_sentence_without_a_header(alice_qm) -> None:
    r = alice_qm("nodes", "--retired")

    assert r.code == 0, r.err
    assert r.out == "No retired nodes.\n"
