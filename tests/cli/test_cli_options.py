"""The command line's options: global options on either side of the command, ``--version``,
``--json`` documents, the ``ingest`` schema in its help, the model's load line, and the warning
for a session that holds no records.

Run in-process on a real store in tmp_path with the real embedder, except the terminal test
(a subprocess whose stderr is a pseudo-terminal).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget.cli.main import main
from ctxbudget.cli.parser import GLOBAL_OPTIONS, build_parser
from ctxbudget.cli.progress import ProgressEmbedder, progress_wanted
from ctxbudget.embed.base import as_embedder
from ctxbudget.embed.onnx import OnnxEmbedder
from ctxbudget.errors import ConfigurationError
from ctxbudget.memory.context import ContextMemory
from ctxbudget.store.chroma_store import ChromaStore

QUERY = "What is my cat called?"
CHAT = [
    {"session": "s1", "id": "m1", "role": "user", "text": "My cat is named Miso."},
    {"session": "s1", "id": "m2", "role": "assistant", "text": "Miso is a lovely name."},
    {"session": "s2", "id": "m3", "role": "user", "text": "I play the cello on Sundays."},
    {"session": "s2", "id": "m4", "role": "assistant", "text": "The cello suits a Sunday."},
]
CONTEXT_KEYS = {
    "session",
    "namespace",
    "format",
    "counter",
    "approximate",
    "tokens_used",
    "tokens_available",
    "window",
    "reserve",
    "safety",
    "included",
    "pruned",
    "tiers",
    "solvers",
    "truncated",
    "estimated",
    "warnings",
    "timing_ms",
}
STATS_KEYS = {"records", "by_kind", "sessions", "namespaces", "embedder", "location"}
LOAD_LINE = re.compile(r"^ctxbudget: loading the embedding model \S+ \.\.\. done in \d+\.\d s$")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def exits(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """For what argparse ends itself (--help, --version, usage mistakes)."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    assert isinstance(exited.value.code, int)
    return exited.value.code, out, err


def one_error_line(code: int, out: str, err: str) -> str:
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ctxbudget: error: ")
    return lines[0]


def help_of(capsys: pytest.CaptureFixture[str], command: str) -> str:
    code, out, _ = exits(capsys, command, "--help")
    assert code == 0
    return out


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A store holding CHAT: sessions s1 and s2 of user u1, in the default namespace."""
    folder = str(tmp_path / "store")
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(m) + "\n" for m in CHAT), encoding="utf-8")
    code, _, err = run(capsys, "ingest", str(chat), "--user", "u1", "--path", folder)
    assert code == 0, err
    return folder


@pytest.fixture
def records(embedder: OnnxEmbedder) -> Iterator[Any]:
    """Read a store's records back: ``records(folder, session)``."""
    opened: list[ChromaStore] = []

    def read(folder: str, session: str) -> list[Any]:
        store = ChromaStore(folder, embedder=embedder)
        opened.append(store)
        found: list[Any] = store.session_messages(namespace="default", session_id=session)
        return found

    yield read
    for store in opened:
        store.close()


# -- 1. global options before or after the command -------------------------------------------

# The tail of each command, in units an option may be put between (never inside one).
COMMANDS: dict[str, list[list[str]]] = {
    "stats": [["stats"], ["--json"]],
    "ingest": [["ingest"], ["chat.jsonl"], ["--session", "s1"], ["--user", "u1"]],
    "assemble": [["assemble"], [QUERY], ["--session", "s1"], ["--budget", "300"], ["--json"]],
    "explain": [["explain"], [QUERY], ["--session", "s1"], ["--format", "text"]],
    "demo": [["demo"], ["--budgets", "400"], ["--keep"]],
    "eval": [["eval"], ["locomo"], ["data.json"], ["--questions", "3"]],
}
# Values argparse reads as values (not as options): anything that does not start with "-",
# and is not blank (--path "" and --chroma-url "" are refused: tests/cli/test_cli_input_files.py).
option_values = st.text(
    st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=12
).filter(lambda v: not v.startswith("-") and v.strip())
VALUED = [flags[0] for flags, _, spec in GLOBAL_OPTIONS if "action" not in spec]
DEFAULTS = {flags[0]: default for flags, default, _ in GLOBAL_OPTIONS}


def dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


@st.composite
def placements(draw: st.DrawFn) -> tuple[str, list[list[str]], list[tuple[list[str], int]]]:
    """A command, the global options given (each once) and where each goes.

    Place 0 is before the command; place i > 0 is after the command's i-th unit.
    """
    command = draw(st.sampled_from(sorted(COMMANDS)))
    tail = COMMANDS[command]
    given = [[flag, draw(option_values)] for flag in VALUED if draw(st.booleans())]
    progress = draw(st.sampled_from([None, "--progress", "--no-progress"]))
    if progress:
        given.append([progress])
    places = [(unit, draw(st.integers(0, len(tail)))) for unit in given]
    return command, tail, places


def argv_of(tail: list[list[str]], places: list[tuple[list[str], int]]) -> list[str]:
    argv = [x for unit, place in places if place == 0 for x in unit]
    for index, unit in enumerate(tail, start=1):
        argv += unit
        argv += [x for option, place in places if place == index for x in option]
    return argv


def expected(places: list[tuple[list[str], int]]) -> dict[str, object]:
    values: dict[str, object] = {dest(flag): default for flag, default in DEFAULTS.items()}
    for unit, _ in places:
        if unit[0] == "--progress":
            values["progress"] = True
        elif unit[0] == "--no-progress":
            values["progress"] = False
        else:
            values[dest(unit[0])] = unit[1]
    return values


@settings(max_examples=300, deadline=None)
@given(case=placements())
def test_any_placement_of_global_options_parses_the_same(
    case: tuple[str, list[list[str]], list[tuple[list[str], int]]],
) -> None:
    command, tail, places = case
    parser = build_parser()
    before = vars(parser.parse_args(argv_of(tail, [(unit, 0) for unit, _ in places])))
    anywhere = vars(parser.parse_args(argv_of(tail, places)))
    assert anywhere == before
    assert anywhere["command"] == command
    assert {key: anywhere[key] for key in expected(places)} == expected(places)


@settings(max_examples=100, deadline=None)
@given(
    command=st.sampled_from(sorted(COMMANDS)),
    flag=st.sampled_from(VALUED),
    first=option_values,
    last=option_values,
)
def test_a_global_option_after_the_command_wins(
    command: str, flag: str, first: str, last: str
) -> None:
    tail = COMMANDS[command]
    argv = argv_of(tail, [([flag, first], 0), ([flag, last], len(tail))])
    assert getattr(build_parser().parse_args(argv), dest(flag)) == last


def test_stats_with_the_path_after_the_command(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    documents = []
    for argv in (["--path", store, "stats", "--json"], ["stats", "--path", store, "--json"]):
        code, out, err = run(capsys, *argv)
        assert (code, err) == (0, "")
        documents.append(json.loads(out))
    assert documents[0] == documents[1]
    assert documents[0]["records"] == 4
    # after the command wins: the store before it is not opened, nor created
    elsewhere = Path(store).parent / "elsewhere"
    code, out, _ = run(capsys, "--path", str(elsewhere), "stats", "--path", store, "--json")
    assert (code, json.loads(out)["records"]) == (0, 4)
    assert not elsewhere.exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["stats", "--path"], "stats: argument --path: expected one argument"),
        (["stats", "--model"], "stats: argument --model: expected one argument"),
        (
            ["assemble", QUERY, "--session", "s1", "--namespace"],
            "assemble: argument --namespace: expected one argument",
        ),
        (["stats", "--progress=yes"], "ignored explicit argument 'yes'"),
        (["eval", "locomo", "x.json", "--chroma-url"], "argument --chroma-url: expected one"),
    ],
)
def test_a_global_option_mistake_after_the_command_is_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    line = one_error_line(*exits(capsys, *argv))
    assert needle in line
    assert line.endswith("--help)")


@pytest.mark.parametrize("where", ["before", "after"])
def test_an_unknown_model_after_or_before_the_command_is_one_line(
    capsys: pytest.CaptureFixture[str], store: str, where: str
) -> None:
    model = ["--model", "no-such-model"]
    argv = [*model, "stats"] if where == "before" else ["stats", *model]
    line = one_error_line(*run(capsys, "--path", store, *argv))
    assert "unknown model 'no-such-model'" in line


