"""The live judge: every round of every observed server in, the live incidents' events out.

:class:`LiveJudge` holds each server's answers while its state is known (from a full answer to its
failure, the collector's stop or midnight: the nightly audit's *known periods*), and after each
update judges, as the nightly stages do, the kinds an observed server can show:

- on one server: ``no_writable_queue``, ``read_write_mismatch`` (per topic), ``no_master`` and
  ``write_perm_wiped`` (per broker name), ``observed_broker_gone`` (per address),
  ``observed_server_down``;
- across servers: ``ns_divergence`` (:mod:`~.divergence`), and who set each QueueData's
  permission (:mod:`~.perms`): a registered ``topic_perm_changed``; a perm its broker registered
  without write is no ``write_perm_wiped``, and a topic all of whose QueueData are such no
  ``no_writable_queue``.

Whether a perm was registered is known once every server had a round to show the same change: a
``no_writable_queue`` or ``write_perm_wiped`` depending on it is *held* until then (its verdicts,
:class:`~.perms.Verdict`, :mod:`~.held`), then opened from its start or dropped, as the nightly audit
judges it.

Only what a round changed is looked at again (the topics and broker names whose answers changed),
unless a server joins or leaves the comparison, when every key is. At UTC midnight every known
period ends, as in the nightly audit, whose every day stands alone; the incidents are held open
across it (:mod:`~.incidents`).
"""

from __future__ import annotations

from common.timeutil import DAY_MS
from nameserver.collect.live.divergence import (
    BROKER_ADDRS_MISMATCH,
    BROKER_MISSING,
    QUEUE_DATA_MISMATCH,
    ROUTE_MISSING,
    Divergence,
    Key,
)
from nameserver.collect.live.findings import Detail, FindingBook, LiveFinding, StreamEvent
from nameserver.collect.live.held import HeldFindings
from nameserver.collect.live.incidents import Incidents
from nameserver.collect.live.perms import REGISTERED, PermRun, PermSources, Verdict, perm_changed_finding
from nameserver.collect.live.returns import RESTART_LOSSES, Returns
from nameserver.collect.live.rules import DEFAULT_POLL_MS, INCIDENT_GAP_MS, REGISTRATION_PERIOD_MS, SEVERITY
from nameserver.collect.live.servers import Cells, KnownServer
from nameserver.collect.view import ServerView
from nameserver.model import PERM_WRITE

PER_SERVER = ("no_writable_queue", "read_write_mismatch", "no_master", "write_perm_wiped", "observed_broker_gone")


# the QueueData a server showed of a topic today, kept as they came up to this many, then merged
SEEN_KEPT = 8


