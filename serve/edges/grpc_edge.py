"""What Ray Serve's gRPC proxy leaves out, added in the proxy itself: the call's deadline and retry info.

Ray Serve 2.60's proxy passes the replica a copy of the call's context without the deadline, and answers its
own refusals (backpressure: the ingress's queue full) RESOURCE_EXHAUSTED with no trailing metadata. The
proxy makes each method's handler with its server's `service_handler_factory`; `install` wraps that factory
from the servicer functions Serve calls in the proxy (serve/edges/grpc_services.py), so that each unary call
- reaches the ingress with its deadline in the metadata (`DEADLINE_KEY`, as Unix time: absolute, so that
  time queued between proxy and replica counts against it; one a caller sent is dropped; the ingress reads it
  back, serve/edges/grpc_methods.py `call_deadline`), and
- answered RESOURCE_EXHAUSTED or UNAVAILABLE without `grpc-retry-pushback-ms`, gets it (RETRY_AFTER_S, as
  the ingress's own refusals and HTTP's Retry-After).
Ray internals, as serve/replicas/loopback.py's hook: without the factory (another Ray), the proxy serves as
before and says so in its log.
"""

from __future__ import annotations

import logging

import grpc

from optserve.clients.python.retry import PUSHBACK_KEY
from optserve.deadline import NO_DEADLINE_S, Deadline
from optserve.serve.errors import RETRY_AFTER_S

log = logging.getLogger(__name__)

DEADLINE_KEY = "optserve-deadline"  # invocation metadata: the call's deadline, Unix time in seconds
_WRAPPED = "_optserve_edge"
# Answers that say "try again later": the proxy's own refusals (its queue full, no replica) get retry info.
_RETRY_LATER_CODES = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE)


def install(server) -> None:
    """Wrap `server.service_handler_factory` (once) so that unary calls go through `_EdgeContext`."""
    factory = getattr(server, "service_handler_factory", None)
    if factory is None:
        log.warning("Ray Serve's gRPC proxy has no service_handler_factory: no deadline, no retry info")
        return
    if getattr(factory, _WRAPPED, False):
        return

    def edge_factory(service_method: str, streaming_type):
        handler = factory(service_method=service_method, streaming_type=streaming_type)
        if getattr(streaming_type, "name", None) != "UNARY_UNARY":
            return handler

        async def unary_unary(request, context):
            edge = _EdgeContext(context)
            response = await handler(request, edge)
            edge.add_retry_info()
            return response

        return unary_unary

    setattr(edge_factory, _WRAPPED, True)
    server.service_handler_factory = edge_factory


class _EdgeContext:
    """The call's context as the proxy sees it: its metadata with the deadline, its trailing metadata kept."""

    def __init__(self, context):
        self._context = context
        self._trailing: tuple = ()

    def __getattr__(self, name: str):
        return getattr(self._context, name)

    def invocation_metadata(self):
        metadata = [(k, v) for k, v in self._context.invocation_metadata() or () if k != DEADLINE_KEY]
        remaining = self._context.time_remaining()
        if remaining is not None and remaining < NO_DEADLINE_S:
            metadata.append((DEADLINE_KEY, f"{Deadline.after(remaining).wall():.6f}"))
        return tuple(metadata)

    def set_trailing_metadata(self, trailing_metadata) -> None:
        self._trailing = tuple(trailing_metadata)
        self._context.set_trailing_metadata(trailing_metadata)

    def add_retry_info(self) -> None:
        if self._context.code() not in _RETRY_LATER_CODES:
            return
        if any(key == PUSHBACK_KEY for key, _ in self._trailing):
            return
        self.set_trailing_metadata((*self._trailing, (PUSHBACK_KEY, str(RETRY_AFTER_S * 1000))))
