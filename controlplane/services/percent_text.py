"""How a share is said as a percentage, in one place: the web pages (the `percent` template
filter: the job page's ETA record, the node page's tiers, showback, what-if) and `qm` (`qm
explain`'s and `qm status`' ETA record). `qm` imports no Django, and neither does this module.

At most two decimals, trailing zeros dropped: 1 → "100%", 0.1714 → "17.14%", 0.05 → "5%",
0.0047 → "0.47%" (not a whole-number "0%"); a share above zero too small for two decimals is
"< 0.01%", not "0%". Until 5 Dec the pages said "100.0%" and "17.14%" and `qm explain` "100%"
and "17%" of the same record.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

_HUNDREDTH = Decimal("0.01")


def percent(fraction: float | Decimal | int) -> str:
    """`fraction` (1 = all) as a percentage: at most two decimals, no trailing zeros."""
    amount = (Decimal(str(fraction)) * 100).quantize(_HUNDREDTH, rounding=ROUND_HALF_EVEN)
    if amount == 0 and fraction > 0:
        return "< 0.01%"
    text = f"{amount:f}".rstrip("0").rstrip(".")  # quantized: always with its two decimals
    return ("0" if text == "-0" else text) + "%"
