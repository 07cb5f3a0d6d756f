"""A server's first runs kept as blocks (``nameserver/collect/live/perms.py``) decide every run as
making each run at once does: the same sources for the changes the rounds show and for every run
a finding asks about, whatever the servers do in between."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nameserver.collect.live.perms import PermSources

SERVERS, TOPICS, NAMES = ("a", "b", "c"), ("T1", "T2"), ("b1", "b2")
POLL = 1_000


class _Everything(set):
    def __contains__(self, item: object) -> bool:
        return True


def eager() -> PermSources:
    """Every topic counts as already made: no blocks, a run per QueueData from its first round."""
    sources = PermSources(POLL)
    sources._made = _Everything()
    return sources


cells = st.dictionaries(st.sampled_from(NAMES), st.sampled_from((6, 6, 6, 4, 2)), max_size=2)
step = st.one_of(
    st.tuples(st.just("update"), st.sampled_from(SERVERS), st.sampled_from(TOPICS), cells),
    st.tuples(st.just("end"), st.sampled_from(SERVERS)),
    st.tuples(st.just("ask"), st.sampled_from(SERVERS), st.sampled_from(TOPICS)),
    # a server's first round of a known period: every topic at once (a no-op unless it holds none)
    st.tuples(st.just("first"), st.sampled_from(SERVERS), st.dictionaries(st.sampled_from(TOPICS), cells)),
)


def play(sources: PermSources, steps: list[tuple], gaps: list[int], bulk: bool = True) -> list[tuple]:
    """The decisions ``steps`` lead to (``bulk``: a first round through ``first_round``, else topic by
    topic through ``update``)."""
    seen, now = [], 0
    shown: dict[tuple[str, str], dict] = {}  # what each server shows now, as the judge's KnownServer holds it
    started: set[str] = set()  # the servers in a known period (a round since their last end)
    for s, gap in zip(steps, gaps, strict=False):
        now += gap
        # as the judge does: the runs due before now are decided before a round is taken in
        for run in sources.decide(now):
            if run.prev_perm is not None:
                seen.append(("change", run.ns, run.topic, run.name, run.start_ms, run.source, run.prev_source))
        if s[0] == "first" and s[1] not in started:
            started.add(s[1])
            qd = {t: {n: (4, 4, p, 0, "") for n, p in c.items()} for t, c in s[2].items() if c}
            shown.update({(s[1], t): c for t, c in s[2].items() if c})
            unwritable = {t for t, c in qd.items() if any(not v[2] & 2 for v in c.values())}
            if bulk:
                sources.first_round(s[1], qd, unwritable, now)
            for topic, topic_cells in qd.items() if not bulk else ():
                sources.update(s[1], topic, topic_cells, now)
        elif s[0] == "update":
            started.add(s[1])
            shown[(s[1], s[2])] = s[3]
            sources.update(s[1], s[2], {n: (4, 4, p, 0, "") for n, p in s[3].items()}, now)
        elif s[0] == "end":
            started.discard(s[1])
            shown = {key: cells for key, cells in shown.items() if key[0] != s[1]}
            sources.end(s[1], now)
        elif s[0] == "ask":  # a finding asks about the QueueData the server shows
            for name in sorted(shown.get((s[1], s[2]), {})):
                run = sources.run(s[1], s[2], name, now)
                seen.append(("ask", now, run.ns, run.topic, run.name, run.perm, run.start_ms, run.source))
    for run in sources.decide(now + 10 * POLL, force=True):
        if run.prev_perm is not None:
            seen.append(("change", run.ns, run.topic, run.name, run.start_ms, run.source, run.prev_source))
    return seen


@settings(max_examples=1500, deadline=None)
@given(st.lists(step, max_size=40), st.lists(st.integers(0, 3 * POLL), min_size=40, max_size=40))
def test_blocks_decide_as_runs_made_at_once(steps, gaps):
    expected = play(eager(), steps, gaps, bulk=False)
    assert play(PermSources(POLL), steps, gaps) == expected
    assert play(PermSources(POLL), steps, gaps, bulk=False) == expected


def test_a_first_round_all_writable_makes_no_run_until_a_change_and_then_judges_the_old_ones():
    sources = PermSources(POLL)
    for at, ns in enumerate(SERVERS):
        sources.update(ns, "T", {"b": (4, 4, 6, 0, "")}, at * 100)
    assert not sources._cells and not sources.pending()
    sources.update("a", "T", {"b": (4, 4, 4, 0, "")}, 5_000)  # a change, on one server only
    first = sources._cells[("T", "b")][:3]
    assert [(r.ns, r.source) for r in first] == [("a", "registered"), ("b", "registered"), ("c", "registered")]
    assert [(r.ns, r.source) for r in sources.decide(10_000)] == [("a", "admin")]


def test_the_first_runs_of_a_server_that_left_end_where_it_left():
    """A read-only QueueData on ``b`` long after ``a`` left is no disagreement with ``a``'s old runs."""
    sources = PermSources(POLL)
    sources.update("a", "T", {"b": (4, 4, 6, 0, "")}, 0)
    sources.end("a", 100)
    sources.update("b", "T", {"b": (4, 4, 4, 0, "")}, 5_000)
    sources.decide(7_000)
    assert sources.run("b", "T", "b", 7_000).source == "registered"
    assert [r.end_ms for r in sources._cells[("T", "b")] if r.ns == "a"] == [100]


def test_a_first_round_beside_a_pending_change_makes_its_runs_where_the_change_is_judged():
    """``b`` comes up while ``a``'s change of a topic whose runs are made waits: ``b``'s unchanged
    QueueData near it makes that change an admin's, as topic-by-topic updates judge it."""
    steps = [("update", "a", "T1", {"b1": 6}), ("update", "a", "T1", {"b1": 4}), ("first", "b", {"T1": {"b1": 6}})]
    gaps = [0, 100, 100]
    expected = [("change", "a", "T1", "b1", 100, "admin", "registered")]
    assert play(PermSources(POLL), steps, gaps) == play(eager(), steps, gaps, bulk=False) == expected