# -- 2. --version ------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--version"], ["stats", "--version"], ["eval", "--version"]])
def test_version_prints_the_installed_versions(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = exits(capsys, *argv)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"ctxbudget {metadata.version('ctxbudget')}"
    assert f"langchain-ctxbudget {metadata.version('langchain-ctxbudget')}" in lines
    assert f"llama-index-ctxbudget {metadata.version('llama-index-ctxbudget')}" in lines
    assert lines[-1].startswith("with python ")


# -- 3. --json -------------------------------------------------------------------------------


def test_stats_json_and_text(capsys: pytest.CaptureFixture[str], store: str) -> None:
    code, out, err = run(capsys, "stats", "--json", "--path", store)
    assert (code, err) == (0, "")
    document = json.loads(out)  # the whole of stdout is one document
    assert set(document) == STATS_KEYS
    assert document["by_kind"] == {"message": 4}
    assert document["sessions"] == 2
    for key in STATS_KEYS:  # each key is documented in the command's help
        assert re.search(rf"^  {key}\b", help_of(capsys, "stats"), re.M), key

    code, out, _ = run(capsys, "stats", "--path", store)
    assert code == 0
    assert re.search(r"^records\s+4 \(message 4\)$", out, re.M)
    assert re.search(r"^sessions\s+2$", out, re.M)


@pytest.mark.parametrize("command", ["assemble", "explain"])
def test_assemble_and_explain_json(
    capsys: pytest.CaptureFixture[str], store: str, command: str
) -> None:
    # A budget that keeps the newest exchange and cuts older turns.
    argv = [command, QUERY, "--session", "s1", "--budget", "40", "--json", "--path", store]
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, "")
    document = json.loads(out)
    keys = CONTEXT_KEYS | ({"messages", "text"} if command == "assemble" else set())
    assert set(document) == keys
    assert (document["session"], document["namespace"]) == ("s1", "default")
    assert document["tokens_used"] <= document["tokens_available"] == 40
    included = {entry["id"]: entry for entry in document["included"]}
    assert included["ctxbudget:query"]["tier"] == "QUERY"
    refs = {"record_id", "scope"}  # only for items of another session, a user or a collection
    assert all(set(entry) - refs == {"id", "tier", "tokens"} for entry in document["included"])
    assert all(entry["tokens"] > 0 for entry in document["included"])
    assert sum(entry["tokens"] for entry in document["included"]) <= document["tokens_used"]
    pruned = {entry["id"]: entry for entry in document["pruned"]}
    assert pruned, "the budget was meant to cut something"
    assert all(
        set(e) - refs == {"id", "tier", "tokens", "reason", "detail"} for e in pruned.values()
    )
    assert {e["reason"] for e in pruned.values()} <= {
        "over_budget",
        "tier_cap",
        "duplicate",
        "replaced_by_summary",
        "redundant_summary",
        "orphan_tool_result",
        "orphan_tool_call",
        "no_user_turn",
    }
    assert not set(included) & set(pruned)  # a partition
    assert set(included) | set(pruned) >= {"m1", "m2"}
    assert document["warnings"] == []
    if command == "assemble":
        assert document["messages"][-1] == {"role": "user", "content": QUERY}
    epilog = help_of(capsys, command)
    for key in keys:  # each key is documented in the command's help
        assert re.search(rf"^  (\w+, )*{key}\b", epilog, re.M), key


