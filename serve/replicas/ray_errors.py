"""What a failure behind a deployment handle means to the caller, decided here and only here.

Ray hands an exception that a deployment raised to the caller wrapped in a `RayTaskError`; `call` unwraps it,
so the layers above see the deployment's own error (a `ServiceError`, `PromptTooLongError`, ...). Ray's own
failures (overload, a replica gone) become the `ServiceError` they stand for in `as_service_error`.
"""

from __future__ import annotations

import logging
from typing import Any

from ray.exceptions import RayActorError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from ray.serve.handle import DeploymentHandle

from optserve.serve.errors import ErrorKind, ServiceError

log = logging.getLogger(__name__)


async def call(handle: DeploymentHandle, method: str, *args: Any) -> Any:
    """`handle.method.remote(*args)`'s answer; the deployment's own exception if it raised one."""
    try:
        return await getattr(handle, method).remote(*args)
    except RayTaskError as err:
        cause = err.cause
        while isinstance(cause, RayTaskError):  # raised by a deployment that called another one
            cause = cause.cause
        if not isinstance(cause, BaseException):
            raise
        raise cause from None


def as_service_error(err: BaseException) -> ServiceError:
    """A ServiceError from any layer as it is; Ray's failures as what they mean; anything else INTERNAL."""
    if isinstance(err, ServiceError):
        return err
    if isinstance(err, BackPressureError):
        return ServiceError(ErrorKind.RESOURCE_EXHAUSTED, f"the service is at capacity, retry later ({err})")
    if isinstance(err, DeploymentUnavailableError | RayActorError):
        return ServiceError(ErrorKind.UNAVAILABLE, f"a backend is unavailable, retry later ({err})")
    log.exception("internal error", exc_info=err)
    return ServiceError(ErrorKind.INTERNAL, f"internal error: {type(err).__name__}: {err}")
