"""The web app's service layer: every change to a stored session goes through here.

Views, the REST API, tasks, importers and commands call these functions; they load rows,
turn them into engine messages, call `compaction` and write the result back in one
transaction. One sub-package per concept (docs/architecture.md#layers): `sessions/` (a
session and its own numbers), `context/` (what the model sees now), `compacting/`
(compacting a stored session and undoing it), `proxying/` (the proxy's writes),
`background/` (jobs and their upkeep) and `importing/` (imports and the watcher).

They return value types (frozen dataclasses) and raise the service error tree of
`errors.py` (the engine's own errors are translated at this boundary); the REST API and
the views map it.
"""
