"""The web app's service layer: every change to a stored session goes through here.

Views, the REST API, tasks, importers and commands call these functions; they load rows,
turn them into engine messages, call `compaction` and write the result back in one
transaction. One concept per module: sessions, context, policies, compacting, offloading,
auto (the pre- and post-call checks) and jobs.
"""