class LiveJudge:
    """Judges the observed servers round by round (``now``: the round's event ``ts``).

    Args:
        grace_ms: the divergence grace (:func:`~.rules.live_grace_ms`).
        gap_ms: the incidents' grouping gap.
        poll_ms: the servers' poll interval (``perms.polls`` may name each server's).

    Attributes:
        servers: the servers whose state is known now.
        book: the open findings.
        incidents: the live incidents.
        down: servers down now -> the addresses they listed when they failed.
        perms: who set each QueueData's permission.
    """

    def __init__(
        self, grace_ms: int, gap_ms: int = INCIDENT_GAP_MS, poll_ms: int = DEFAULT_POLL_MS, alone: bool = False
    ) -> None:
        self.grace_ms = grace_ms
        self.gap_ms = gap_ms
        self.servers: dict[str, KnownServer] = {}
        self.book = FindingBook()
        self.divergence = Divergence(grace_ms, self.book, self._divergence_cause)
        self.incidents = Incidents(gap_ms)
        self.down: dict[str, int] = {}
        self.day: int | None = None
        # ns -> topic -> the QueueData (KnownServer.qd's, never changed in place) it showed earlier today
        # (one dict, or a list of them once it showed several: a snapshot adds no container per topic)
        self._seen: dict[str, dict[str, Cells | list[Cells]]] = {}
        self._wiped: dict[tuple[str, str], set[str]] = {}  # (ns, broker) -> topics wiped there (qualifying)
        self._unwritable: dict[str, set[tuple[str, str]]] = {}  # topic -> (ns, broker) lacking write perm
        # (ns, broker) -> its masterless BrokerData's run: (start, pending, addresses)
        self._runs: dict[tuple[str, str], tuple[int, bool, str]] = {}
        self.returns = Returns(gap_ms)  # what a server lacks just after it came back is its return's
        self.addr_names: dict[str, str] = {}  # broker address -> the broker name it was last listed under
        self.perms = PermSources(poll_ms, alone=alone)
        self._held = HeldFindings(self.book)  # no_writable_queue / write_perm_wiped on perm runs still pending

    # ------------------------------------------------------------------ updates

    def observed(
        self, ns: str, now: int, view: ServerView, topics: set[str] | None = None, brokers: set[str] | None = None
    ) -> list[StreamEvent]:
        """A round of ``ns`` got every answer.

        Args:
            topics, brokers: the topics and broker names whose answers changed since the server's
                previous round; None: compare everything (a snapshot).

        Returns:
            ``(stream, event)``: the ``live_incident`` events of this update.
        """
        self._advance(now)
        self._tick(now)
        old = self.servers.get(ns)
        old_addrs = dict(old.addrs) if old is not None else {}
        had = set(old.brokers) if old is not None else set()
        snapshot = old is None or topics is None or brokers is None  # brokers is None when topics is
        if old is None or topics is None or brokers is None:
            old_cells = {t: set(c) for t, c in old.qd.items()} if old is not None else {}
            server = self.servers[ns] = KnownServer(view)
            topics = set(server.qd) | set(old_cells)
            brokers = set(server.brokers) | (set(old.brokers) if old is not None else set())
        else:
            topics, brokers = set(topics), set(brokers)
            old_cells = {t: set(old.qd.get(t, {})) for t in topics}
            old.apply(view, topics, brokers)
            server = old
        self._take_in(ns, server, topics, old is None, now)
        self.incidents.answered(ns)
        if ns in self.down:
            self._came_back(ns, server, now)
        left = {a: v for a, v in old_addrs.items() if a not in server.addrs} if old is not None else {}
        entered = [a for a in server.addrs if a not in old_addrs]
        for addr in entered:
            self.addr_names[addr] = server.addrs[addr][0]
            self.book.end(("observed_broker_gone", ns, addr), now)
        for addr, (name, broker_id) in left.items():
            self._start(
                "observed_broker_gone", ns, addr, now, {"broker_name": name, "broker_id": broker_id}, "broker", name
            )
        dirty = set(topics)
        if not snapshot:  # a snapshot's topics are every topic of its broker names already
            for name in brokers:
                dirty |= server.topics_of.get(name, set())
        # a first round judges only the topics a condition may hold for: nothing of the server is
        # open (its findings ended with its last known period, held ones once known)
        judged = dirty if old is not None else server.unpublishable() | server.unread
        self._topic_conditions(ns, server, judged, now)
        self._master_conditions(ns, server, brokers, had, now)
        if old is None:  # the comparison gained a server: every key
            self._everything(now)
        else:
            self._wiped_conditions(dirty, now)
            self._divergences(dirty, brokers, set(left) | set(entered), old_cells, now)
        if self.perms.alone:  # nothing to wait for: this round's perm runs are decided by it
            self._decide(now)
        return self._finish(now)

    def failed(self, ns: str, now: int) -> list[StreamEvent]:
        """A round of ``ns`` failed: its known period ends; if it had one, the server is down."""
        return self._leave(ns, now, down=True)

    def stopped(self, ns: str, now: int) -> list[StreamEvent]:
        """The collector stops observing ``ns`` (its known period ends; no server down)."""
        return self._leave(ns, now, down=False)

    def tick(self, now: int) -> list[StreamEvent]:
        """No round ended, but time passed: episodes and starting groups may now count."""
        self._advance(now)
        self._tick(now)
        return self._finish(now)

    # ------------------------------------------------------------------ one server

    def _leave(self, ns: str, now: int, down: bool) -> list[StreamEvent]:
        self._advance(now)
        self._tick(now)
        old = self.servers.pop(ns, None)
        if old is not None:
            lacked = self.book.lacking(ns, RESTART_LOSSES)  # before they end
            self._forget(ns, now)
            if down:
                self.returns.went(ns, lacked)
                self.down[ns] = len(old.addrs)
                self._start("observed_server_down", ns, ns, now, {"brokers_before": len(old.addrs)}, "server", ns)
            self._everything(now, set(old.qd), set(old.brokers), set(old.addrs))
        return self._finish(now)

    def _came_back(self, ns: str, server: KnownServer, now: int) -> None:
        before = self.down.pop(ns)
        finding = self.book.open.get(("observed_server_down", ns, ns))
        if finding is not None:
            after = len(server.addrs)
            finding.detail.update(came_back=True, brokers_after=after, tables_emptied=after < before)
            self.book.end(("observed_server_down", ns, ns), now)
            self.returns.came_back(ns, now)

    def _forget(self, ns: str, now: int) -> None:
        """``ns``'s known period ended at ``now``: its own findings end there."""
        self.perms.end(ns, now)
        self._held.end_server(ns, now)
        self.book.end_where(now, lambda key: key[0] in PER_SERVER and key[1] == ns and key not in self._held)
        for key in [k for k in self._runs if k[0] == ns]:
            del self._runs[key]
        for key in [k for k in self._wiped if k[0] == ns]:
            del self._wiped[key]
        for cells in self._unwritable.values():
            cells -= {c for c in cells if c[0] == ns}

    def _topic_conditions(self, ns: str, server: KnownServer, topics: set[str], now: int) -> None:
        for topic in topics:
            self._no_writable_queue(ns, server, topic, now)
            key = ("read_write_mismatch", ns, topic)
            detail = server.read_write_mismatch(topic)
            if detail is None:
                self.book.end(key, now)
            elif key not in self.book.open:
                self._start("read_write_mismatch", ns, topic, now, detail, "layout", f"read_lt_write:{topic}")
            else:
                self.book.open[key].detail = detail

    def _no_writable_queue(self, ns: str, server: KnownServer, topic: str, now: int) -> None:
        """``no_writable_queue``, unless every QueueData of the topic is one its broker registered read-only."""
        key = ("no_writable_queue", ns, topic)
        detail = server.no_writable_queue(topic)
        if detail is None:
            if key in self._held or key in self.book.open:  # else nothing to end
                self._held.verdict(key, Verdict(now, False, [], None, ("topic", topic)))
            return
        certain, pending = False, []
        for name in server.qd[topic]:
            run = self.perms.run(ns, topic, name, now)
            if run.writable or run.source not in (None, REGISTERED):
                certain = True
                break
            if run.source is None:
                pending.append(run)
        culprit = ("broker", detail["culprit"]) if detail["culprit"] else ("topic", topic)
        cause = self.returns.cause(ns, key, now, culprit)
        self._held.verdict(key, Verdict(now, certain, [] if certain else pending, lambda: detail, cause))

    def _master_conditions(self, ns: str, server: KnownServer, brokers: set[str], had: set[str], now: int) -> None:
        """``no_master``: a masterless BrokerData. One that appears without its master where the
        name had none (or the server's state was unknown) counts only once it lasted
        ``REGISTRATION_PERIOD_MS``: a slave registered before its master is a group starting.
        Each value of the BrokerData is a run, as in the nightly audit's exact findings."""
        for name in brokers:
            key = (ns, name)
            if not server.masterless(name):
                self._runs.pop(key, None)
                self.book.end(("no_master", ns, name), now)
                continue
            value = repr(server.brokers[name]["broker_addrs"])
            run = self._runs.get(key)
            if run is not None and run[2] == value:
                continue
            if run is not None and not run[1]:
                self._runs[key] = (run[0], False, value)  # touching runs: one finding
                continue
            pending = run is None and name not in had
            if run is not None:  # a starting run cut short by another value: that one counts from now
                self.book.end(("no_master", ns, name), now)
            self._runs[key] = (now, pending, value)
            if not pending:
                self._open_no_master(ns, name, now)

    # ------------------------------------------------------------------ across servers

    def _saw(self, ns: str, topic: str, cells: Cells) -> None:
        """``ns`` showed ``cells`` of ``topic``: what was writable is remembered until midnight."""
        of_ns = self._seen.setdefault(ns, {})
        earlier = of_ns.get(topic)
        if earlier is None:
            of_ns[topic] = cells
            return
        if not isinstance(earlier, list):
            earlier = of_ns[topic] = [earlier]
        earlier.append(cells)
        if len(earlier) > SEEN_KEPT:  # a topic that changes often: only its groups once writable
            earlier[:] = [{name: value for c in earlier for name, value in c.items() if value[2] & PERM_WRITE}]

    def _take_in(self, ns: str, server: KnownServer, topics: set[str], first: bool, now: int) -> None:
        """The perm runs of ``topics`` and what ``ns`` showed of them today (``first``: all at once)."""
        if first:
            self.perms.first_round(ns, server.qd, server.unwritable, now)
            if ns not in self._seen:  # nothing shown earlier today: what it shows is its table
                self._seen[ns] = dict(server.qd)
                return
        for topic in topics:
            cells = server.qd.get(topic, {})
            if not first:
                self.perms.update(ns, topic, cells, now)
            if cells:
                self._saw(ns, topic, cells)

    def _writable_earlier(self, ns: str, topic: str, name: str) -> bool:
        """``ns`` showed ``topic``'s QueueData of ``name`` with write perm earlier today."""
        earlier = self._seen.get(ns, {}).get(topic, [])
        for cells in earlier if isinstance(earlier, list) else [earlier]:
            value = cells.get(name)
            if value is not None and value[2] & PERM_WRITE:
                return True
        return False

    def _wiped_conditions(self, topics: set[str], now: int) -> None:
        """``write_perm_wiped``: a QueueData without write perm where the same (server, topic,
        group) was writable earlier today, or the same (topic, group) is writable on another
        server now."""
        touched: set[tuple[str, str]] = set()
        servers = list(self.servers.items())
        for topic in topics:
            for cell in self._unwritable.pop(topic, ()):
                touched.add(cell)
                self._wiped.get(cell, set()).discard(topic)
            holders = [(ns, server.qd[topic]) for ns, server in servers if topic in server.unwritable]
            if not holders:
                continue
            unwritable = [
                (ns, name) for ns, cells in holders for name, value in cells.items() if not value[2] & PERM_WRITE
            ]
            self._unwritable[topic] = set(unwritable)
            for ns, name in unwritable:
                touched.add((ns, name))
                elsewhere = any(
                    o != ns and (other := s.qd.get(topic, {}).get(name)) is not None and other[2] & PERM_WRITE
                    for o, s in servers
                )
                if elsewhere or self._writable_earlier(ns, topic, name):
                    self._wiped.setdefault((ns, name), set()).add(topic)
        for ns, name in touched:
            wiped = self._wiped.get((ns, name))
            key = ("write_perm_wiped", ns, name)
            if not wiped:
                self._wiped.pop((ns, name), None)
            # a perm its broker registered is its configuration, not a wipe
            runs = [(topic, self.perms.run(ns, topic, name, now)) for topic in wiped or ()]
            certain = [topic for topic, run in runs if run.source not in (None, REGISTERED)]
            pending = [(topic, run) for topic, run in runs if run.source is None]

            def detail(certain: list[str] = certain, pending: list[tuple[str, PermRun]] = pending) -> Detail:
                topics = sorted(certain + [t for t, run in pending if run.source != REGISTERED])
                return {"topics": len(topics), "topics_listed": topics[:20]}

            self._held.verdict(key, Verdict(now, bool(certain), [run for _, run in pending], detail, ("broker", name)))

    def _divergences(
        self, topics: set[str], brokers: set[str], addrs: set[str], old_cells: dict[str, set[str]], now: int
    ) -> None:
        self.divergence.evaluate_changed(self.servers, topics, brokers, addrs, old_cells, now)

    def _everything(
        self,
        now: int,
        topics: tuple[str, ...] | set[str] = (),
        brokers: tuple[str, ...] | set[str] = (),
        addrs: tuple[str, ...] | set[str] = (),
    ) -> None:
        """A server joined or left the comparison: every key and every wiped cell again."""
        topics, brokers, addrs = set(topics) | set(self._unwritable), set(brokers), set(addrs)
        for server in self.servers.values():
            topics |= server.qd.keys()
            brokers |= server.brokers.keys()
            addrs |= server.addrs.keys()
        # a topic no server holds without write perm, with nothing wiped before, has no cell to judge
        self._wiped_conditions(topics & {*self._unwritable}.union(*(s.unwritable for s in self.servers.values())), now)
        for key in self.divergence.keys():
            if key[0] == BROKER_MISSING:
                addrs.add(key[1])
            elif key[0] == BROKER_ADDRS_MISMATCH:
                brokers.add(key[1])
            else:
                topics.add(key[1] if key[0] == ROUTE_MISSING else key[1][0])
        self._divergences(topics, brokers, addrs, {}, now)

    def _divergence_cause(self, key: Key, finding: LiveFinding) -> tuple[str, str]:
        kind, what = key
        if kind not in (ROUTE_MISSING, BROKER_MISSING):
            return "broker", what[1] if kind == QUEUE_DATA_MISMATCH else what
        cause = ("topic", what) if kind == ROUTE_MISSING else ("broker", self.addr_names.get(what, str(what)))
        alone = finding.servers[0] if len(finding.servers) == 1 else ""  # a return's, if one server's (returns.py)
        return self.returns.cause(alone, ("ns_divergence", key), finding.start_ms, cause)

    # ------------------------------------------------------------------ perm runs

    def _decide(self, now: int, force: bool = False) -> None:
        """Settle the perm runs whose tolerance has passed: their ``topic_perm_changed``, and the
        findings held on them."""
        if not self.perms.pending():
            return
        for run in self.perms.decide(now, force):
            if run.source == REGISTERED and run.prev_perm is not None and run.prev_source == REGISTERED:
                key, finding = perm_changed_finding(run)  # a registered change of a registered perm
                self.book.start(key, finding)
                self.book.end(key, run.start_ms)
        self._held.release()

    # ------------------------------------------------------------------ time

    def _open_no_master(self, ns: str, name: str, start: int) -> None:
        server = self.servers[ns]
        entry = server.brokers[name]
        addrs = {str(a["broker_id"]): a["broker_addr"] for a in entry["broker_addrs"]}
        cause = self.returns.cause(ns, ("no_master", ns, name), start, ("broker", name))
        self._start("no_master", ns, name, start, {"cluster": entry["cluster"], "addrs": addrs}, *cause)

    def _start(self, kind: str, ns: str, subject: str, at: int, detail: Detail, family: str, cause: str) -> None:
        """Open a finding of server ``ns`` alone, in the incident of ``(family, cause)``."""
        finding = LiveFinding(kind, ns, subject, at, SEVERITY[kind], detail, family, cause, (ns,))
        self.book.start((kind, ns, subject), finding)

    def _tick(self, now: int) -> None:
        self._decide(now)
        self.divergence.tick(now)
        for (ns, name), (start, pending, value) in list(self._runs.items()):
            if pending and now - start >= REGISTRATION_PERIOD_MS:
                self._runs[(ns, name)] = (start, False, value)
                self._open_no_master(ns, name, start)

    def _advance(self, now: int) -> None:
        """Cross UTC midnight: every known period ends there, as each day of the audit stands alone."""
        day = now // DAY_MS
        if self.day is None or day <= self.day:
            self.day = day if self.day is None else self.day
            return
        midnight = day * DAY_MS
        self._decide(midnight, force=True)  # the day's rounds are all in: nothing later counts
        for (ns, name), (start, pending, _) in list(self._runs.items()):
            if pending and ns in self.servers:  # reaches the end of the day: not a start
                self._open_no_master(ns, name, start)
        self._seen = {ns: dict(s.qd) for ns, s in self.servers.items()}
        held = set(self.servers) | set(self.down)
        for ns in list(self.servers):
            del self.servers[ns]
            self._forget(ns, midnight)
        for ns in list(self.down):
            self.book.end(("observed_server_down", ns, ns), midnight)
        self.down.clear()
        self.returns.forget_down()
        self._unwritable.clear()
        self.perms.clear()
        self.divergence.end_all(midnight)
        self.incidents.hold(held, midnight + self.grace_ms)
        self.day = day

    def _finish(self, now: int) -> list[StreamEvent]:
        opened, closed = self.book.take()
        # an info finding (a topic_perm_changed that left the topic writable) is no alert
        for finding in opened:
            if finding.severity != "info":
                self.incidents.opened(finding)
        for finding in closed:
            if finding.severity != "info":
                self.incidents.closed(finding)
        # an incident a held finding may join stays open until it is known
        return self.incidents.finish(now, self.divergence.pending_causes(now) | self._held.causes())
