"""Properties of the serving point at a load, over real options of the fixture plans (issues 31
and 33): between no load and an option's capacity its figures are positive, finite and agree
with the replica count; at any load, concurrency, burst or target from the smallest positive
float to 10^12 every search ends and no figure is non-finite or contradicts another.

The default suite runs a bounded number of examples; `-m slow` runs many more.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmfit.plan.load import Replica, Serving, serve
from llmfit.plan.settings import PlanSettings, Workload
from tests.conftest import HUB

CASES = (
    ("Qwen/Qwen3-8B", "8xh100-80g", ()),
    ("Qwen/Qwen3-8B", "8xh100-80g", ("sglang",)),
    ("Qwen/Qwen3-30B-A3B", "8xh100-80g", ()),
)


@functools.cache
def replicas() -> tuple[Replica, ...]:
    """Every option's replica of the cases' plans (--all), as the planner built them."""
    os.environ["HF_HUB_CACHE"] = str(HUB)
    os.environ["HF_HUB_OFFLINE"] = "1"
    from llmfit.advise import advise
    from llmfit.sources.fleet import resolve_fleet

    out = []
    for repo, fleet, engines in CASES:
        s = PlanSettings(engines=engines, every_layout=True)
        for o in advise(repo, resolve_fleet(fleet), s, offline=True).plan.options:
            if o.serving is not None and o.serving.replica is not None:
                out.append(o.serving.replica)
    return tuple(out)


def sane(sv: Serving) -> None:
    """No figure non-finite or negative where the option is counted as serving; a burst's
    throughput its requests' tokens over its run."""
    w = sv.workload
    assert sv.capacity_rate >= 0 and math.isfinite(sv.capacity_rate)
    assert sv.capacity_concurrency >= 0 and math.isfinite(sv.capacity_concurrency)
    if sv.replicas is None:
        return
    assert sv.replicas >= 1
    for x in (sv.rate, sv.output_tokens_per_s, sv.tpot_s, sv.ttft_s, sv.e2e_s, sv.batch):
        assert math.isfinite(x) and x >= 0, sv
    assert sv.output_tokens_per_s == pytest.approx(sv.rate * w.output_len, rel=1e-9)
    if w.requests is not None:
        assert sv.output_tokens_per_s == pytest.approx(
            w.requests * w.output_len / sv.makespan_s, rel=1e-9
        )


def bounded(n: int) -> object:
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


FRACTION = st.floats(min_value=1e-9, max_value=1.0)


def _below_capacity(index: int, fraction: float, k: int) -> None:
    reps = replicas()
    r = reps[index % len(reps)]
    w = Workload(named=True)
    cap = serve(r, w)
    if cap.replicas is None:
        return
    load = fraction * cap.capacity_rate * k
    sv = serve(r, replace(w, rate=load))
    # Within k replicas' capacity: at most k replicas, a steady state at the load.
    assert sv.replicas is not None and sv.replicas <= k
    sane(sv)
    assert sv.rate == pytest.approx(load, rel=1e-9)
    assert sv.output_tokens_per_s > 0 and sv.ttft_s > 0 and sv.tpot_s > 0
    if sv.replicas == 1:
        assert sv.meets


@bounded(60)
@given(st.integers(min_value=0, max_value=10**6), FRACTION, st.integers(1, 3))
def test_a_rate_within_capacity_is_served_on_its_replicas(index, fraction, k):
    _below_capacity(index, fraction, k)


@pytest.mark.slow
@bounded(2000)
@given(st.integers(min_value=0, max_value=10**6), FRACTION, st.integers(1, 8))
def test_a_rate_within_capacity_is_served_on_its_replicas_at_length(index, fraction, k):
    _below_capacity(index, fraction, k)


ANY = st.floats(min_value=5e-324, max_value=1e12, allow_subnormal=True)
TARGET = st.one_of(st.none(), ANY)


def _any_load(index: int, kind: str, value: float, ttft: float | None, tpot: float | None) -> None:
    reps = replicas()
    r = reps[index % len(reps)]
    w = Workload(named=True, ttft_s=ttft, tpot_s=tpot)
    if kind == "rate":
        w = replace(w, rate=value)
    elif kind == "concurrency":
        w = replace(w, concurrency=value)
    else:
        w = replace(w, requests=max(1, min(int(value), 10**12)))
    sane(serve(r, w))


@bounded(40)
@given(
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(("rate", "concurrency", "requests")),
    ANY,
    TARGET,
    TARGET,
)
def test_any_load_and_target_ends_with_sane_figures(index, kind, value, ttft, tpot):
    _any_load(index, kind, value, ttft, tpot)


@pytest.mark.slow
@bounded(1500)
@given(
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(("rate", "concurrency", "requests")),
    ANY,
    TARGET,
    TARGET,
)
def test_any_load_and_target_ends_with_sane_figures_at_length(index, kind, value, ttft, tpot):
    _any_load(index, kind, value, ttft, tpot)


@pytest.mark.parametrize("value", [5e-324, 1e-320, 1e-300, 1e-9, 1.0, 1e6, 1e12])
@pytest.mark.parametrize("kind", ["rate", "concurrency", "requests"])
def test_the_extremes_of_every_load(kind, value):
    for i in range(len(replicas())):
        _any_load(i, kind, value, 2.0, 0.05)
