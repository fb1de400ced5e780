"""ctxweb's MCP server (issue 28): the model reads back its own stored history.

`asgi.py` mounts it at `/mcp` (streamable HTTP, API-key bearer auth), `server.py` declares
the tools, `tools.py` answers them through selectors and services, `transcript.py` renders
stored messages as text. A face like the API and the views: it builds no query of its own.
"""
