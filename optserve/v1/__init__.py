"""Generated protobuf/gRPC code for proto/optserve/v1/optserve.proto (`make proto`; not committed)."""
