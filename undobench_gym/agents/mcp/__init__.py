"""Agents that act through MCP (the `mcp` extra): any program (`--agent cmd:...`), the
reference external agent (`reference.py`), and the built-in LLM agents on an MCP client
session (`--tools mcp`). `episode.McpAgent` is the harness's side of all three."""
