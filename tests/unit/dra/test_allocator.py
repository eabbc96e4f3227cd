"""The device allocator (scheduler/dra/allocator.py): finds an allocation exactly when one exists.

Hypothesis draws one node's devices (a model, a NUMA node, maybe a taint) with some in use, and one or two
claims of one or two requests (``exactly`` with a count or All, admin access, or two ``firstAvailable``
subrequests; a selector on the model; maybe a matchAttribute constraint on NUMA). A brute force enumerates
every choice of devices for every request; the allocator must find an allocation exactly when the brute
force does, and what it finds must be one: no device twice (but for admin access), none in use (but for admin
access), each request served as asked, each constraint held, the first servable subrequest used.
Selectors here are the test's own predicates (``model=a``), not CEL: CEL is tests/unit/dra/test_cel.py's.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.dra.allocator import TimedOut, Candidate, allocate, node_selector
from scheduler.model.dra import (
    ALL, ExactRequest, parse_resource_claim, parse_resource_slice,
)

DRIVER = "gpu.example.com"


def slice_of(devices: list[dict[str, Any]], node: str = "n1") -> Any:
    return parse_resource_slice({"metadata": {"name": f"{node}-s"}, "spec": {
        "driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": devices}})


def device(name: str, model: str, numa: int, taint: bool = False) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "attributes": {"model": {"string": model}, "numa": {"int": numa}}}
    if taint:
        d["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
    return d


def candidates(s: Any) -> list[Candidate]:
    return [Candidate((s.driver, s.pool, d.name), d, s) for d in s.devices]


def exact(sel: str = "", mode: str = "ExactCount", count: int = 1, admin: bool = False,
          tolerate: bool = False) -> dict[str, Any]:
    e: dict[str, Any] = {"deviceClassName": "gpu", "allocationMode": mode}
    if mode == "ExactCount":
        e["count"] = count
    if sel:
        e["selectors"] = [{"cel": {"expression": sel}}]
    if admin:
        e["adminAccess"] = True
    if tolerate:
        e["tolerations"] = [{"key": "broken", "operator": "Exists"}]
    return e


def claim(name: str, requests: list[dict[str, Any]], numa: bool = False) -> Any:
    spec: dict[str, Any] = {"requests": requests}
    if numa:
        spec["constraints"] = [{"matchAttribute": f"{DRIVER}/numa"}]
    return parse_resource_claim({"metadata": {"name": name, "namespace": "ns", "uid": name},
                                 "spec": {"devices": spec}})


def match(req: ExactRequest, c: Candidate) -> bool:
    for t in c.device.taints:
        if t.effect in ("NoSchedule", "NoExecute") and not any(x.tolerates(t) for x in req.tolerations):
            return False
    for sel in req.selectors:
        key, _, want = sel.partition("=")
        got = c.device.attribute(DRIVER, key)
        if got is None or str(got[1]) != want:
            return False
    return True


# ---------------------------------------------------------------------------- examples

def test_one_device_per_claim_on_a_node_of_two() -> None:
    s = slice_of([device("g0", "a", 0), device("g1", "a", 1)])
    claims = [claim("c1", [{"name": "gpu", "exactly": exact()}]), claim("c2", [{"name": "gpu", "exactly": exact()}])]
    out = allocate(claims, candidates(s), lambda d: False, match)
    assert out is not None and [[r.id[2] for r in res] for res in out] == [["g0"], ["g1"]]
    assert allocate(claims + [claim("c3", [{"name": "gpu", "exactly": exact()}])], candidates(s),
                    lambda d: False, match) is None


def test_a_constraint_backtracks_to_the_numa_node_with_two_free() -> None:
    s = slice_of([device("g0", "a", 0), device("g1", "a", 1), device("g2", "a", 1)])
    c = claim("c", [{"name": "x", "exactly": exact()}, {"name": "y", "exactly": exact()}], numa=True)
    out = allocate([c], candidates(s), lambda d: False, match)
    assert out is not None and [r.id[2] for r in out[0]] == ["g1", "g2"]


def test_first_available_takes_the_first_subrequest_that_can_be_served() -> None:
    s = slice_of([device("g0", "b", 0)])
    c = claim("c", [{"name": "gpu", "firstAvailable": [{"name": "big", **exact("model=a")},
                                                       {"name": "small", **exact("model=b")}]}])
    out = allocate([c], candidates(s), lambda d: False, match)
    assert out is not None and [(r.request, r.sub_index) for r in out[0]] == [("gpu/small", 1)]


def test_all_needs_every_matching_device_free() -> None:
    s = slice_of([device("g0", "a", 0), device("g1", "a", 1)])
    c = claim("c", [{"name": "gpu", "exactly": exact(mode="All")}])
    assert allocate([c], candidates(s), lambda d: d[2] == "g1", match) is None
    out = allocate([c], candidates(s), lambda d: False, match)
    assert out is not None and len(out[0]) == 2


def test_a_tainted_device_needs_a_toleration() -> None:
    s = slice_of([device("g0", "a", 0, taint=True)])
    assert allocate([claim("c", [{"name": "gpu", "exactly": exact()}])], candidates(s), lambda d: False, match) is None
    out = allocate([claim("c", [{"name": "gpu", "exactly": exact(tolerate=True)}])], candidates(s),
                   lambda d: False, match)
    assert out is not None and out[0][0].tolerations and out[0][0].tolerations[0].key == "broken"


def test_the_budget_ends_a_hopeless_search() -> None:
    s = slice_of([device(f"g{i}", "a", i % 2) for i in range(16)])
    # 8 devices on one NUMA node asked as 9 requests: every combination is tried before it fails
    c = claim("c", [{"name": f"r{i}", "exactly": exact()} for i in range(9)], numa=True)
    with pytest.raises(TimedOut):
        allocate([c], candidates(s), lambda d: False, match, budget=1000)


def test_node_selector_pins_a_node_local_allocation_to_its_node() -> None:
    s = slice_of([device("g0", "a", 0)])
    out = allocate([claim("c", [{"name": "gpu", "exactly": exact()}])], candidates(s), lambda d: False, match)
    assert out is not None
    assert node_selector(out[0], "n1") == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}


# ---------------------------------------------------------------------------- brute force

def _brute(claims: list[Any], cands: list[Candidate], in_use: set[Any]) -> bool:
    slots = []
    for ci, c in enumerate(claims):
        for r in c.requests:
            alts = [r.exactly] if r.exactly is not None else [sub for _, sub in r.first_available]
            slots.append((ci, r.name, alts))

    def options(req: ExactRequest) -> list[tuple[Candidate, ...]]:
        eligible = [c for c in cands if match(req, c)]
        if req.mode == ALL:
            if not eligible or (not req.admin_access and any(c.id in in_use for c in eligible)):
                return []
            return [tuple(eligible)]
        free = [c for c in eligible if req.admin_access or c.id not in in_use]
        return list(itertools.combinations(free, req.count))

    def ok(picks: list[tuple[int, str, tuple[Candidate, ...]]]) -> bool:
        seen: set[Any] = set()
        for _, _, devs in picks:
            for d in devs:
                if d.id in seen:
                    return False
                seen.add(d.id)
        for ci, c in enumerate(claims):
            for con in c.constraints:
                vals = {d.device.attribute(DRIVER, con.match_attribute) for k, name, devs in picks if k == ci
                        and (not con.requests or name in con.requests) for d in devs}
                if None in vals or len(vals) > 1:
                    return False
        return True

    choices = [[(ci, name, devs) for req in alts for devs in options(req)] for ci, name, alts in slots]
    return any(ok(list(p)) for p in itertools.product(*choices))


requests = st.one_of(
    st.builds(lambda sel, n, admin: {"exactly": exact(sel, count=n, admin=admin)},
              st.sampled_from(["", "model=a", "model=b"]), st.integers(1, 3), st.booleans()),
    st.builds(lambda sel: {"exactly": exact(sel, mode="All")}, st.sampled_from(["", "model=a"])),
    st.builds(lambda a, b, n: {"firstAvailable": [{"name": "s0", **exact(a, count=n)}, {"name": "s1", **exact(b)}]},
              st.sampled_from(["model=a", "model=b"]), st.sampled_from(["", "model=b"]), st.integers(1, 3)),
)


@st.composite
def cases(draw: Any) -> tuple[list[Candidate], list[Any], set[Any]]:
    n = draw(st.integers(0, 6))
    devs = [device(f"g{i}", draw(st.sampled_from("ab")), draw(st.integers(0, 1)), draw(st.booleans()) and
                   draw(st.booleans())) for i in range(n)]
    cands = candidates(slice_of(devs))
    in_use = {c.id for c in cands if draw(st.integers(0, 3)) == 0}
    claims = []
    for ci in range(draw(st.integers(1, 2))):
        reqs = [{"name": f"r{j}", **draw(requests)} for j in range(draw(st.integers(1, 2)))]
        claims.append(claim(f"c{ci}", reqs, numa=draw(st.booleans())))
    return cands, claims, in_use


@settings(max_examples=300, deadline=None)
@given(case=cases())
def test_finds_an_allocation_exactly_when_one_exists_and_it_is_one(case: Any) -> None:
    cands, claims, in_use = case
    out = allocate(claims, cands, lambda d: d in in_use, match)
    assert (out is not None) == _brute(claims, cands, in_use), (out, claims)
    if out is None:
        return
    taken: set[Any] = set()
    for c, results in zip(claims, out):
        for r in results:
            if not r.admin_access:
                assert r.id not in in_use, f"{r.id} is in use"
            assert r.id not in taken, f"{r.id} allocated twice"
            taken.add(r.id)
        for req in c.requests:
            mine = [r for r in results if r.request.split("/")[0] == req.name]
            subs = {r.request for r in mine}
            assert len(subs) == 1, subs
            chosen = req.exactly if req.exactly is not None else req.first_available[mine[0].sub_index][1]
            assert all(match(chosen, r.candidate) for r in mine)
            if chosen.mode != ALL:
                assert len(mine) == chosen.count
        for con in c.constraints:
            vals = {r.candidate.device.attribute(DRIVER, con.match_attribute) for r in results}
            assert len(vals) == 1 and None not in vals
