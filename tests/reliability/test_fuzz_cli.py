"""Hypothesis fuzz of the ``ctxbudget`` command: argv and ingest files, in-process.

Properties, for any argv and any input file:

- the exit status is 0 or 2 (argparse's own mistakes included), never a traceback;
- a failure prints exactly one line on stderr, ``ctxbudget: error: ...``, and nothing on stdout
  (``ctxbudget`` with no command prints its usage on stdout and exits 2: the one exception);
- a failed command leaves the store exactly as it was; only a successful ingest writes.

The CLI runs on a store in a temporary folder (the working directory is moved there too, so a
relative path in a fuzzed argv never lands in the checkout), with the session's embedding model.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from ctxbudget.cli.main import main
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.store.chroma_store import ChromaStore

SETTINGS = settings(
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Cli:
    """The store the fuzzed commands run against, and how to read it back."""

    def __init__(self, folder: Path, embedder: LocalEmbedder) -> None:
        self.folder = folder
        self.store = str(folder / "store")
        self.embedder = embedder
        self.files = 0

    def run(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse: --help (0) and usage mistakes (2)
                code = exc.code if isinstance(exc.code, int) else 2
        return code, out.getvalue(), err.getvalue()

    def snapshot(self) -> tuple[int, Any, list[Any]]:
        with ChromaStore(self.store, embedder=self.embedder) as store:
            records = sorted(store.find(namespace="default"), key=lambda r: r.id)
            return store.count(), store.stats(), records

    def write(self, suffix: str, content: bytes) -> Path:
        self.files += 1
        path = self.folder / f"input-{self.files}{suffix}"
        path.write_bytes(content)
        return path


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory, embedder: LocalEmbedder) -> Iterator[Cli]:
    folder = tmp_path_factory.mktemp("fuzz-cli")
    runner = Cli(folder, embedder)
    seed = runner.write(".jsonl", b'{"session": "s1", "role": "user", "text": "I live in Porto."}')
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "ctxbudget.store.chroma_store.default_embedder", lambda: embedder
        )  # loaded once
        patch.delenv("CTXBUDGET_CHROMA_URL", raising=False)
        patch.chdir(folder)
        assert runner.run("--path", runner.store, "ingest", str(seed))[0] == 0
        yield runner


def check_outcome(code: int, out: str, err: str) -> None:
    assert code in (0, 2), (code, out, err)
    assert "Traceback" not in out + err
    if code == 0:
        return
    if not err.strip():  # no command at all: the usage, on stdout
        assert out.startswith("usage: ctxbudget"), out
        return
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("ctxbudget: error: "), err
    assert out == "", out


def check_failure_wrote_nothing(cli: Cli, code: int, before: Any) -> None:
    if code != 0:
        assert cli.snapshot() == before


# -- argv -------------------------------------------------------------------------------------

COMMANDS = ["ingest", "assemble", "explain", "stats", "eval", "locomo", "demo"]
OPTIONS = [
    "--namespace",
    "--model",
    "--session",
    "--user",
    "--collection",
    "--budget",
    "--reserve",
    "--format",
    "--system",
    "--json",
    "--budgets",
    "--question",
    "--help",
    "-h",
    "--out",
    "--conversations",
    "--questions",
    "--no-progress",
    "--keep",
]
VALUES = [
    "0",
    "-1",
    "4096",
    "1000000000000",
    "1.5",
    "nan",
    "",
    " ",
    "gpt-4o",
    "gpt4o",
    "claude-sonnet-4",
    "text",
    "compact",
    "xml",
    "s1",
    "400,x",
    "Where do I live?",
    "\udcff",
    "a\udc80b",
    "<|endoftext|>",
    "nowhere.jsonl",
]
arg_text = st.text(st.characters(exclude_characters="\x00"), max_size=12)  # no NUL in argv
tokens = st.one_of(
    st.sampled_from(COMMANDS),
    st.sampled_from(OPTIONS),
    st.sampled_from(OPTIONS),
    st.sampled_from(VALUES),
    arg_text,
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
)


def runs_the_demo(argv: list[str]) -> bool:
    # The demo builds a store from the bundled conversation (10+ s): only its mistakes are fuzzed.
    if "demo" not in argv or "-h" in argv or "--help" in argv:
        return False
    from ctxbudget.cli.main import _parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args = _parser().parse_args(argv)
    except SystemExit:
        return False
    if getattr(args, "command", None) != "demo":
        return False
    budgets = [b for b in str(args.budgets).split(",") if b.strip()]
    return (
        0 <= args.question <= 5
        and bool(budgets)
        and all(b.strip().isdigit() for b in budgets)
        and all(int(b) > 0 for b in budgets)
    )


@SETTINGS
@given(argv=st.lists(tokens, max_size=8))
def test_any_argv_exits_0_or_2_with_one_error_line(cli: Cli, argv: list[str]) -> None:
    full = ["--path", cli.store, *argv]
    assume(not runs_the_demo(full))
    before = cli.snapshot()
    code, out, err = cli.run(*full)
    event(f"exit {code}")
    check_outcome(code, out, err)
    if "ingest" not in argv or code != 0:
        assert cli.snapshot() == before  # only a successful ingest writes


@settings(SETTINGS, max_examples=60)
@given(
    command=st.sampled_from(["assemble", "explain"]),
    query=st.one_of(st.sampled_from(VALUES), arg_text),
    session=st.one_of(st.sampled_from(["s1", "s2", ""]), arg_text),
    options=st.lists(
        st.sampled_from(
            [
                ["--budget", "5"],
                ["--budget", "400"],
                ["--budget", "1000000000000"],
                ["--reserve", "100"],
                ["--format", "text"],
                ["--format", "compact"],
                ["--json"],
                ["--system", "Be brief."],
                ["--user", "u1"],
            ]
        ),
        max_size=3,
    ),
)
def test_assemble_and_explain_answer_or_fail_in_one_line(
    cli: Cli, command: str, query: str, session: str, options: list[list[str]]
) -> None:
    before = cli.snapshot()
    argv = ["--path", cli.store, command, query, "--session", session]
    code, out, err = cli.run(*argv, *(x for option in options for x in option))
    event(f"exit {code}")
    check_outcome(code, out, err)
    if code == 0 and any(option == ["--json"] for option in options):
        document = json.loads(out)  # one JSON document, nothing else on stdout
        assert document["tokens_used"] <= document["tokens_available"]
        if command == "assemble":
            assert isinstance(document["messages"], list)
    assert cli.snapshot() == before


# -- ingest files ---------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
message_like = st.fixed_dictionaries(
    {},
    optional={
        "session": st.one_of(st.sampled_from(["s1", "s2", "s3"]), json_values),
        "role": st.one_of(
            st.sampled_from(["user", "assistant", "system", "tool", "robot"]), json_values
        ),
        "text": st.one_of(st.text(max_size=60), json_values),
        "content": st.one_of(st.text(max_size=60), json_values),
        "id": st.one_of(st.text(min_size=1, max_size=6), json_values),
        "timestamp": st.one_of(
            st.floats(min_value=0, max_value=4e9),
            st.sampled_from(["2026-03-02T09:14:00Z"]),
            json_values,
        ),
        "metadata": st.one_of(
            st.dictionaries(st.text(max_size=6), json_scalars, max_size=3), json_values
        ),
        "name": json_values,
        "tool_calls": json_values,
        "tool_call_id": json_values,
        "user_id": json_values,
    },
)


@st.composite
def chat_files(draw: st.DrawFn) -> tuple[str, bytes]:
    """A .jsonl or .json chat log: message-like objects, any JSON, or broken text."""
    shape = draw(st.sampled_from(["jsonl", "list", "messages", "sessions", "any", "escapes"]))
    items = draw(st.lists(st.one_of(message_like, message_like, json_values), max_size=5))
    dump = lambda value: json.dumps(value, ensure_ascii=draw(st.booleans()))  # noqa: E731
    if shape == "jsonl":
        text = "\n".join(dump(item) for item in items)
        text += draw(st.sampled_from(["", "\n", "\r\n", "\n{", "\n\u2028\n"]))
        return ".jsonl", text.encode("utf-8", "surrogatepass")
    if shape == "escapes":  # JSON escapes of lone surrogates and NUL inside message text
        escaped = draw(st.sampled_from(["\\ud800", "\\udfff", "\\u0000", "\\ud83d\\ude00"]))
        line = '{"session": "s1", "role": "user", "text": "a' + escaped + 'b"}'
        return draw(st.sampled_from([".jsonl", ".json"])), line.encode()
    if shape == "list":
        value: Any = items
    elif shape == "messages":
        value = {"messages": items}
    elif shape == "sessions":
        value = {
            "sessions": {f"s{i}": draw(st.one_of(st.just(items), json_values)) for i in range(2)}
        }
    else:
        value = draw(json_values)
    return ".json", dump(value).encode("utf-8", "surrogatepass")


@settings(SETTINGS, max_examples=150)
@given(
    file=st.one_of(
        chat_files(),
        st.tuples(
            st.sampled_from([".jsonl", ".json", ".txt", ".md", ".csv", ""]), st.binary(max_size=300)
        ),
        st.tuples(
            st.sampled_from([".txt", ".md"]),
            st.text(max_size=400).map(lambda t: t.encode("utf-8", "surrogatepass")),
        ),
    ),
    session=st.one_of(st.none(), st.sampled_from(["fz", "s1"])),
    user=st.one_of(st.none(), st.sampled_from(["u1", "\udc80"])),
)
def test_any_ingest_file_stores_all_or_nothing(
    cli: Cli, file: tuple[str, bytes], session: str | None, user: str | None
) -> None:
    suffix, content = file
    path = cli.write(suffix, content)
    before = cli.snapshot()
    argv = ["--path", cli.store, "ingest", str(path)]
    argv += ["--session", session] if session else []
    argv += ["--user", user] if user else []
    code, out, err = cli.run(*argv)
    event(f"exit {code}")
    check_outcome(code, out, err)
    check_failure_wrote_nothing(cli, code, before)
    if code == 2:
        assert err.startswith(f"ctxbudget: error: {path}"), err  # the file is named
    else:
        assert re.match(r"stored (\d+ messages? in \d+ sessions?|\S+ as \d+ chunks?)", out), out
        assert cli.snapshot()[0] >= before[0]


def test_a_jsonl_error_names_the_line(cli: Cli) -> None:
    path = cli.write(".jsonl", b'{"session": "s1", "role": "user", "text": "ok"}\n\n{"role": \n')
    before = cli.snapshot()
    code, out, err = cli.run("--path", cli.store, "ingest", str(path))
    check_outcome(code, out, err)
    assert f"{path}:3: not valid JSON" in err
    assert cli.snapshot() == before


def test_an_unreadable_file_is_one_line(cli: Cli) -> None:
    path = cli.write(".md", b"secret")
    os.chmod(path, 0)
    before = cli.snapshot()
    try:
        if os.access(path, os.R_OK):
            # root reads anything: run the command as root without the capabilities that
            # override file permissions, in its own process (as the read-only fault tests do)
            code, out, err = run_without_dac_override("--path", cli.store, "ingest", str(path))
        else:
            code, out, err = cli.run("--path", cli.store, "ingest", str(path))
    finally:
        os.chmod(path, 0o600)
    check_outcome(code, out, err)
    assert "cannot be read" in err
    assert cli.snapshot() == before


def run_without_dac_override(*argv: str) -> tuple[int, str, str]:
    """The `ctxbudget` command in a process that file permissions apply to, even as root."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("running as root needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
    command = Path(sys.executable).with_name("ctxbudget")
    done = subprocess.run(
        [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--", str(command), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr
