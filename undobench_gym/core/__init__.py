"""The env core: the Gymnasium env and its episodes, the oracles and fault boundaries, the
runtimes that start a stack, the catalogue, paired episodes and trial records, and the MCP
front end. It builds on the contract and the services, and knows no agent."""
