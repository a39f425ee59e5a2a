"""The Ray Serve deployments behind the ingress (`deployments`: the engine replica hosts its model there),
the handles through which the ingress reaches them and what a failure there means (`handles`), the Schedule
flow the LoopTune replica runs (`looptune`), per-part readiness (`readiness`) and the loopback rule for who
may call without TLS (`loopback`)."""
