"""Clients of the service: optcc, the drop-in clang wrapper."""
