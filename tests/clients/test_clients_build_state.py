"""optcc's per-build state (clients/build_state.py): a build is its process group, told apart from an older
build that had the same group id."""

from __future__ import annotations

import os
import subprocess
import sys
import time

_OLDER_BUILD = """
import os
from optserve.clients import build_state as b
state = b._marker().parent
state.mkdir(mode=0o700, exist_ok=True)
# What another build of this group id left (the old marker name, or another leader's start time):
(state / f"fallback-{os.getpgrp()}").write_text(b.UNREACHABLE)
(state / f"fallback-{os.getpgrp()}-1").write_text(b.UNREACHABLE)
print(b.service_unreachable_since(600), b.first_fallback(True), b.service_unreachable_since(600),
      b.first_fallback(False))
"""


def test_an_older_build_with_the_same_group_id_does_not_leak_its_state(tmp_path):
    # In a group of its own, so its leader (the process itself) is alive and has a start time to read.
    done = subprocess.run(
        [sys.executable, "-c", _OLDER_BUILD], env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True, text=True, start_new_session=True, check=True,
    )  # fmt: skip
    # Not unreachable at first; this build's first fallback; now unreachable; a second one is not the first.
    assert done.stdout.split() == ["False", "True", "True", "False"]


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
