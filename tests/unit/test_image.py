"""Containerfile, .dockerignore/.containerignore and `make image`: the image the Deployment runs.

No container engine is needed: the Containerfile is read as text, and
``make image`` runs with fake engines on PATH (one without a running daemon,
as `docker` without dockerd, and one that records the build it is asked for).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = REPO / "Containerfile"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    text = re.sub(r"\\\n", " ", CONTAINERFILE.read_text())
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _final_stage() -> list[tuple[str, str]]:
    ins = _instructions()
    last_from = max(i for i, (w, _) in enumerate(ins) if w == "FROM")
    return ins[last_from:]


def _makefile_var(name: str) -> str:
    m = re.search(rf"^{name}\s*\?=\s*(.+)$", (REPO / "Makefile").read_text(), re.M)
    assert m, f"Makefile sets no {name}"
    return m.group(1).strip()


def _deployment_container() -> dict:
    doc = yaml.safe_load((REPO / "manifests" / "deployment.yaml").read_text())
    (c,) = doc["spec"]["template"]["spec"]["containers"]
    return c


def test_the_image_runs_as_uid_65532_from_a_slim_python() -> None:
    final = _final_stage()
    assert final[0][1].startswith("python:3.11-slim"), final[0]
    users = [arg for w, arg in final if w == "USER"]
    assert users and users[-1].split(":")[0] == "65532", users
    doc = yaml.safe_load((REPO / "manifests" / "deployment.yaml").read_text())
    assert doc["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 65532


def test_only_the_runtime_dependencies_are_installed() -> None:
    installs = [arg for w, arg in _instructions() if w == "RUN" and "pip install" in arg]
    assert installs, "the package is installed with pip"
    for arg in installs:
        assert re.search(r"pip install\b.*\s\.(\s|$)", arg), arg   # the package itself: `pip install ... .`
        assert "[" not in arg, f"no extras ([bench], [test]) in the image: {arg}"


def test_the_entrypoint_is_the_console_script_and_the_default_args_read_the_configmap() -> None:
    final = dict(_final_stage())
    entrypoint, cmd = json.loads(final["ENTRYPOINT"]), json.loads(final["CMD"])
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert entrypoint == ["tandem-scheduler"] and entrypoint[0] in scripts
    from scheduler.__main__ import parser
    args = parser().parse_args(cmd)
    c = _deployment_container()
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "config"]
    assert Path(args.config).parent == Path(mount["mountPath"])
    assert args.config in c.get("command", []) + c.get("args", [])


def test_the_deployment_runs_the_image_make_image_tags() -> None:
    c = _deployment_container()
    assert c["image"] == _makefile_var("IMAGE") == "tandem-scheduler:dev"
    assert c["imagePullPolicy"] == "IfNotPresent", "a kind-loaded image is used, not pulled"


def test_both_ignore_files_say_the_same_and_keep_the_venv_and_tests_out() -> None:
    docker, podman = (REPO / ".dockerignore").read_text(), (REPO / ".containerignore").read_text()
    assert docker == podman
    entries = {line.strip() for line in docker.splitlines() if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "tests", "bench/out"} <= entries
    for copied in ("pyproject.toml", "README.md", "scheduler", "plugins", "bench"):
        assert copied not in entries


def _fake_engine(bin_dir: Path, name: str, running: bool) -> Path:
    log = bin_dir / f"{name}.log"
    script = bin_dir / name
    script.write_text(f"""#!/bin/sh
echo "$@" >> "{log}"
if [ "$1" = info ]; then exit {0 if running else 1}; fi
if [ "$1" = --version ]; then echo "{name} version 28.2.2"; fi
exit 0
""")
    script.chmod(0o755)
    return log


def _make_image(tmp_path: Path, engines: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ.get('PATH', '')}"}
    cmd = ["make", "-s", "-C", str(REPO), "image", f"CONTAINER_ENGINES={engines}"]
    cmd += [f"{k}={v}" for k, v in extra.items()]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def test_make_image_without_a_running_engine_says_so_and_fails(tmp_path: Path) -> None:
    log = _fake_engine(tmp_path, "fakedocker", running=False)   # a CLI whose daemon is not there
    r = _make_image(tmp_path, "fakedocker no-such-engine")
    assert r.returncode != 0
    assert "no usable container engine" in r.stderr and "fakedocker" in r.stderr, r.stderr
    assert "build" not in log.read_text(), "nothing is built"


@pytest.mark.parametrize("engines, used", [
    pytest.param("fakepodman", "fakepodman", id="the only engine"),
    pytest.param("fakedocker fakepodman", "fakepodman", id="the first one that runs"),
])
def test_make_image_builds_the_containerfile_with_a_running_engine(tmp_path: Path, engines: str, used: str) -> None:
    _fake_engine(tmp_path, "fakedocker", running=False)
    log = _fake_engine(tmp_path, "fakepodman", running=True)
    r = _make_image(tmp_path, engines, IMAGE="example.com/tandem:t1")
    assert r.returncode == 0, r.stderr
    assert f"building example.com/tandem:t1 with {used}" in r.stdout
    assert "build -f Containerfile -t example.com/tandem:t1 ." in log.read_text()
