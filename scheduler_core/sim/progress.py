"""A progress bar for long replays, drawn on stderr so stdout stays one JSON object."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

_WIDTH = 30


class ProgressBar:
    """Shows simulated time against the horizon.

    Nothing is drawn during the first ``delay_s`` seconds of wall time, so short runs stay
    silent; after that the bar is redrawn at most every ``every_s`` seconds. On a terminal it
    redraws one line in place; elsewhere (a log file, CI) it prints a line per tenth."""

    def __init__(
        self,
        stream: TextIO,
        horizon_s: float,
        clock: Callable[[], float],
        *,
        label: str = "sim",
        delay_s: float = 1.0,
        every_s: float = 0.25,
    ) -> None:
        self.stream = stream
        self.horizon_s = horizon_s
        self.clock = clock
        self.label = label
        self.delay_s = delay_s
        self.every_s = every_s
        self.started = clock()
        self.last_draw = self.started
        self.last_tenth = -1
        self.drawn = False
        self.inplace = stream.isatty()

    def __call__(self, sim_time_s: float) -> None:
        now = self.clock()
        if now - self.started < self.delay_s or now - self.last_draw < self.every_s:
            return
        fraction = min(1.0, max(0.0, sim_time_s / self.horizon_s))
        tenth = int(fraction * 10)
        if not self.inplace and tenth == self.last_tenth:
            return
        self.last_draw, self.last_tenth = now, tenth
        filled = int(fraction * _WIDTH)
        bar = "#" * filled + "." * (_WIDTH - filled)
        text = (
            f"{self.label} [{bar}] {fraction:4.0%}  day {sim_time_s / 86400:4.1f} of "
            f"{self.horizon_s / 86400:.1f}  {now - self.started:5.1f} s"
        )
        self.stream.write(("\r" + text) if self.inplace else (text + "\n"))
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn and self.inplace:
            self.stream.write("\n")
            self.stream.flush()
