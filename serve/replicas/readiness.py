"""Whether each part of the service can work now: "ready", or why not (HTTP `/v2/health/ready`, gRPC health).

Each deployment is judged by Ray Serve's health checks of its replicas (`check_health`: a dead engine, a
compiler pool that lost its workers) rather than by a call, which would wait behind a long LoopTune search;
the model also by its metadata, which says why it is not ready (not loaded, died).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ray import serve

from optserve.serve.replicas.deployments import CompilerWorkers, LoopTuneScheduler, PassOrderingEngine
from optserve.serve.replicas.handles import EngineClient, as_service_error

READY = "ready"
_READY_DEPLOYMENT_STATES = {"HEALTHY", "UPSCALING", "DOWNSCALING"}


async def deployment_statuses(app_name: str) -> Mapping[str, Any]:
    """Ray Serve's status of each deployment of the application (`.status`, `.message`)."""
    status = await asyncio.to_thread(serve.status)
    application = status.applications.get(app_name)
    return application.deployments if application is not None else {}


def deployment_state(deployments: Mapping[str, Any], name: str) -> str:
    """READY, or why the deployment `name` is not."""
    if name not in deployments:
        return f"deployment {name} is missing"
    deployment = deployments[name]
    if deployment.status in _READY_DEPLOYMENT_STATES:
        return READY
    return f"deployment {name} is {deployment.status}: {deployment.message}".rstrip(": ")


async def readiness(deployments: Mapping[str, Any], engine: EngineClient) -> dict[str, str]:
    """Per part (model, compiler, looptune): READY, or why not."""
    model_state = deployment_state(deployments, PassOrderingEngine.name)
    if model_state == READY:
        try:
            model = await engine.metadata(fresh=True)
            model_state = READY if model.ready else model.reason
        except Exception as err:
            model_state = as_service_error(err).message
    if model_state != READY:
        engine.forget()
    return {
        "model": model_state,
        "compiler": deployment_state(deployments, CompilerWorkers.name),
        "looptune": deployment_state(deployments, LoopTuneScheduler.name),
    }
