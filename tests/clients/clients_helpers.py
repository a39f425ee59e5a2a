"""Constants the client tests share (a module of its own: test files cannot import conftest reliably)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path

PROGRAM = Path(__file__).resolve().parent.parent / "data" / "clients" / "wordstat"
# The serve tests' ports (OPTSERVE_TEST_HTTP_PORT / OPTSERVE_TEST_GRPC_PORT) + 10100: a worktree's own ports
# keep its client tests from reaching another run's service (28100/29100 by default).
HTTP_PORT = int(os.environ.get("OPTSERVE_TEST_HTTP_PORT", "18000")) + 10100
GRPC_PORT = int(os.environ.get("OPTSERVE_TEST_GRPC_PORT", "19000")) + 10100


@contextlib.contextmanager
def fake_optimize_service(optimize, workers: int = 2, host: str = "127.0.0.1", model: str | None = None):
    """host:port of a gRPC server whose PassOrdering/Optimize is `optimize(request, context)` (a test's
    stand-in service: a failure or a delay the real one does not give on demand), listening on `host`;
    with `model`, GetModelMetadata names that model (ready, version "1"), as optcc's object cache asks."""
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    from optserve.v1 import optserve_pb2 as pb

    method = grpc.unary_unary_rpc_method_handler(
        optimize, pb.OptimizeRequest.FromString, pb.OptimizeResponse.SerializeToString
    )
    methods = {"Optimize": method}
    if model is not None:
        methods["GetModelMetadata"] = grpc.unary_unary_rpc_method_handler(
            lambda request, context: pb.ModelMetadata(name=model, version="1", ready=True),
            pb.ModelMetadataRequest.FromString,
            pb.ModelMetadata.SerializeToString,
        )
    server = grpc.server(ThreadPoolExecutor(max_workers=workers))
    handlers = grpc.method_handlers_generic_handler("optserve.v1.PassOrdering", methods)
    server.add_generic_rpc_handlers([handlers])
    port = server.add_insecure_port(f"{host}:0")
    server.start()
    try:
        yield f"{host}:{port}"
    finally:
        server.stop(None)


class CountingProxy:
    """A TCP relay to the real service that counts the connections optcc opens (each optcc process opens its
    own channel, so 0 connections in a build means no service call); `refuse` closes them unanswered."""

    def __init__(self, target: str):
        host, port = target.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.target = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.refuse = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.connections += 1
            if self.refuse:
                client.close()
                continue
            upstream = socket.create_connection(self.upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()
