"""The fleet layout's faults: ``read_lt_write`` and ``queue_skew`` on, a balanced fleet off.

Skew is measured here the way ``jobs.analytics.distribution.groups`` measures it (write queues per broker group of
a cluster, every group counted; population standard deviation over the mean, busiest over the
mean) against the audit's default thresholds, independently of ``nameserver.layout.skew``.
"""

from __future__ import annotations

import statistics

import pytest

from common.config import AuditConfig
from nameserver.layout import FAULTS, LAYOUT_FAULTS, RUNTIME_FAULTS, SCALE_UP, build_layout, layout_anomalies

MAX_CV = AuditConfig().queue_skew_cv
MAX_OVER_MEAN = AuditConfig().queue_skew_max_over_mean

# (brokers, topics): the fleet default, the walk-through, the report fixture, the demo, the
# simulate default, mid-sized fleets and the reference fleet
SIZES = [(4, 10), (6, 20), (8, 12), (12, 20), (12, 60), (20, 100), (40, 100), (100, 300), (1000, 2000)]
SEEDS = [1, 2, 3, 7, 11]


def _seeds(brokers: int) -> list[int]:
    return SEEDS if brokers < 1000 else SEEDS[:2]  # the reference fleet takes a second a seed


def _write_queues_by_cluster(layout) -> dict[str, list[int]]:
    loads: dict[str, list[int]] = {c: [] for c in layout.clusters}
    for group in layout.groups:
        loads[group.cluster].append(sum(t.write_queue_nums for t in group.topics))
    return loads


def _skew(loads: list[int]) -> tuple[float, float]:
    mean = statistics.fmean(loads)
    return statistics.pstdev(loads) / mean, max(loads) / mean


def _skewed(loads: list[int]) -> bool:
    if len(loads) < 2 or sum(loads) == 0:
        return False  # the audit measures no skew for one group or no queues
    cv, ratio = _skew(loads)
    return cv > MAX_CV or ratio > MAX_OVER_MEAN


@pytest.mark.parametrize("brokers, topics", SIZES)
@pytest.mark.parametrize("faults", [(), RUNTIME_FAULTS], ids=["none", "runtime-only"])
def test_without_layout_faults_the_fleet_is_balanced(brokers, topics, faults):
    for seed in _seeds(brokers):
        layout = build_layout(brokers, 1, topics, seed, faults)
        assert layout.faults == () and layout.scaled_up == ()
        configs = [(g.broker_name, t) for g in layout.groups for t in g.topics]
        assert configs and all(t.read_queue_nums == t.write_queue_nums for _, t in configs), seed
        assert "read_lt_write" not in {t.kind for t in layout.topics}
        for cluster, loads in _write_queues_by_cluster(layout).items():
            assert not _skewed(loads), (seed, cluster, loads, _skew(loads))
            # balanced placement keeps every group within one topic's queues of the others
            assert max(loads) - min(loads) <= 16, (seed, cluster, loads)
        assert layout_anomalies(layout) == ()


@pytest.mark.parametrize("brokers, topics", SIZES)
def test_layout_faults_misconfigure_the_fleet_and_name_their_subjects(brokers, topics):
    for seed in _seeds(brokers):
        layout = build_layout(brokers, 1, topics, seed, FAULTS)
        assert layout == build_layout(brokers, 1, topics, seed)  # the default: every layout fault
        assert layout.faults == LAYOUT_FAULTS
        anomalies = layout_anomalies(layout)

        mismatched = {t.topic for g in layout.groups for t in g.topics if t.read_queue_nums < t.write_queue_nums}
        assert mismatched == {t.topic for t in layout.topics if t.kind == "read_lt_write"}
        assert len(mismatched) == max(1, round(0.02 * topics)), (seed, mismatched)  # ~2%, at least one
        assert {a.subject for a in anomalies if a.kind == "read_lt_write"} == mismatched
        for a in anomalies:
            if a.kind == "read_lt_write":
                topic = next(t for t in layout.topics if t.topic == a.subject)
                assert list(a.detail["queue_nums"]) == list(topic.broker_names)
                assert all(r < w for r, w in a.detail["queue_nums"].values())

        loads = _write_queues_by_cluster(layout)
        crowded = {c for c, cl in loads.items() if len(cl) >= 2 and sum(cl)}
        assert crowded == {c for c, cl in loads.items() if _skewed(cl)}, (seed, loads)  # every one of them
        assert {a.subject for a in anomalies if a.kind == "queue_skew"} == crowded
        assert len(layout.scaled_up) == len(crowded)
        for a in anomalies:
            if a.kind == "queue_skew":
                by_group = a.detail["write_queues"]
                assert sorted(by_group.values()) == sorted(loads[a.subject])
                assert by_group[a.detail["scaled_up"]] == max(by_group.values())
                assert a.detail["cv"] == pytest.approx(_skew(loads[a.subject])[0], abs=1e-4)


def test_a_scaled_up_group_carries_four_times_the_queues_of_each_topic():
    skewed = build_layout(12, 1, 60, 3, ("queue_skew",))
    assert len(skewed.scaled_up) == len(skewed.clusters) == 2  # clusters of 4 and 2 groups
    by_topic = {t.topic: t for t in skewed.topics}
    for group in skewed.groups:
        for config in group.topics:
            factor = SCALE_UP if group.broker_name in skewed.scaled_up else 1
            assert config.write_queue_nums == factor * by_topic[config.topic].write_queue_nums
            assert config.read_queue_nums == config.write_queue_nums  # read_lt_write is off


def test_each_layout_fault_alone():
    only_rlw = build_layout(20, 1, 100, 1, ("read_lt_write",))
    assert only_rlw.scaled_up == () and {a.kind for a in layout_anomalies(only_rlw)} == {"read_lt_write"}
    assert not any(_skewed(loads) for loads in _write_queues_by_cluster(only_rlw).values())
    only_skew = build_layout(20, 1, 100, 1, ("queue_skew",))
    assert {a.kind for a in layout_anomalies(only_skew)} == {"queue_skew"}
    assert all(t.read_queue_nums == t.write_queue_nums for g in only_skew.groups for t in g.topics)


def test_layouts_are_deterministic_per_seed_and_faults():
    for faults in ((), LAYOUT_FAULTS, ("read_lt_write",)):
        assert build_layout(40, 1, 100, 5, faults) == build_layout(40, 1, 100, 5, faults)
        assert build_layout(40, 1, 100, 5, faults) != build_layout(40, 1, 100, 6, faults)
    assert build_layout(40, 1, 100, 5, ()) != build_layout(40, 1, 100, 5, LAYOUT_FAULTS)
    # the addresses and groups do not depend on the faults, only where the topics go
    assert [g.members for g in build_layout(40, 1, 100, 5, ()).groups] == [
        g.members for g in build_layout(40, 1, 100, 5).groups
    ]


def test_small_fleets_have_no_layout_fault_to_show():
    assert layout_anomalies(build_layout(2, 1, 9, 1)) == ()  # one group, fewer than 10 topics
    assert layout_anomalies(build_layout(0, 1, 10, 1)) == ()
