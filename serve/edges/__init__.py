"""The wire in front of the use cases: gRPC methods (`grpc_methods`, `grpc_services`, `grpc_edge`,
`grpc_health`, `grpc_tls`) and HTTP routes (`http_app`, `http_edge`, `openapi`), the call's deadline as the
work's budget (`call_deadline`), the token (`access`), protobuf <-> schemas (`codec`), and each operation's
counting, timing and access line (`operations`)."""
