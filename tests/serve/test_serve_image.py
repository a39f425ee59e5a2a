"""The service image: built where no registry or docker daemon is reachable (mmdebstrap base + buildah, as
root), the service started in it, ready over HTTP and answering one Optimize over gRPC.

Building takes ~10 minutes, ~5 GB of disk and network access to Debian and PyPI, so it runs when asked:
`OPTSERVE_IMAGE_TEST=1 pytest tests/serve/test_serve_image.py`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TAG = "localhost/optserve:test"


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(os.environ.get("OPTSERVE_IMAGE_TEST") != "1", reason="set OPTSERVE_IMAGE_TEST=1 (slow)")
def test_the_image_builds_starts_and_answers_optimize():
    subprocess.run([REPO / "serve" / "image" / "build.sh", TAG], check=True, timeout=2400)
    smoke = subprocess.run(
        [REPO / "serve" / "image" / "smoke.sh", TAG, "18682", "19682"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert smoke.returncode == 0, smoke.stdout[-6000:] + smoke.stderr[-2000:]
    assert "ready after" in smoke.stdout
    assert "Optimize: best" in smoke.stdout
