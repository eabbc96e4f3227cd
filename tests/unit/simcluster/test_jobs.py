"""The names kube-controller-manager 1.36's Job controller gives a Job's Workload and PodGroup.

The expected names were read off a real kube-controller-manager 1.36.2 (the
Job ``train`` with that uid got exactly these objects); the long-name cases
check the cut that keeps both names within 253 characters.
"""

from __future__ import annotations

import pytest

from bench.simcluster.jobs import pod_group_name, qualifies, template_name, workload_name


def test_names_are_those_the_real_controller_gave() -> None:
    wl = workload_name("train", "adc262b4-4de2-4f51-9c19-0f0a4c6685f6")
    assert wl == "train-6f988bc4b5"
    assert pod_group_name(wl, template_name("train")) == "train-6f988bc4b5-train-pgt-0-65ffd6cd5d"


def test_long_names_are_cut_to_a_dns_subdomain() -> None:
    wl = workload_name("j" * 253, "uid")
    assert len(wl) == 253 and wl.startswith("j" * 200)
    pg = pod_group_name(wl, template_name("j" * 253))
    assert len(pg) <= 253
    short = pod_group_name("w", "t" * 300)
    assert len(short) <= 253 and short.startswith("w-ttt")


def _job(**spec):
    return {"spec": {"completionMode": "Indexed", "parallelism": 3, "completions": 3,
                     "template": {"spec": {}}, **spec}}


@pytest.mark.parametrize("spec,want", [
    ({}, True),
    ({"completionMode": "NonIndexed"}, False),
    ({"parallelism": 1, "completions": 1}, False),
    ({"completions": 4}, False),
    ({"template": {"spec": {"schedulingGroup": {"podGroupName": "mine"}}}}, False),
], ids=["indexed, parallelism 3 = completions", "non-indexed", "parallelism 1", "completions differ",
        "the template names its own group"])
def test_which_jobs_get_a_gang(spec, want) -> None:
    assert qualifies(_job(**spec)) is want
