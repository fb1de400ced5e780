"""Reads: every query the views, view models and API routers need, one module per concept.

Views and routers only translate HTTP; they ask these functions for rows and never build a
query themselves. A selector scoped to an owner raises `services.errors.NotFound` for a
missing or foreign object (the API and the views map it to 404), and `InvalidCursor` (an
`InvalidInput` naming the field `cursor`) for a cursor this app did not issue.

- `cursors`: the one opaque keyset cursor codec;
- `sessions`: the caller's sessions, the one search rule, sorts and pages of the list;
- `profiles`: compaction profiles;
- `history`: messages of the full history (pages, ranges, windows of the history tree);
- `entries`: entries of the runtime context;
- `compactions`: compactions, pages of them and the session's compaction tree;
- `jobs`: background compaction jobs;
- `files`: offloaded tool results.

The compaction markers' tree itself is pure arrangement, sessions_app/compaction_tree.py.
"""
