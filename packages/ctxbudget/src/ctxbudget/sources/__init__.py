"""Sources of items that live on disk: files and folder trees for coding assistants.

Reading files is I/O, so it lives here, not in the pure `ctxbudget.core`. Each function turns
what it reads into `ContextItem`s of tier ``Tier.FILES`` (just below the query, above pinned
facts), rendered in a ``Files`` section under each file's path; pass them to
`ContextAssembler.assemble` with the other items, or to ``ContextMemory.assemble(extra=...)``.

- `file_item`, `file_items`, `folder_items` (`ctxbudget.sources.files`): file contents, cut at
  line boundaries when they do not fit whole;
- `folder_tree_item` (`ctxbudget.sources.tree`): a folder's tree, like ``tree``;
- `GitIgnore` (`ctxbudget.sources.gitignore`): which paths ``.gitignore`` files ignore.
"""

from __future__ import annotations

from ctxbudget.sources.files import FileItems, file_item, file_items, folder_items
from ctxbudget.sources.gitignore import DEFAULT_IGNORE, GitIgnore
from ctxbudget.sources.reading import DEFAULT_MAX_BYTES, SkippedFile, SkipReason
from ctxbudget.sources.tree import folder_tree_item

__all__ = [
    "DEFAULT_IGNORE",
    "DEFAULT_MAX_BYTES",
    "FileItems",
    "GitIgnore",
    "SkipReason",
    "SkippedFile",
    "file_item",
    "file_items",
    "folder_items",
    "folder_tree_item",
]
