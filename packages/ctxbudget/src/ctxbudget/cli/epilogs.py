"""The longer ``--help`` texts: the exit statuses, the ``ingest`` input schema, ``--json``."""

from __future__ import annotations

from ctxbudget.cli.status import EXIT_STATUSES

__all__ = ["ASSEMBLE_JSON", "CONTEXT_JSON", "INGEST", "MAIN", "STATS_JSON"]

MAIN = "Global options may also follow the command: ctxbudget stats --path data/mem\n\n" + (
    "exit status:\n" + "".join(f"  {code:<5}{said}\n" for code, said in EXIT_STATUSES.items())
)

INGEST = """\
input files, by extension:
  .jsonl                 one JSON object (a message) per line; blank lines are skipped
  .json                  a list of messages, {"messages": [...]}, or
                         {"sessions": {"<session id>": [messages without "session"], ...}}
  .txt .md .markdown .rst  one document: id = the file name without its extension,
                         cut into chunks, stored in --collection (default kb)

a message (a JSON object):
  role          required: "user", "assistant", "system" or "tool"
  text          the message text (a string); "content" is read when "text" is absent.
                Empty text is refused, except in a turn with tool_calls or a tool
                result with tool_call_id
  session       its session id, a string or a whole number ("session_id" is read too);
                messages without one go to --session, and with neither the file is
                refused
  id            optional; a string or a number, unique within its session
                (default, also for "": "<session>:<hex>", hex = the first 16 hex
                digits of the SHA-256 of the file's SHA-256, the session and the
                message's place in it: the same each time this file is ingested, so
                ingesting it again stores nothing twice)
  timestamp     optional; seconds since 1970-01-01 UTC, or ISO-8601 text
                ("2026-03-02T09:14:00Z"; without an offset it is UTC)
  name          optional; who spoke (a person's or a tool's name)
  user_id       optional; the user (--user, when given, is used instead)
  metadata      optional; an object of string, number or boolean values (keys not
                starting with "_" or "$"; "salience", a number >= 0, weighs retrieval)
  tool_calls    optional; a list of call ids, or of calls in OpenAI's or LangChain's form
  tool_call_id  optional; for role "tool": the call it answers
  status        optional; for role "tool": "success" (the default) or "error"
  Other fields are ignored. Messages keep the file's order within each session.

Every message is checked before a store is opened: a bad file (or one with no message)
stores nothing and leaves --path as it was, and the error names the line (.jsonl) or
the item. A key given twice in one object, or both "messages" and "sessions", is
refused. --path is a store's folder, a new or an empty one, never a folder of other
files. The same file ingested again with another --user (or none) is refused: its
ids are the ones stored for the first user, and one user's messages are never given
to another; give the copy its own session (--session) or --namespace or --path.

example (chat.jsonl):
  {"session": "s1", "role": "user", "text": "My cat is Miso.", "timestamp": "2026-03-02T09:14:00Z"}
  {"session": "s1", "id": "m2", "role": "assistant", "text": "Miso is a lovely name."}

  ctxbudget ingest chat.jsonl --user maya
"""

STATS_JSON = """\
--json prints one JSON object on stdout (keys are stable; new ones may be added):
  records      records in the store (every namespace)
  by_kind      {kind: records}, e.g. {"message": 8, "document": 1}
  sessions     sessions that hold records
  namespaces   namespaces that hold records
  embedder     the embedder the store's vectors come from
  location     the store: its folder, or the Chroma server's URL
"""

CONTEXT_JSON = """\
--json prints one JSON object on stdout (keys are stable; new ones may be added):
  session, namespace    what was assembled for
  format, counter       the output format, and the tokenizer that counted
  approximate           true when the counter only estimates
  tokens_used           tokens of the output as sent (never above tokens_available)
  tokens_available      what the output may use: window - reserve - safety
  window, reserve, safety  the budget: window is --budget + --reserve
  included              [{id, tier, tokens}] in the order sent; tokens: what the item
                        costs in its section (headers and date lines belong to no item);
                        an item of another session, a user or a document collection also
                        has record_id (its own id) and scope ([kind, name])
  pruned                [{id, tier, tokens, reason, detail}]: every other candidate, once;
                        reason: over_budget, tier_cap, duplicate, replaced_by_summary,
                        redundant_summary, orphan_tool_result, orphan_tool_call or
                        no_user_turn
  tiers                 {tier: {offered, kept, pruned, tokens}}
  solvers               {tier: {solver, value, bound}}: how each tier was packed
  truncated             ids of items shortened to fit
  estimated             ids of messages with images of unknown size (counted at most)
  warnings              what was also printed on stderr, e.g. a session with no records
  timing_ms             time spent assembling
"""

ASSEMBLE_JSON = (
    CONTEXT_JSON
    + """\
  messages, text        the output: the chat messages, and the text (null in the messages
                        format)
"""
)
