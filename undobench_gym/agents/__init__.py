"""Agents (scripted, LLM) and recovery methods (Gymnasium wrappers)."""
