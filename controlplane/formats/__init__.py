"""Date and time formats for English: the admin says a time as every other page and `qm` do
(`2026-12-05 19:35:00 UTC`), not Django's `Dec. 5, 2026, 7:35 p.m.` without its zone."""
