"""serve: the Ray Serve application, its gRPC and HTTP/JSON APIs, and the Python client.

A request flows one way: `ingress` (the Ray class every call enters) -> `edges` (the wire: gRPC methods and
HTTP routes, the call's deadline, the token, protobuf <-> schemas, the operation's counting and access line)
-> a use case: `optimize` (the Optimize flow, plain async code over the engine and compiler seams) ->
`replicas` (the Ray Serve deployments and the handles through which the ingress reaches them; the LoopTune
replica runs the Schedule flow) -> response.

- `app`: the application (deployments, resources, queue limits); `server`: `optserve serve`;
- `ingress`: the deployment every call enters, holding the edges and the Optimize flow;
- `schemas`: request and response models; `errors`: `ServiceError` kinds;
- `edges`: gRPC and HTTP in front of the use cases; `optimize`: the Optimize use case;
- `replicas`: the deployments, their handles, readiness and deadlines across processes;
- `observability`: logs, metrics and traces;
- `client*`: the Python client (grpcio, protobuf, pydantic only); `cli`: `optserve optimize|schedule|health`.
"""
