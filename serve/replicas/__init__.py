"""The Ray Serve deployments behind the ingress (`deployments`), the handles through which the ingress
reaches them (`handles`; `ray_errors` says what a failure there means), the model behind the engine
deployment (`engine_host`), the Schedule flow the LoopTune replica runs (`looptune`), per-part readiness
(`readiness`), deadlines across processes (`deadlines`) and the loopback rule for who may call without TLS
(`loopback`)."""
