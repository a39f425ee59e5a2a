"""Helpers that the tests and the benchmarks share: a real service and its settings (`service`), a private
PostgreSQL server (`postgres`), a self-signed TLS certificate (`tls`), bounded polling (`polling`), the
IR intake's fuzzing inputs, targets and crash isolation (`fuzz/`), what the benchmarks over a tuned
store's units share (`tuned_units`), the reliability benchmarks' report (`reliability_report`), a command
and a call timed (`commands`), and `make test`'s runner of the test folders (`folders`).

These run real processes; neither the runtime nor the training wing imports them (the import contract
`runtime-not-testing` in pyproject.toml). They are not part of an install (pyproject.toml's `packages`
leave them out): a checkout's tests and benchmarks import them, and they read the checkout's test inputs
under tests/data/.
"""

from pathlib import Path

TEST_DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
