"""The wire in front of the use cases: gRPC methods (`grpc_methods`, `grpc_services`, `grpc_edge`,
`grpc_health`, `grpc_tls`; the call's deadline, added in the proxy by `grpc_edge`, is the work's budget in
`grpc_methods`) and HTTP routes (`http_app`, `http_edge`, `openapi`), the token (`access`), protobuf <->
schemas (`codec`), and each operation's counting, timing and access line (`operations`)."""
