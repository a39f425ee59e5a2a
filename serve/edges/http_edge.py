"""What Ray Serve's HTTP proxy leaves out, added in the proxy itself: flow control of request bodies, and
`Retry-After` on its own 503 answers.

Ray Serve 2.60's HTTP proxy reads a request's body from the socket as fast as the client sends it, into a
queue the replica drains (`HTTPProxy.proxy_asgi_receive`), with no bound: a chunked POST of hundreds of MB (no
Content-Length to refuse it by) filled the proxy's memory before the ingress, which counts the bytes it reads
(serve/edges/http_app.py), could answer 413. `install` paces that reading: while the queue holds more than
MAX_QUEUED_BODY_BYTES of body, the proxy stops reading (the client's sends then wait, as TCP does), so the
proxy holds at most about that much per request, and the ingress's 413 comes before the client has sent much
more than the limit. The proxy's own 503 (a deployment that is unavailable) gets `Retry-After`, as the
ingress's 503s do (serve/edges/http_app.py). Installed from the gRPC servicer functions Serve calls in the
proxy (serve/edges/grpc_services.py), as serve/edges/grpc_edge.py is. Ray internals: where the proxy has no
such method (another Ray), it serves as before and says so in its log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from optserve.serve.errors import RETRY_AFTER_S

log = logging.getLogger(__name__)

# Body bytes the proxy holds for one request before it stops reading from the client (a module constant,
# not a setting of optserve/config.py): the replica drains the queue continuously, so a valid body flows.
MAX_QUEUED_BODY_BYTES = 4 * 2**20
_PACE_S = 0.005  # how often a paused read looks again whether the replica drained the queue
_WRAPPED = "_optserve_paced"


def queued_body_bytes(queue) -> int:
    """Body bytes of the http.request messages waiting in a proxy request's `MessageQueue`."""
    messages = getattr(queue, "_message_queue", ())
    return sum(len(m.get("body", b"")) for m in messages if m.get("type") == "http.request")


def paced(receive, queue, limit: int = MAX_QUEUED_BODY_BYTES):
    """`receive` that waits while `queue` holds more than `limit` body bytes (or until it is closed)."""

    async def paced_receive():
        while queued_body_bytes(queue) > limit and not getattr(queue, "_closed", True):
            await asyncio.sleep(_PACE_S)
        return await receive()

    return paced_receive


def with_retry_after(status):
    """A proxy's `ResponseStatus` of a 503 with `Retry-After` (RETRY_AFTER_S) unless it has headers."""
    if status.code != 503 or status.headers:
        return status
    return dataclasses.replace(status, headers=[(b"retry-after", str(RETRY_AFTER_S).encode())])


def install() -> None:
    """Pace the HTTP proxy's body reading and give its 503s `Retry-After` (once per process)."""
    try:
        from ray.serve._private import proxy
        from ray.serve._private.proxy import HTTPProxy
    except ImportError:
        log.warning("Ray Serve has no HTTPProxy: request bodies are read without flow control")
        return
    status_of = getattr(proxy, "get_http_response_status", None)
    if status_of is not None and not getattr(status_of, _WRAPPED, False):

        def get_http_response_status(*args, **kwargs):
            return with_retry_after(status_of(*args, **kwargs))

        setattr(get_http_response_status, _WRAPPED, True)
        proxy.get_http_response_status = get_http_response_status
    original = getattr(HTTPProxy, "proxy_asgi_receive", None)
    if original is None:
        log.warning("Ray Serve's HTTP proxy has no proxy_asgi_receive: bodies are read without flow control")
        return
    if getattr(original, _WRAPPED, False):
        return

    async def proxy_asgi_receive(self, receive, queue):
        return await original(self, paced(receive, queue), queue)

    setattr(proxy_asgi_receive, _WRAPPED, True)
    HTTPProxy.proxy_asgi_receive = proxy_asgi_receive
