"""ImageLocality: nodes holding the pod's images score higher, scaled by spread (plugins/image_locality.py)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.image_locality import ImageLocality, normalized_image_name
from scheduler.framework import CycleState
from scheduler.model import parse_node, parse_pod
from scheduler.state.cache import Cache

MB = 1024 * 1024


def make_node(name: str, images: dict[tuple[str, ...], int]) -> Any:
    return parse_node({"metadata": {"name": name},
                       "status": {"images": [{"names": list(names), "sizeBytes": size * MB}
                                             for names, size in images.items()]}})


def make_pod(containers: list[str], init: list[str] | None = None) -> Any:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(containers)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "image": im} for i, im in enumerate(init)]
    return parse_pod({"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": spec})


N_40_300_2000 = {("gcr.io/40:latest", "gcr.io/40:v1"): 40, ("gcr.io/300:latest", "gcr.io/300:v1"): 300,
                 ("gcr.io/2000:latest",): 2000}
N_250_10 = {("gcr.io/250:latest",): 250, ("gcr.io/10:latest", "gcr.io/10:v1"): 10}
N_600_900 = {("gcr.io/600:latest",): 600, ("gcr.io/900:latest",): 900}
N_300_600_900 = {("gcr.io/300:latest",): 300, ("gcr.io/600:latest",): 600, ("gcr.io/900:latest",): 900}

CASES = [
    # 250M/2 spread = 125M: 100 * (125M - 23M) / (2 * 1000M - 23M) = 5
    pytest.param(["gcr.io/40", "gcr.io/250"], None, {"a": N_40_300_2000, "b": N_250_10}, {"a": 0, "b": 5},
                 id="an image on half the nodes counts half its size and small sums floor at zero"),
    # (40M + 300M) / 2 = 170M: 100 * 147M / 1977M = 7
    pytest.param(["gcr.io/40", "gcr.io/300"], None, {"a": N_40_300_2000, "b": N_250_10}, {"a": 7, "b": 0},
                 id="two images on one node add up"),
    # 2000M / 2 = 1000M with two containers: 100 * 977M / 1977M = 49
    pytest.param(["gcr.io/10", "gcr.io/2000"], None, {"a": N_40_300_2000, "b": N_250_10}, {"a": 49, "b": 0},
                 id="the maximum grows with the number of containers"),
    # one container: 2000M / 2 = 1000M reaches the 1000M cap
    pytest.param(["gcr.io/2000"], None, {"a": N_40_300_2000, "b": N_250_10}, {"a": 100, "b": 0},
                 id="a sum at the per-container cap scores the maximum"),
    # 2000M / 3, truncated to bytes: 100 * (699050666 - 23M) / (1000M - 23M) = 65
    pytest.param(["gcr.io/2000"], None, {"a": N_40_300_2000, "b": N_250_10, "c": {}}, {"a": 65, "b": 0, "c": 0},
                 id="nodes without the image dilute its spread"),
    # a: 600*2/3 + 900*2/3 = 1000M -> 100 * 977 / 2977 = 32; b: + 300/3 -> 100 * 1077 / 2977 = 36
    pytest.param(["gcr.io/300", "gcr.io/600", "gcr.io/900"], None,
                 {"a": N_600_900, "b": N_300_600_900, "c": {}}, {"a": 32, "b": 36, "c": 0},
                 id="several large images prefer the node holding most of them"),
    # init container image 300M / 2 = 150M: 100 * 127 / 1977 = 6
    pytest.param(["gcr.io/30"], ["gcr.io/300"], {"a": N_40_300_2000, "b": N_250_10}, {"a": 6, "b": 0},
                 id="init container images count as containers"),
    pytest.param(["gcr.io/250:v2"], None, {"a": N_250_10, "b": N_250_10}, {"a": 0, "b": 0},
                 id="another tag is another image"),
    pytest.param(["gcr.io/40:v1"], None, {"a": {("gcr.io/40:v1",): 400}}, {"a": 38},
                 id="a tagged image matches that tag and 100 * 377 / 977 truncates to 38"),
    pytest.param(["nginx"], None, {"a": {("docker.io/library/nginx:latest",): 500}}, {"a": 0},
                 id="docker.io/library prefixes are not added, as upstream"),
]


@pytest.mark.parametrize("containers, init, nodes, want", CASES)
def test_score(containers: list[str], init: list[str] | None, nodes: dict[str, Any], want: dict[str, int]) -> None:
    cache = Cache()
    for name, images in nodes.items():
        cache.add_node(make_node(name, images))
    rows = cache.nodes.rows()
    got = ImageLocality(None, None).score(CycleState(), make_pod(containers, init), cache.nodes, rows)
    assert dict(zip(cache.nodes.names_of(rows), got.tolist())) == want


def test_only_scored_rows_are_returned_but_spread_counts_every_node() -> None:
    cache = Cache()
    for name in ("a", "b", "c", "d"):
        cache.add_node(make_node(name, {("gcr.io/big:latest",): 2000} if name in "ab" else {}))
    rows = cache.nodes.rows()[:1]
    got = ImageLocality(None, None).score(CycleState(), make_pod(["gcr.io/big"]), cache.nodes, rows)
    # 2000M * 2/4 = 1000M: the cap for one container
    assert got.tolist() == [100]


def test_a_removed_node_no_longer_counts_for_spread() -> None:
    cache = Cache()
    for name in ("a", "b"):
        cache.add_node(make_node(name, {("gcr.io/big:latest",): 1000}))
    cache.remove_node("b")
    rows = cache.nodes.rows()
    got = ImageLocality(None, None).score(CycleState(), make_pod(["gcr.io/big"]), cache.nodes, rows)
    assert got.tolist() == [100]


NAMES = [
    pytest.param("root", "root:latest", id="a bare name gets latest"),
    pytest.param("gcr.io:5000/root", "gcr.io:5000/root:latest", id="a registry port is not a tag"),
    pytest.param("root:tag", "root:tag", id="a tag is kept"),
    pytest.param("root@sha256:" + "a" * 64, "root@sha256:" + "a" * 64, id="a digest is kept"),
]


@pytest.mark.parametrize("name, want", NAMES)
def test_normalized_image_name(name: str, want: str) -> None:
    assert normalized_image_name(name) == want
