"""Session-wide test settings for every test folder: the `service` marker, and a tuning store directory of
the session's own (tests never write the user's cache directory's store)."""

from __future__ import annotations

import os
import tempfile

import pytest


def pytest_configure(config) -> None:
    # Set before any service starts, so Ray's workers (the ingress opens the store) inherit it.
    if "OPTSERVE_TUNING_DIR" not in os.environ:
        os.environ["OPTSERVE_TUNING_DIR"] = tempfile.mkdtemp(prefix="optserve-tuning-test-")
    # The suites' hand-made entries save a byte or two: no bar on what a stored answer must save (the bar
    # itself: tests/tuning/test_tuning_flow.py, with the default the service ships).
    os.environ.setdefault("OPTSERVE_TUNING__MIN_SAVED_BYTES", "0")


# The `service` marker: a test that needs a live Ray Serve app is marked from the fixtures that start one,
# so `make test-fast` (`-m "not service"`) leaves those tests out without marking each by hand. The
# fixtures: tests/serve (`service`; `default_service`, a whole `optserve serve` / `serve run` process),
# tests/reliability (`rel_service`), tests/clients (`optserve_target`), tests/observability
# (`traced_service`). A test requesting any of them, directly or through another fixture (`client`, `http`,
# `grpc_client`, ...), is a service test.
SERVICE_FIXTURES = frozenset(
    {"service", "default_service", "rel_service", "optserve_target", "traced_service"}
)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.service)
