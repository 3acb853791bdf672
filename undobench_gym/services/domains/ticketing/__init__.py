"""Ticketing: incidents, on-call escalation policies, paging and stakeholder notices."""
