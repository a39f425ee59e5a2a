"""The Python client of a running optserve (gRPC): `OptserveClient` and `AsyncOptserveClient`
(client.py, aio.py).

    from optserve.clients.python import OptserveClient

The names load on first use, so a module that needs only the request rules (requests.py) or the retry policy
(retry.py), such as the service's edges, does not import the client's gRPC stubs.
"""

from importlib import import_module

_EXPORTS = {
    "OptserveClient": "client",
    "AsyncOptserveClient": "aio",
    "CallError": "requests",
    "RetryPolicy": "retry",
    "ChannelSettings": "channel",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
