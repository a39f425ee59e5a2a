"""Run optserve on a local multi-node Ray cluster and report where replicas landed (a script, so its Ray
cluster lives in its own process next to the test session's Ray instance).

    python tests/serve/serve_cluster_run.py MODEL_DIR  ->  JSON on the last line of stdout
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HTTP_PORT, GRPC_PORT = 18200, 19200


def main(model_dir: Path) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from optserve.clients.python.client import OptserveClient
    from optserve.serve import server
    from optserve.testing.service import DATA, TOKEN, service_settings

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        settings = service_settings(
            model_dir, http_port=HTTP_PORT, grpc_port=GRPC_PORT, compiler_replicas=2, engine_replicas=2,
            max_replicas_per_node=1, ray_address=cluster.address,
        )  # fmt: skip
        settings = settings.model_copy(
            update={"compiler": settings.compiler.model_copy(update={"workers": 1})}
        )
        endpoints = server.start(settings, proxy_location="HeadOnly")
        with OptserveClient(endpoints.grpc_target, token=TOKEN) as client:
            answers = [
                client.optimize((DATA / name).read_text(), bypass_cache=True)
                for name in ("add.ll", "sum.ll", "unrolled_loop.ll")
            ]
            schedule = client.schedule(
                "C[m,n] += A[m,k] * B[k,n]", {"m": 16, "k": 16, "n": 16}, method="base"
            )
        replica_nodes: dict[str, list[str]] = {}
        for actor in ray._private.state.actors().values():
            name = actor.get("ActorClassName", "")
            if actor.get("State") == "ALIVE" and name.startswith("ServeReplica:optserve:"):
                deployment = name.rsplit(":", 1)[1]
                replica_nodes.setdefault(deployment, []).append(actor["Address"]["NodeID"])
        return {
            "nodes": len([n for n in ray.nodes() if n["Alive"]]),
            "replica_nodes": replica_nodes,
            "oz_costs": [a.oz_cost for a in answers],
            "best_not_worse": all(a.best.cost <= a.oz_cost for a in answers),
            "schedule_gflops": schedule.gflops,
        }
    finally:
        server.stop()
        cluster.shutdown()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    print(json.dumps(main(Path(sys.argv[1]))))
