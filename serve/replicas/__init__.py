"""The Ray Serve deployments behind the ingress (`deployments`: the engine replica hosts its model there, the
LoopTune replica runs the Schedule flow), the handles through which the ingress reaches them and what a
failure there means (`handles`), per-part readiness (`readiness`) and the loopback rule for who may call
without TLS (`loopback`)."""
