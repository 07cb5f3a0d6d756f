"""The name server's timed tasks: the expiry scan and the connection watchdog.

RocketMQ's ``NamesrvController`` schedules ``scanNotActiveBroker`` on a fixed period; this module
does the same on the asyncio loop, on ticks aligned to the ``ns_start`` time as
docs/nameserver-semantics.md §2.5 and the audit's ``late_expiry`` check expect. The watchdog
enforces the connection defences: a frame left incomplete too long (slowloris), a peer that
stopped reading our answers, and the optional idle close (A4). The actions themselves (scan + events, closing) are the
controller's, so every table change stays in its critical section.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from common.config import NameServerConfig

log = logging.getLogger(__name__)

# How often an unavailable event log is tried again (docs/nameserver-semantics.md §2.13).
LOG_RETRY_S = 1.0


class WatchedChannel(Protocol):
    """What the watchdog reads of a connection (``RemotingChannel``)."""

    closing: bool
    last_activity: float
    partial_since: float | None
    paused_since: float | None


_W = TypeVar("_W", bound=WatchedChannel)  # the server's own connection type


class HousekeptServer(Protocol[_W]):
    """What housekeeping needs of its server (``NameServerController``)."""

    config: NameServerConfig
    start_ts: int
    stopping: bool

    def scan(self, now: int) -> None: ...

    def open_channels(self) -> list[_W]: ...

    def close_stuck_channel(self, channel: _W, reason: str) -> None: ...

    @property
    def log_available(self) -> bool: ...

    def retry_log(self) -> None: ...


def next_scan_tick(start_ts: int, first_scan_delay_ms: int, scan_interval_ms: int, now: int) -> int:
    """The first scan instant strictly after ``now``: ``start + first + k * interval`` (§2.5).

    Example:
        >>> next_scan_tick(0, 5000, 10000, 0), next_scan_tick(0, 5000, 10000, 5000)
        (5000, 15000)
    """
    first = start_ts + first_scan_delay_ms
    if now < first:
        return first
    return first + ((now - first) // scan_interval_ms + 1) * scan_interval_ms


class HousekeepingService(Generic[_W]):
    """Runs the expiry scan and the watchdog for one controller.

    Args:
        controller: whose tables are scanned and whose connections are watched.
        clock: the controller's epoch-ms clock.
    """

    def __init__(self, controller: HousekeptServer[_W], clock: Callable[[], int]) -> None:
        self._controller = controller
        self._clock = clock

    def start(self, loop: asyncio.AbstractEventLoop) -> list[asyncio.Task[Any]]:
        """Start the tasks (scan, watchdog, log retry); the controller cancels them at shutdown."""
        return [
            loop.create_task(self._scan_loop(), name="scan-not-active-broker"),
            loop.create_task(self._watchdog_loop(), name="connection-watchdog"),
            loop.create_task(self._log_retry_loop(), name="event-log-retry"),
        ]

    async def _log_retry_loop(self) -> None:
        ctl = self._controller
        while not ctl.stopping:
            await asyncio.sleep(LOG_RETRY_S)
            if not ctl.log_available:
                try:
                    ctl.retry_log()
                except Exception:  # keep retrying
                    log.exception("event log retry failed")

    async def _scan_loop(self) -> None:
        ctl = self._controller
        cfg = ctl.config
        target = next_scan_tick(ctl.start_ts, cfg.first_scan_delay_ms, cfg.scan_interval_ms, ctl.start_ts - 1)
        while not ctl.stopping:
            delay = target - self._clock()
            if delay > 0:
                await asyncio.sleep(delay / 1000)
                continue  # re-read the wall clock: the loop's timers run on the monotonic one
            now = self._clock()
            try:
                ctl.scan(now)
            except Exception:  # a failed scan must not end all later scans
                log.exception("expiry scan at %d failed", now)
            # ticks missed while the loop was busy are skipped, not run back to back
            target = next_scan_tick(ctl.start_ts, cfg.first_scan_delay_ms, cfg.scan_interval_ms, now)

    async def _watchdog_loop(self) -> None:
        cfg = self._controller.config
        limits = [ms for ms in (cfg.frame_timeout_ms, cfg.channel_idle_ms) if ms > 0]
        period = min(1.0, max(0.01, min(limits) / 4000)) if limits else 1.0  # a few checks per limit
        while not self._controller.stopping:
            await asyncio.sleep(period)
            try:
                self.check_channels(time.monotonic())
            except Exception:  # keep watching
                log.exception("connection watchdog failed")

    def check_channels(self, mono: float) -> None:
        """Close every connection past a limit at monotonic time ``mono``."""
        ctl = self._controller
        cfg = ctl.config
        frame_timeout = cfg.frame_timeout_ms / 1000
        idle = cfg.channel_idle_ms / 1000
        for channel in ctl.open_channels():
            if channel.closing:
                continue
            if frame_timeout > 0 and channel.partial_since is not None and mono - channel.partial_since > frame_timeout:
                ctl.close_stuck_channel(channel, "frame_timeout")
            elif frame_timeout > 0 and channel.paused_since is not None and mono - channel.paused_since > frame_timeout:
                ctl.close_stuck_channel(channel, "slow_reader")
            elif idle > 0 and mono - channel.last_activity > idle:
                ctl.close_stuck_channel(channel, "idle")
