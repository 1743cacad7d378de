"""The errors ctxbudget raises.

One root, specific leaves; each leaf also subclasses the builtin a caller would catch::

    CtxBudgetError                      (Exception)
    ├── ConfigurationError              (ValueError)   an option or argument that cannot be used
    │   ├── ConfigurationTypeError      (TypeError)    ... because it has the wrong type
    │   └── InvalidBudgetError                         a budget that cannot be met by anything
    │       └── WindowDetectionError    (ConnectionError) a model server could not tell its window
    ├── BudgetExceededError             (ValueError)   never-pruned items alone do not fit
    ├── InvalidItemError                (ValueError)   a malformed ContextItem or message
    ├── InvalidValueError               (ValueError)   a keyed value, namespace or query refused
    ├── UnknownModelError               (KeyError)     a model the registry does not know
    ├── TokenizerUnavailableError       (RuntimeError) an encoding or tokenizer cannot be loaded
    ├── MissingDependencyError          (ImportError)  an optional extra is not installed
    ├── SessionOwnerError               (PermissionError) a door continuing another user's session
    └── StoreError                      (RuntimeError) the memory store failed or refused input
        ├── StoreInputError             (ValueError)   bad input for the store; nothing was written
        └── MemoryClosedError                          a call of a closed memory or store

Messages say what was wrong, the numbers involved and what to do. A value from outside (a
number, a model name, a server's reply, a command line) that cannot be used is a
`ConfigurationError` (its budget and window leaves included): see `ctxbudget.core.numbers` and
docs/reliability.md, "Boundaries".
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "ConfigurationError",
    "ConfigurationTypeError",
    "CtxBudgetError",
    "InvalidBudgetError",
    "InvalidItemError",
    "InvalidValueError",
    "MemoryClosedError",
    "MissingDependencyError",
    "SessionOwnerError",
    "StoreError",
    "StoreInputError",
    "TokenizerUnavailableError",
    "UnknownModelError",
    "WindowDetectionError",
]


class CtxBudgetError(Exception):
    """Root of every error raised by ctxbudget."""


class BudgetExceededError(CtxBudgetError, ValueError):
    """The items that may never be pruned (system, current query, ``shrink="never"``) do not fit.

    Attributes:
        required: tokens the never-pruned items need, as rendered.
        available: tokens the budget allows.
    """

    def __init__(self, message: str, *, required: int, available: int) -> None:
        super().__init__(message)
        self.required = required
        self.available = available


class InvalidItemError(CtxBudgetError, ValueError):
    """A context item or chat message that cannot be used as given."""


class InvalidValueError(CtxBudgetError, ValueError):
    """A keyed value (`ContextMemory.put_value`), its namespace, key or search that is refused.

    Nothing was written. The message names the namespace, key and path at fault and what to do.
    """


class UnknownModelError(CtxBudgetError, KeyError):
    """A model name the registry does not know."""

    def __str__(self) -> str:
        # KeyError quotes its argument; show the message as written.
        return str(self.args[0]) if self.args else ""


class TokenizerUnavailableError(CtxBudgetError, RuntimeError):
    """An encoding or tokenizer that cannot be loaded here."""


class MissingDependencyError(CtxBudgetError, ImportError):
    """An optional dependency is not installed; the message names the extra to install.

    Attributes:
        extra: the extra that brings it (``"memory"``, ``"torch"``...), or None.
    """

    def __init__(self, message: str, *, extra: str | None = None) -> None:
        super().__init__(message)
        self.extra = extra


class ConfigurationError(CtxBudgetError, ValueError):
    """An option or constructor argument that cannot be used as given.

    For example a negative limit, two options that exclude each other, or a prompt without its
    placeholder.
    """


class ConfigurationTypeError(ConfigurationError, TypeError):
    """An option or argument of the wrong type (a string where a list is expected)."""


class InvalidBudgetError(ConfigurationError):
    """A budget that no content could meet: zero, negative, or a reserve larger than the window.

    A `ConfigurationError` (and so a ``ValueError``): a budget is an option of the call.
    """


class WindowDetectionError(InvalidBudgetError, ConnectionError):
    """A local model server could not tell the window it serves a model with.

    Unreachable, not serving the model, or answering something unexpected; the message names
    the URL, what failed and what to do (start the server, or pass ``window=``). An
    `InvalidBudgetError` too: without the window there is no budget (a caller that handled
    Ollama's refusal without ``num_ctx`` handles this as well).

    Attributes:
        url: the server asked (its root, e.g. ``"http://127.0.0.1:11434"``).
    """

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class SessionOwnerError(CtxBudgetError, PermissionError):
    """A call for one user to continue a session another user started; nothing was done.

    Raised by the doors that serve users (MCP, the LangChain middleware, the LlamaIndex
    memory), never by `ContextMemory` itself, which still takes several users in one session
    (a group chat). The message names the session, its owner and what to do (give each user
    their own session or thread id). Also raised when a call with a user would change (delete,
    edit, unpin in) a session started without a user, which may hold other users' messages
    (``owner`` is then "").

    Attributes:
        session_id: the session.
        owner: the user who started it ("": it was started without a user).
        user_id: the user of the refused call.
    """

    def __init__(self, message: str, *, session_id: str, owner: str, user_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.owner = owner
        self.user_id = user_id


class StoreError(CtxBudgetError, RuntimeError):
    """The memory store failed; the message says whether anything was written."""


class StoreInputError(StoreError, ValueError):
    """Input the store cannot keep; nothing was written."""


class MemoryClosedError(StoreError):
    """A call of a `ContextMemory` or `ChromaStore` after its ``close()``; nothing was done.

    Every public method of a closed memory or store raises it (sync and async alike), and so do
    the adapters over a closed memory. Closing again is a no-op. The data stays where it was:
    open a new memory (or store) on the same folder or server to use it.
    """
