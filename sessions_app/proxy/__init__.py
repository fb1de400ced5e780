"""The transparent proxy: Anthropic Messages and OpenAI Chat Completions, stored and compacted.

An agent points its base URL at `/proxy/anthropic` or `/proxy/openai/v1`; each request is
recorded as a session, compacted before it overflows, and forwarded upstream; the answer
streams back unchanged. See README ("Point an agent at the proxy").
"""
