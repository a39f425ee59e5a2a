"""serve/edges/http_edge.py: the HTTP proxy stops reading a body while the replica has not taken what it
holds, with Ray Serve's own request queue (MessageQueue) and proxy class."""

from __future__ import annotations

import asyncio

from ray.serve._private.http_util import MessageQueue

from optserve.serve.edges import http_edge


def test_a_read_waits_while_the_queue_holds_more_than_the_bound_and_goes_on_once_drained():
    async def scenario():
        queue = MessageQueue()
        sent = [{"type": "http.request", "body": b"x" * 600, "more_body": True} for _ in range(5)]
        reads = iter(sent)

        async def client_receive():
            return next(reads)

        receive = http_edge.paced(client_receive, queue, limit=1000)
        await queue(await receive())
        await queue(await receive())  # 1,200 bytes queued: over the bound
        pending = asyncio.ensure_future(receive())
        await asyncio.sleep(0.05)
        assert not pending.done()  # the proxy does not read on from the client
        assert len(queue.get_messages_nowait()) == 2  # the replica takes them
        assert await asyncio.wait_for(pending, 1.0) is sent[2]
        queue.close()  # the request ended: a read never waits on a closed queue
        assert http_edge.queued_body_bytes(queue) == 0

    asyncio.run(scenario())


def test_install_wraps_the_proxy_once():
    from ray.serve._private.proxy import HTTPProxy

    http_edge.install()
    wrapped = HTTPProxy.proxy_asgi_receive
    http_edge.install()
    assert HTTPProxy.proxy_asgi_receive is wrapped and getattr(wrapped, http_edge._WRAPPED)


def test_the_proxys_own_503_gets_retry_after():
    """Ray Serve's proxy answers a deployment that failed to deploy 503 without Retry-After; installed, it
    says when to try again, as the ingress's 503s do; its other answers keep their headers."""
    from ray.serve._private import proxy
    from ray.serve._private.common import DeploymentID
    from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

    http_edge.install()
    failed = DeploymentUnavailableError(DeploymentID("Ingress"))
    unavailable = proxy.get_http_response_status(failed, None, "r")
    assert unavailable.code == 503 and unavailable.headers == [(b"retry-after", b"1")]
    busy = BackPressureError(num_queued_requests=5, max_queued_requests=4, retry_after_s=7)
    assert proxy.get_http_response_status(busy, None, "r").headers == [(b"retry-after", b"7")]
