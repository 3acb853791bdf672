"""Metrics, statistics and reports over trial records."""
