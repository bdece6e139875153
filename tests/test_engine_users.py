"""Runs sharing the dockerd the suite started: the last user stops it, crashed users count for nothing.

Faked, and said so: dockerd is a stand-in process (a sleeping Python) and "docker info answers" means that stand-in
(or, for an engine the suite did not start, a flag) is alive; apt and the capability probe are switched off. The
leases, the flock, the pid checks and the stopping are the real code on real processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.cluster.kind import engine as engine_mod
from conformance.cluster.kind.engine import Engine, ensure_engine
from conformance.cluster.kind.engine_users import EngineUsers, process_start

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]


class FakeDocker:
    """What `docker info` would say: answers while the recorded stand-in dockerd lives, or while `foreign` is set."""

    def __init__(self, state: Path) -> None:
        self.users = EngineUsers(state)
        self.foreign = False
        self.started: list[int] = []

    def problem(self) -> str | None:
        if self.foreign:
            return None
        try:
            pid = int((self.users.state / "dockerd.json").read_text().split('"pid": ')[1].split(",")[0])
        except (FileNotFoundError, IndexError):
            return "no engine"
        return None if process_start(pid) is not None else "no engine"


@pytest.fixture
def docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDocker]:
    fake = FakeDocker(tmp_path / "docker")
    monkeypatch.setattr(engine_mod, "docker_problem", fake.problem)
    monkeypatch.setattr(engine_mod, "install_packages", lambda progress: None)
    monkeypatch.setattr(engine_mod, "missing_capabilities", lambda: [])
    monkeypatch.setattr(engine_mod, "dockerd_command", lambda state: SLEEPER)
    monkeypatch.setattr(engine_mod.sys, "platform", "linux")
    monkeypatch.delenv(engine_mod.START_ENV, raising=False)
    yield fake
    pid = fake.users.started_dockerd()
    if pid is not None:  # a failed test must not leave its stand-in behind
        subprocess.run(["kill", str(pid)], check=False)


def _engine(docker: FakeDocker, said: list[str]) -> Engine:
    return ensure_engine(said.append, state=docker.users.state)


def test_the_first_run_to_end_leaves_the_shared_dockerd_to_the_last(docker: FakeDocker) -> None:
    said: list[str] = []
    first = _engine(docker, said)
    assert first.process is not None and first.started_here
    second = _engine(docker, said)
    assert second.process is None and second.started_here and second.pid == first.pid, "a second dockerd started"
    first.stop()
    assert process_start(first.pid or 0) is not None, f"the first run to end stopped dockerd under the other: {said}"
    assert docker.problem() is None
    assert any("1 other user(s) hold a lease" in m for m in said), said
    second.stop()
    assert first.process.poll() is not None, "the last user left dockerd running"
    assert any(m.startswith("stopping the dockerd an earlier run started") for m in said), said
    assert docker.users.started_dockerd() is None and docker.users.live() == []


def test_a_crashed_user_does_not_keep_dockerd_up(docker: FakeDocker) -> None:
    said: list[str] = []
    mine = _engine(docker, said)
    crashed = subprocess.Popen(SLEEPER)
    with docker.users.lock():
        docker.users.join(crashed.pid)  # another run's lease ...
    crashed.kill()  # ... which ends without leaving (kill -9, OOM, a power cut of its terminal)
    crashed.wait()
    mine.stop()
    assert mine.process is not None and mine.process.poll() is not None, "a crashed user's lease kept dockerd up"
    assert docker.users.started_dockerd() is None
    assert any("no other user is left" in m for m in said), said


def test_a_reused_pid_is_not_taken_for_the_user_that_had_it(docker: FakeDocker) -> None:
    users = docker.users
    users.state.joinpath("users").mkdir(parents=True)
    start = process_start(os.getpid())
    assert start is not None
    stale = users.state / "users" / f"{os.getpid()}-{start + 1}-deadbeef"  # same pid, other process
    stale.touch()
    assert users.live() == [] and not stale.exists()


def test_dockerd_left_by_a_crashed_last_user_is_taken_over_and_stopped(docker: FakeDocker) -> None:
    orphan = subprocess.Popen(SLEEPER, start_new_session=True)  # the dockerd of a run that then crashed
    crashed = subprocess.Popen(SLEEPER)
    with docker.users.lock():
        docker.users.record_dockerd(orphan.pid)
        docker.users.join(crashed.pid)
    crashed.kill()
    crashed.wait()
    said: list[str] = []
    taken = _engine(docker, said)
    assert taken.process is None and taken.pid == orphan.pid and taken.started_here
    assert any("using the dockerd the suite started earlier" in m for m in said), said
    taken.stop()
    assert orphan.wait(timeout=30) is not None and docker.users.started_dockerd() is None
    assert any(m.startswith("stopping the dockerd an earlier run started") for m in said), said


def test_an_engine_the_suite_did_not_start_is_never_stopped(docker: FakeDocker) -> None:
    docker.foreign = True
    said: list[str] = []
    engine = _engine(docker, said)
    assert not engine.started_here and engine.lease is None
    engine.stop()
    assert said == [] and docker.users.live() == []


def test_a_kept_cluster_keeps_dockerd_past_every_other_user(docker: FakeDocker) -> None:
    said: list[str] = []
    keeper = _engine(docker, said)
    hint = keeper.keep()
    assert f"kill {keeper.pid}" in hint
    later = _engine(docker, said)
    later.stop()
    assert keeper.process is not None and keeper.process.poll() is None, "dockerd of a kept cluster was stopped"
    assert any(m.startswith("leaving the dockerd") for m in said), said
    kept = [n for n in docker.users.live() if n.startswith("kept")]
    assert len(kept) == 1
    (docker.users.state / "users" / kept[0]).unlink()
    keeper.process.terminate()
    keeper.process.wait()