def test_assemble_json_in_a_text_format_has_the_text(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    argv = ["assemble", QUERY, "--session", "s1", "--format", "compact", "--json"]
    code, out, _ = run(capsys, *argv, "--path", store)
    assert code == 0
    document = json.loads(out)
    assert document["format"] == "compact"
    assert document["text"].rstrip("\n").endswith(QUERY)
    assert "My cat is named Miso." in document["text"]


# -- 4. the ingest schema in --help ----------------------------------------------------------


def test_the_ingest_help_example_works_as_documented(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    records: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = help_of(capsys, "ingest")
    for field in ("role", "text", "content", "session", "session_id", "id", "timestamp"):
        assert re.search(rf'\b{field}\b|"{field}"', text), field
    for field in ("name", "user_id", "metadata", "tool_calls", "tool_call_id"):
        assert re.search(rf"^  {field}\s", text, re.M), field
    example = text[text.index("example (chat.jsonl):") :]
    lines = [line.strip() for line in example.splitlines() if line.startswith("  {")]
    command = next(line.split() for line in example.splitlines() if "ctxbudget ingest" in line)
    assert len(lines) == 2
    (tmp_path / "chat.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    folder = str(tmp_path / "store")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "--path", folder, *command[1:])
    assert code == 0, err
    assert out == "stored 2 messages in 1 session from chat.jsonl\n"
    stored = records(folder, "s1")
    assert [(r.role, r.user_id) for r in stored] == [("user", "maya"), ("assistant", "maya")]
    assert stored[0].timestamp == 1772442840.0  # 2026-03-02T09:14:00Z
    assert stored[1].id == "m2"


@pytest.mark.parametrize(
    ("messages", "flags", "check"),
    [
        pytest.param(  # "content" when "text" is absent; "session_id" read too
            [{"session_id": "s7", "role": "user", "content": "From content."}],
            [],
            lambda r: r[0].text == "From content.",
            id="content-and-session_id",
        ),
        pytest.param(  # no offset: UTC
            [{"session": "s7", "role": "user", "text": "x", "timestamp": "2026-03-02T09:14:00"}],
            [],
            lambda r: r[0].timestamp == 1772442840.0,
            id="timestamp-without-offset-is-utc",
        ),
        pytest.param(  # --user is used instead of a message's user_id
            [{"session": "s7", "role": "user", "text": "x", "user_id": "ann"}],
            ["--user", "maya"],
            lambda r: r[0].user_id == "maya",
            id="user-flag-wins",
        ),
        pytest.param(
            [{"session": "s7", "role": "user", "text": "x", "user_id": "ann", "other": 1}],
            [],
            lambda r: r[0].user_id == "ann",
            id="user_id-and-other-fields-ignored",
        ),
        pytest.param(  # empty text in a turn with tool calls, then its result
            [
                {"session": "s7", "role": "user", "text": "Weather?"},
                {"session": "s7", "role": "assistant", "text": "", "tool_calls": ["c1"]},
                {"session": "s7", "role": "tool", "text": "", "tool_call_id": "c1"},
            ],
            [],
            lambda r: [m.role for m in r] == ["user", "assistant", "tool"],
            id="empty-text-with-tool-calls",
        ),
        pytest.param(  # no session in the file: --session
            [{"role": "user", "text": "x", "id": 12}],
            ["--session", "s7"],
            lambda r: r[0].id == "12",
            id="session-flag-and-numeric-id",
        ),
    ],
)
def test_the_ingest_schema_is_what_ingest_does(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    records: Any,
    messages: list[dict[str, Any]],
    flags: list[str],
    check: Any,
) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    folder = str(tmp_path / "store")
    code, _, err = run(capsys, "ingest", str(path), *flags, "--path", folder)
    assert code == 0, err
    assert check(records(folder, "s7"))


# -- 5. the embedding model's load line -------------------------------------------------------


def test_progress_is_wanted_on_a_terminal_or_when_asked() -> None:
    leader, follower = os.openpty()
    try:
        with open(follower, "w", closefd=False) as terminal:
            assert progress_wanted(None, terminal) is True
            assert progress_wanted(False, terminal) is False
    finally:
        os.close(leader)
        os.close(follower)
    assert progress_wanted(None, io.StringIO()) is False
    assert progress_wanted(True, io.StringIO()) is True


@pytest.mark.parametrize("command", ["assemble", "explain"])
def test_progress_says_when_the_model_loads_on_stderr_only(
    capsys: pytest.CaptureFixture[str], store: str, command: str
) -> None:
    argv = [command, QUERY, "--session", "s1", "--json", "--path", store]
    code, out, err = run(capsys, *argv, "--progress")
    assert code == 0
    json.loads(out)  # stdout is still the one document
    assert LOAD_LINE.match(err), err
    assert len(err.splitlines()) == 1
    for quiet in (["--no-progress"], []):  # asked not to; or stderr is not a terminal
        code, out, err = run(capsys, *argv, *quiet)
        assert (code, err) == (0, "")
    # one given after the command wins over one before
    code, _, err = run(capsys, "--progress", *argv, "--no-progress")
    assert (code, err) == (0, "")


def test_progress_on_ingest_comes_before_the_import_bar(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(m) + "\n" for m in CHAT), encoding="utf-8")
    code, out, err = run(capsys, "--path", str(tmp_path / "s"), "ingest", str(chat), "--progress")
    assert code == 0
    assert out == "stored 4 messages in 2 sessions from chat.jsonl\n"
    first, rest = err.split("\n", 1)
    assert LOAD_LINE.match(first), err
    assert "storing messages" in rest  # the bar --progress asks for, after the load


def test_a_failed_load_ends_its_line() -> None:
    def broken(texts: list[str]) -> list[list[float]]:
        msg = "the model file is missing"
        raise ConfigurationError(msg)

    stream = io.StringIO()
    embedder = ProgressEmbedder(as_embedder(broken, name="broken"), stream)
    with pytest.raises(ConfigurationError):
        embedder.embed_query("hi")
    assert stream.getvalue() == "ctxbudget: loading the embedding model broken ... failed\n"


@pytest.mark.slow
@pytest.mark.parametrize(("flags", "shown"), [([], True), (["--no-progress"], False)])
def test_the_load_line_on_a_terminal(store: str, flags: list[str], shown: bool) -> None:
    leader, follower = os.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ctxbudget.cli", "--path", store, "explain", QUERY]
            + ["--session", "s1", "--json", *flags],
            stderr=follower,
            stdout=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
        os.close(follower)
        err = b""
        while chunk := _read(leader):
            err += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0
    json.loads(done.stdout)
    lines = err.decode().splitlines()
    assert (len(lines) == 1 and LOAD_LINE.match(lines[0]) is not None) is shown, lines
    assert shown or lines == []


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # EIO: the other end is closed
        return b""


# -- 6. a session that holds no records -------------------------------------------------------


@pytest.mark.parametrize("command", ["assemble", "explain"])
def test_an_unknown_session_warns_and_still_answers(
    capsys: pytest.CaptureFixture[str], store: str, command: str
) -> None:
    code, out, err = run(capsys, "--path", store, command, QUERY, "--session", "s9")
    assert code == 0
    assert out.strip()  # the result, as for any session
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ctxbudget: warning: session 's9' holds no records")
    assert "namespace 'default'" in lines[0]
    assert "'s1', 's2'" in lines[0]
    code, out, err = run(capsys, "--path", store, command, QUERY, "--session", "s9", "--json")
    assert code == 0
    assert json.loads(out)["warnings"] == [lines[0].removeprefix("ctxbudget: warning: ")]
    assert err.splitlines() == lines
    code, _, err = run(capsys, "--path", store, command, QUERY, "--session", "s1")
    assert (code, err) == (0, "")


def test_the_warning_names_a_few_sessions_and_the_namespace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = str(tmp_path / "store")
    memory = ContextMemory(path=folder, namespace="team", write_behind=False)
    try:
        for n in range(8):
            memory.add_message(f"t{n}", "user", f"Note {n}.")
        memory.pin("pins-only", "The office is on the 3rd floor.")
    finally:
        memory.close()
    argv = ["assemble", QUERY, "--path", folder]
    code, _, err = run(capsys, *argv, "--session", "t\n9", "--namespace", "team")
    assert code == 0
    (line,) = err.splitlines()  # a session id's line break is escaped
    assert "session 't\\n9' holds no records" in line
    assert "namespace 'team'" in line
    assert "'pins-only', 't0', 't1', 't2', 't3' and 4 more" in line
    code, _, err = run(capsys, *argv, "--session", "pins-only", "--namespace", "team")
    assert (code, err) == (0, "")  # pinned facts are records
    code, _, err = run(capsys, *argv, "--session", "t1")  # the default namespace: none
    assert code == 0
    assert "namespace 'default'" in err
    assert "holds no sessions; check --namespace" in err


def test_a_failing_command_with_an_unknown_session_prints_only_its_error(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    system = "You are a careful assistant. " * 20
    argv = ["assemble", QUERY, "--session", "s9", "--budget", "5", "--system", system]
    line = one_error_line(*run(capsys, "--path", store, *argv))
    assert "only 5 are available" in line
