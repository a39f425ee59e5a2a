"""The Dockerfile builds the image from the package's wheel: a first stage builds the wheel, the second
installs the requirements pyproject.toml declares (the base and [serve]) in a layer of their own, before the
code, then the wheel without dependencies; it runs as a user without rights, with one HEALTHCHECK, and
refuses to listen beyond loopback without a token. The image itself is built and started by
tests/serve/test_serve_image.py (OPTSERVE_IMAGE_TEST=1)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from optserve.config import Settings, env_name

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
INSTRUCTIONS = re.sub(r"\\\n", "", DOCKERFILE)  # lines joined where they continue, as docker reads them


def _requirements_command() -> str:
    """The shell command of the dependency layer that writes /tmp/requirements.txt."""
    run = re.search(r"^RUN (python3 -c .*?) >/tmp/requirements\.txt", INSTRUCTIONS, flags=re.M)
    assert run, "the Dockerfile has no dependency layer writing /tmp/requirements.txt"
    return run.group(1)


def test_the_dependency_layer_installs_the_base_and_serve_requirements():
    command = _requirements_command().replace("/tmp/pyproject.toml", str(REPO_ROOT / "pyproject.toml"))
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    written = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, check=True)
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert written.stdout.splitlines() == project["dependencies"] + project["optional-dependencies"]["serve"]
    layer = re.search(r"^RUN python3 -c .*$", INSTRUCTIONS, flags=re.M).group()
    assert "pip install -r /tmp/requirements.txt" in layer


def test_the_image_installs_the_wheel_of_its_first_stage_without_dependencies():
    stages = re.findall(r"^FROM (.*)$", INSTRUCTIONS, flags=re.M)
    assert stages == ["${BASE} AS wheel", "${BASE}"]
    assert re.search(r"^RUN .*pip wheel --no-deps --wheel-dir /dist \.", INSTRUCTIONS, flags=re.M)
    assert re.search(r"^COPY --from=wheel /dist/ /tmp/dist/$", INSTRUCTIONS, flags=re.M)
    assert re.search(r"^RUN pip install --no-deps /tmp/dist/optserve-\*\.whl", INSTRUCTIONS, flags=re.M)
    final_stage = INSTRUCTIONS.split("\nFROM ${BASE}\n", 1)[1]
    assert not re.search(r"^COPY \. ", final_stage, flags=re.M), "the service stage copies the source tree"


def test_the_image_runs_as_a_user_with_one_healthcheck():
    users = re.findall(r"^USER (\S+)$", INSTRUCTIONS, flags=re.M)
    assert users and users[-1] not in ("root", "0")
    assert len(re.findall(r"^HEALTHCHECK ", INSTRUCTIONS, flags=re.M)) == 1


def test_the_image_refuses_to_listen_beyond_loopback_without_a_token():
    assert "require_token_beyond_loopback" in Settings.model_fields["serve"].annotation.model_fields
    variable = env_name("serve.require_token_beyond_loopback")
    assert re.search(rf"^ENV {variable}=true$", INSTRUCTIONS, flags=re.M)
    assert re.search(r'^CMD \["optserve", "serve", "--host", "0\.0\.0\.0"\]$', INSTRUCTIONS, flags=re.M)
