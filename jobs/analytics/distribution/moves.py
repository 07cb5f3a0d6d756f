"""Suggested moves of write queues that would bring a skewed cluster within the thresholds.

Computed on the per-cluster totals of a ``queue_skew`` run's last instant, which are small.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pyspark.sql import types as T

MOVE_TYPE = T.StructType(
    [
        T.StructField("from_broker_name", T.StringType(), False),
        T.StructField("to_broker_name", T.StringType(), False),
        T.StructField("write_queues", T.LongType(), False),
    ]
)
SKEW_PLAN_TYPE = T.StructType(
    [
        T.StructField("suggested_moves", T.ArrayType(MOVE_TYPE, False), False),
        T.StructField("cv_after", T.DoubleType(), True),
        T.StructField("max_over_mean_after", T.DoubleType(), True),
        T.StructField("within_threshold_after", T.BooleanType(), False),
    ]
)


def suggest_moves(write_queues_by_broker: Mapping[str, int], max_cv: float, max_over_mean: float) -> dict[str, Any]:
    """Greedy moves of write queues, busiest group to least busy, until within both thresholds.

    Each step moves ``k`` queues from the busiest group (ties: lowest name) to the least busy one,
    ``k`` = the smaller of their distances to the mean (rounded down; at least 1 while they differ
    by 2 or more), so neither crosses the mean and the sum of squares strictly falls: the loop
    ends. Integer queues cannot always get there (3 queues over 4 groups stay at max/mean 1.33);
    ``within_threshold_after`` then says false.

    Args:
        write_queues_by_broker: broker name -> write queues, one cluster at one instant.
        max_cv: ``queue_skew_cv``.
        max_over_mean: ``queue_skew_max_over_mean``.

    Returns:
        ``suggested_moves`` (``from_broker_name``, ``to_broker_name``, ``write_queues``) in order,
        and ``cv_after``, ``max_over_mean_after`` (null without queues), ``within_threshold_after``.

    Example:
        >>> suggest_moves({"a": 9, "b": 1, "c": 2}, 0.5, 2.0)["suggested_moves"]
        [{'from_broker_name': 'a', 'to_broker_name': 'b', 'write_queues': 3}]
    """
    loads = {name: int(n) for name, n in write_queues_by_broker.items()}
    moves: list[dict[str, Any]] = []

    def stats() -> tuple[float | None, float | None]:
        if not loads:
            return None, None
        mean = sum(loads.values()) / len(loads)
        if mean <= 0:
            return None, None
        var = sum((x - mean) ** 2 for x in loads.values()) / len(loads)
        return math.sqrt(var) / mean, max(loads.values()) / mean

    cv, ratio = stats()
    while cv is not None and ratio is not None and (cv > max_cv or ratio > max_over_mean):
        mean = sum(loads.values()) / len(loads)
        hi = min(loads, key=lambda name: (-loads[name], name))
        lo = min(loads, key=lambda name: (loads[name], name))
        k = math.floor(min(loads[hi] - mean, mean - loads[lo]))
        if k < 1:
            k = (loads[hi] - loads[lo]) // 2
        if k < 1:
            break  # within one queue of each other: integer moves cannot do better
        loads[hi] -= k
        loads[lo] += k
        moves.append({"from_broker_name": hi, "to_broker_name": lo, "write_queues": k})
        cv, ratio = stats()
    within = cv is None or ratio is None or (cv <= max_cv and ratio <= max_over_mean)
    return {"suggested_moves": moves, "cv_after": cv, "max_over_mean_after": ratio, "within_threshold_after": within}
