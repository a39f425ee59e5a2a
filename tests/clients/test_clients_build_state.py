"""optcc's per-build state (clients/build_state.py): a build is its process group, told apart from an older
build that had the same group id."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from optserve.clients import build_state


def test_an_older_build_with_the_same_group_id_does_not_leak_its_state(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # re-read TMPDIR
    state = tmp_path / f"optcc-{os.getuid()}"
    state.mkdir()
    # What another build of this group id left (the old marker name, or another leader's start time):
    (state / f"fallback-{os.getpgrp()}").write_text(build_state.UNREACHABLE)
    (state / f"fallback-{os.getpgrp()}-1").write_text(build_state.UNREACHABLE)
    assert not build_state.service_unreachable_since(retry_s=600)
    assert build_state.first_fallback(unreachable=True)  # this build's first fallback
    assert build_state.service_unreachable_since(retry_s=600)
    assert not build_state.first_fallback(unreachable=False)


def test_processes_of_one_group_share_the_state_and_a_new_group_does_not(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    ask = [sys.executable, "-c", "from optserve.clients import build_state as b; "
           "print(b.service_unreachable_since(600))"]  # fmt: skip
    mark = [sys.executable, "-c", "from optserve.clients import build_state as b; b.first_fallback(True)"]
    # One group (as make's children): the leader marks, a child of the same group sees it.
    leader = subprocess.run(
        [sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1:4]); "
         "print(subprocess.run(sys.argv[4:], capture_output=True, text=True).stdout.strip())",
         *mark, *ask],
        env=env, capture_output=True, text=True, start_new_session=True, check=True,
    )  # fmt: skip
    assert leader.stdout.strip() == "True"
    time.sleep(0.05)
    other = subprocess.run(ask, env=env, capture_output=True, text=True, start_new_session=True, check=True)
    assert other.stdout.strip() == "False"
