"""The MCP front end: the env's tools served over the Model Context Protocol with the
official SDK (`pip install 'undobench-gym[mcp]'`), episode control kept for the harness.

`tools` converts schemas and observations, `server` builds the SDK server and its
transports, `host` puts one env behind it, `bridge` lets a harness loop drive an agent
that acts through MCP, `control` is the harness's local endpoint (docs/mcp.md), and
`sdk` holds what differs between the SDK's 2.x line (Python 3.12+) and its 1.x line
(Python 3.11).
"""
