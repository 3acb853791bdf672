"""Reliability and security checks of the harness itself: see docs/reliability.md."""
