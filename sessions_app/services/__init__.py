"""The web app's service layer: every change to a stored session goes through here.

Views, the REST API, tasks, importers and commands call these functions; they load rows,
turn them into engine messages, call `compaction` and write the result back in one
transaction. One concept per module: sessions, context, policies, session_compaction
(compacting a stored session), writeback (committing an engine result), archives (the one
owner of the archive format), reverting, offloading, auto (the pre- and post-call checks),
cooldown and jobs (background runs and their django-tasks task).

They return value types (frozen dataclasses) and raise the service error tree of
`errors.py` (the engine's own errors are translated at this boundary); the REST API and
the views map it.
"""
