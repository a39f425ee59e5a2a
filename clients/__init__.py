"""Clients of the service: optcc, the drop-in clang wrapper (this folder's modules), and the Python client
(python/). Everything here runs with the base install (`optserve[client]`): grpcio, protobuf and pydantic."""
