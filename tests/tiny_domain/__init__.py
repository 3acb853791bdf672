"""Notes: a tiny domain built by the "add a domain" checklist of docs/architecture.md.

One table, one mutating route with an Idempotency-Key, two reads, one workflow with three
fault scenarios. tests/test_tiny_domain.py registers it and runs it end to end through
the real stack (service process, fault proxy, env, oracles, recovery methods).
"""
