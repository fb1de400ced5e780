"""Importing transcripts into stored sessions (see docs/architecture.md, "Importing").

- files.py: `import_file` parses a path, upload or bytes and stores it as a new session, or
  updates the session the same transcript made before (the same owner, format and source
  session id or file);
- store.py: a new session's rows (replay.py places its context entries over time);
- merge.py: an existing session brought up to date (new messages appended, a growing tail
  updated, new compaction points applied);
- cuts.py: where a growing JSON-lines transcript can be re-read from (the watcher);
- archive.py: compaction archives and the raw source file; rows.py: rows both paths share.
"""

from sessions_app.services.importing.files import (
    ImportReport,
    find_source_session,
    import_file,
    merge_tree,
    resolved,
    source_identity,
    update_session,
)
from sessions_app.services.importing.merge import MergeResult, merge_imported
from sessions_app.services.importing.store import store_imported

__all__ = [
    "ImportReport",
    "MergeResult",
    "find_source_session",
    "import_file",
    "merge_imported",
    "merge_tree",
    "resolved",
    "source_identity",
    "store_imported",
    "update_session",
]
