"""serve: the Ray Serve application, its gRPC and HTTP/JSON APIs, and the Python client.

A request flows one way: the ingress (`ingress`, the Ray class: a face) -> `grpc_methods` or the HTTP routes
on `http_app` -> `operations` (counting, timing, access lines) -> the Optimize flow (`optimize`, plain async
code over the engine and compiler seams) or the Schedule flow (`schedule_flow`) -> the back-end deployments
(`deployments`, reached through `handles`; `ray_errors` says what a failure there means) -> response.

- `app`: the application (deployments, resources, queue limits); `server`: `optserve serve`;
- `schemas`: request and response models; `codec`: protobuf <-> schemas; `errors`: `ServiceError` kinds;
- `readiness`: per-part readiness (HTTP `/v2/health/ready`, gRPC health); `openapi`: the exact contract;
- `engine_host`: one model behind the engine deployment; `unit_lists`, `result_cache`: Optimize's helpers;
- `access`, `grpc_tls`, `loopback`: who may call; `logs`, `metrics`: what is recorded;
- `client*`: the Python client (grpcio, protobuf, pydantic only); `cli`: `optserve optimize|schedule|health`.
"""
