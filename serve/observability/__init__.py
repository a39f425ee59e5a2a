"""What the service records: JSON logs and access lines (`logs`), Prometheus metrics (`metrics`) and
OpenTelemetry traces (`tracing`)."""
