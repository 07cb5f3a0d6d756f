"""Metric families and Prometheus's text exposition format, version 0.0.4 (no I/O).

A :class:`Family` is one metric name with its ``# HELP`` and ``# TYPE`` lines and its samples;
:func:`render` turns families into the bytes a scrape answers. Names follow Prometheus's
conventions: base units in the name (``_seconds``, ``_bytes``), ``_total`` on counters, and label
values from bounded sets only; a family whose labels name subjects (topics, brokers) is capped at
``max_series`` samples, the rest counted in ``nsaudit_metrics_series_dropped``.

Example:
    >>> up = Family("nsaudit_observed_up", "gauge", "1 when the last round answered")
    >>> up.add(1, ns="obs-a")
    >>> print(render([up]).decode(), end="")
    # HELP nsaudit_observed_up 1 when the last round answered
    # TYPE nsaudit_observed_up gauge
    nsaudit_observed_up{ns="obs-a"} 1
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TYPES = ("counter", "gauge", "untyped")
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
DROPPED = "nsaudit_metrics_series_dropped"


def _value(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _label_value(text: str) -> str:
    # the three escapes of the format: backslash, double quote and line feed
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class Family:
    """One metric: its name, type, help text and samples (label values -> value).

    Args:
        name: the metric name (``[a-zA-Z_:][a-zA-Z0-9_:]*``; counters end in ``_total``).
        type: ``counter``, ``gauge`` or ``untyped``.
        help: one line saying what it measures, with its unit.
        max_series: at most this many samples are kept (None: no cap); the others are counted
            in :attr:`dropped`.

    Raises:
        ValueError: a name, type or label name the format does not allow.
    """

    name: str
    type: str
    help: str
    max_series: int | None = None
    samples: list[tuple[tuple[tuple[str, str], ...], float]] = field(default_factory=list)
    dropped: int = 0

    def __post_init__(self) -> None:
        if not _NAME.match(self.name) or self.type not in TYPES:
            raise ValueError(f"bad metric {self.name!r} of type {self.type!r}")
        if self.type == "counter" and not self.name.endswith("_total"):
            raise ValueError(f"counter {self.name} must end in _total")

    def add(self, value: float, **labels: str) -> None:
        """Add one sample with these labels (kept in the order given)."""
        if self.max_series is not None and len(self.samples) >= self.max_series:
            self.dropped += 1
            return
        for name in labels:
            if not _LABEL.match(name) or name.startswith("__"):
                raise ValueError(f"bad label name {name!r} on {self.name}")
        self.samples.append((tuple((k, str(v)) for k, v in labels.items()), value))

    def lines(self) -> Iterable[str]:
        """The family's lines, ``# HELP`` and ``# TYPE`` first."""
        yield f"# HELP {self.name} {self.help.replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}"
        yield f"# TYPE {self.name} {self.type}"
        for labels, value in self.samples:
            if labels:
                text = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels)
                yield f"{self.name}{{{text}}} {_value(value)}"
            else:
                yield f"{self.name} {_value(value)}"


def render(families: Iterable[Family]) -> bytes:
    """The text exposition of ``families``; capped families add their dropped counts in
    :data:`DROPPED` (one sample per capped family that dropped any; the family only when one did)."""
    families = list(families)
    dropped = Family(
        DROPPED,
        "gauge",
        "samples left out of a capped metric this scrape (its subjects beyond "
        "the cap; the metric's count gauges still count them)",
    )
    out: list[str] = []
    for family in families:
        out.extend(family.lines())
        if family.dropped:
            dropped.add(family.dropped, metric=family.name)
    if dropped.samples:
        out.extend(dropped.lines())
    return ("\n".join(out) + "\n").encode("utf-8")
