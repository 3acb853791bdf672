"""Shared machinery for domain services: storage, commit log, idempotency, admin API."""
