"""The judge: the trusted process of verify and profile (`python -m cuda_agent_mcp.judge`, one job at a
time), and its handles on the untrusted workers it starts (forked, on a socket, in a container). Never
imports candidate or worker code; speaks to workers only through `wire/`."""
