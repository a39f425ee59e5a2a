"""Session-wide test settings for every test folder."""

from __future__ import annotations

import pytest

# The `service` marker: a test that needs a live Ray Serve app is marked from the fixtures that start one,
# so `make test-fast` (`-m "not service"`) leaves those tests out without marking each by hand. The
# fixtures: tests/serve (`service`; `default_service`, a whole `optserve serve` / `serve run` process),
# tests/reliability (`rel_service`), tests/clients (`optserve_target`). A test requesting any of them,
# directly or through another fixture (`client`, `http`, `grpc_client`, ...), is a service test.
SERVICE_FIXTURES = frozenset({"service", "default_service", "rel_service", "optserve_target"})


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.service)
