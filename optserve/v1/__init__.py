"""Generated protobuf/gRPC code for proto/optserve/v1/optserve.proto (built by `make proto`, not committed)."""
