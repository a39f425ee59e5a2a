"""Ray's CPU accounting matches the processes: a compiler replica reserves one CPU per worker process."""

from __future__ import annotations

import psutil
from ray._private.state import state
from ray.core.generated import gcs_pb2

from optserve.serve.app import APP_NAME


def _alive_actors(class_name: str, state_name: str = "ALIVE") -> list[gcs_pb2.ActorTableData]:
    """From the GCS actor table (Ray's state API needs the dashboard, which the service does not start)."""
    table = state._connect_and_get_accessor().get_actor_table(None, state_name)
    actors = [gcs_pb2.ActorTableData.FromString(entry) for entry in table]
    return [actor for actor in actors if actor.class_name == class_name]


def test_a_compiler_replica_reserves_one_cpu_per_worker_process(service):
    """Its standby workers (compiler.standby_workers) are processes too, idle until one takes a stopped
    worker's place (its successor starts then, as a restart did before), and so is the intake's
    (compiler.intake_workers): they reserve no CPU."""
    _, settings = service
    replicas = _alive_actors(f"ServeReplica:{APP_NAME}:CompilerWorkers")
    assert replicas
    for replica in replicas:
        workers = [
            child
            for child in psutil.Process(replica.pid).children()
            if "optserve.compiler.workers" in child.cmdline()
        ]
        compiler = settings.compiler  # the intake's processes read IR for milliseconds: no CPU reserved
        processes = compiler.workers + compiler.standby_workers + compiler.intake_workers
        assert processes == 2 + 1 + 1  # and the burst ones (compiler.burst_workers), once a job overflowed
        assert processes <= len(workers) <= processes + compiler.burst_workers
        assert replica.required_resources["CPU"] == compiler.workers


def test_serve_s_controller_gives_a_starting_proxy_the_configured_time(service):
    """Serve's controller kills a proxy that is not ready within RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S (Ray's
    default 5 s: on two saturated cores a starting proxy was killed and `make serve` failed). The controller
    runs with serve.proxy_ready_timeout_s, and the proxy started once."""
    from optserve.serve.server import PROXY_READY_TIMEOUT_ENV

    _, settings = service
    (controller,) = _alive_actors("ServeController")
    environment = psutil.Process(controller.pid).environ()
    assert float(environment[PROXY_READY_TIMEOUT_ENV]) == settings.serve.proxy_ready_timeout_s == 60.0
    assert len(_alive_actors("ProxyActor")) == 1
    assert not _alive_actors("ProxyActor", "DEAD")  # none killed on the way up
