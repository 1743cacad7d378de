"""``ctxbudget eval locomo``: the loader's quirk handling, the baselines and a run on real data.

The LoCoMo data (CC BY-NC 4.0) is never copied into the repository: the end-to-end test reads
it from ../shared relative to the repository root and is skipped when it is not there. The
loader is tested on small synthetic samples written here.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxbudget import ContextAssembler, ContextItem, Tier
from ctxbudget.cli.main import main
from ctxbudget.core.ids import internal_id
from ctxbudget.embed.local import LocalEmbedder
from ctxbudget.errors import ConfigurationError
from ctxbudget.eval import (
    SPEAKER_FORMS,
    DatasetError,
    EvalRun,
    answer_in,
    compare_summary,
    load_locomo,
    normalize_answer,
    parse_locomo,
    run_locomo,
    split_evidence,
)
from ctxbudget.eval.baselines import recency_window, top_k
from ctxbudget.eval.forms import (
    entity_settings,
    speaker_forms,
    turn_item,
    turn_line,
    turn_message,
)
from ctxbudget.memory.context import ContextMemory
from ctxbudget.memory.policy.config import MemoryConfig
from ctxbudget.memory.policy.scoring import Scoring
from ctxbudget.memory.reading.lexical import LexicalIndex, lexical_terms
from ctxbudget.memory.reading.speakers import speaker_of
from ctxbudget.store.chroma_store import ChromaStore

ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def turn(dia_id: str, speaker: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def sample(**overrides: Any) -> dict[str, Any]:
    """A small LoCoMo-shaped sample carrying every known quirk of the real data."""
    conversation: dict[str, Any] = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            turn("D1:1", "Ana", "I adopted a beagle called Biscuit."),
            turn("D1:2", "Ben", "Lovely! Send a photo.", blip_caption="a beagle on a sofa"),
            turn("D1:3", "Ana", "We walk by the river every morning."),
            turn("D1:4", "Ben", "Which river?"),
            turn("D1:5", "Ana", "The Douro, near Porto."),
        ],
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [],  # a session without turns
        "session_10_date_time": "9:00 am on 2 June, 2023",
        "session_10": [
            turn("D10:1", "Ben", "I started pottery classes."),
            turn("D10:2", "Ana", "   "),  # no text
            turn("D10:1", "Ana", "A repeated id."),
            {"speaker": "Ana", "text": "No id."},
            turn("D10:3", "Ana", "What do you make?"),
        ],
        "session_11_date_time": "not a date",
        "session_11": [turn("D11:1", "Ben", "Bowls, mostly.")],
        "session_12_date_time": "4:00 pm on 3 July, 2023",  # a date without a session
    }
    qa = [
        {
            "question": "What breed is Biscuit?",
            "answer": "beagle",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "Where do they walk and by which river?",
            "answer": "The Douro",
            "evidence": ["D1:3; D1:5"],
            "category": 1,
        },
        {"question": "What did Ben start?", "answer": 2023, "evidence": ["D:10:1"], "category": 2},
        {
            "question": "What does Ben make?",
            "answer": "bowls",
            "evidence": ["D", "D11:01"],
            "category": 4,
        },
        {"question": "Who is Carl?", "evidence": ["D9:9"], "category": 3},
        {
            "question": "What is Ana's cat called?",
            "adversarial_answer": "Tom",
            "evidence": ["D1:1"],
            "category": 5,
        },
        {"question": "No evidence at all?", "answer": "none", "evidence": [], "category": 3},
    ]
    return {"sample_id": "conv-x", "conversation": conversation, "qa": qa, **overrides}


# -- the loader ------------------------------------------------------------------------------


def test_split_evidence_packed_repaired_and_malformed() -> None:
    assert split_evidence("D1:3; D1:5") == (["D1:3", "D1:5"], [], [])
    assert split_evidence("D9:1 D4:4,D4:6") == (["D9:1", "D4:4", "D4:6"], [], [])
    assert split_evidence("D:11:26") == (["D11:26"], ["D:11:26"], [])
    assert split_evidence("D30:05") == (["D30:5"], ["D30:05"], [])
    assert split_evidence("D") == ([], [], ["D"])
    assert split_evidence("D2:7; nonsense") == (["D2:7"], [], ["nonsense"])


def test_loader_copes_with_every_quirk_and_says_what_it_did() -> None:
    data = parse_locomo([sample()])

    (conv,) = data.conversations
    assert conv.sample_id == "conv-x"
    assert conv.speakers == ("Ana", "Ben")
    # Sessions in numeric order (10 after 1), bad turns skipped, the caption kept as text.
    assert [t.dia_id for t in conv.turns] == [
        "D1:1", "D1:2", "D1:3", "D1:4", "D1:5", "D10:1", "D10:3", "D11:1",
    ]  # fmt: skip
    assert conv.turns[1].text == "Lovely! Send a photo. [shares a beagle on a sofa]"
    assert conv.turns[0].timestamp == 1683554160.0  # 2023-05-08 13:56 UTC
    assert conv.turns[-1].timestamp is None  # its session date is unreadable
    assert conv.turns[5].session == 10

    questions = {q.index: q for q in conv.questions}
    assert sorted(questions) == [0, 1, 2, 3, 5]  # 4: dangling only; 6: no evidence
    assert questions[1].evidence == ("D1:3", "D1:5")  # packed ids split
    assert questions[2].evidence == ("D10:1",)  # "D:10:1" repaired
    assert questions[2].answer == "2023"  # numbers become text
    assert questions[3].evidence == ("D11:1",)  # "D" dropped, "D11:01" repaired
    assert questions[5].adversarial and questions[5].answer is None
    assert not questions[0].adversarial

    notes = [str(n) for n in data.notes]
    assert data.counts() == {"skipped": 7, "repaired": 3, "split": 1, "dropped": 2}
    expected = [
        "conv-x: skipped session_12: a date but no turns (no session)",
        "conv-x: skipped session_2: sessions without turns",
        "conv-x session_10[1]: skipped the turn D10:2: no text",
        "conv-x session_10[2]: skipped the turn: dia_id D10:1 appears twice",
        "conv-x session_10[3]: skipped the turn: no usable dia_id (None)",
        "conv-x: repaired session_11: unreadable date 'not a date'; turns carry no time",
        "conv-x qa#1: split evidence 'D1:3; D1:5' into ['D1:3', 'D1:5']",
        "conv-x qa#2: repaired evidence id 'D:10:1' as D10:1",
        "conv-x qa#3: dropped evidence id 'D': malformed",
        "conv-x qa#3: repaired evidence id 'D11:01' as D11:1",
        "conv-x qa#4: dropped evidence id D9:9: no such turn",
        "conv-x qa#4: skipped the question: no usable evidence",
        "conv-x qa#6: skipped the question: no usable evidence",
    ]
    for line in expected:
        assert line in notes, line


def test_loader_skips_unusable_samples_and_refuses_unusable_files(tmp_path: Path) -> None:
    data = parse_locomo([sample(), {"sample_id": "broken"}, "junk", sample(qa="nope")])
    assert [c.sample_id for c in data.conversations] == ["conv-x", "conv-x#3"]
    assert data.conversations[1].questions == ()
    notes = [str(n) for n in data.notes]
    assert "broken: skipped the sample: it has no 'conversation' object" in notes
    assert "sample 2: skipped the sample: it has no 'conversation' object" in notes
    assert "conv-x#3: skipped every question: 'qa' is not a list" in notes

    with pytest.raises(DatasetError, match="expected a JSON list of LoCoMo samples, got dict"):
        parse_locomo({"sample_id": "x"})
    with pytest.raises(DatasetError, match="no sample has a usable conversation"):
        parse_locomo([{"sample_id": "empty", "conversation": {"session_1": []}}])
    with pytest.raises(DatasetError, match="no such file"):
        load_locomo(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('[{"sample_id": "x",\n oops}]', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"bad\.json:2: not valid JSON"):
        load_locomo(bad)


def test_answer_normalization_and_containment() -> None:
    assert normalize_answer("The Lord of the Rings!") == "lord of rings"
    assert answer_in("7 May 2023", "Ana|we met on 7 May, 2023 at noon") is True
    assert answer_in("May", "Ana|we met in Mayfair") is False  # whole words only
    assert answer_in(None, "anything") is None
    assert answer_in("...", "anything") is None


# -- the baselines ---------------------------------------------------------------------------


def chat(n: int) -> list[ContextItem]:
    return [
        ContextItem(
            f"m{i}",
            f"Turn {i} talks about topic number {i} at some length to cost tokens.",
            tier=Tier.RECENT,
            role="user" if i % 2 == 0 else "assistant",
            name="Ana" if i % 2 == 0 else "Ben",
            timestamp=1.7e9 + 86_400 * (i // 10),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("fmt", ["messages", "text", "compact"])
def test_recency_window_keeps_the_newest_turns_that_fit(fmt: str) -> None:
    turns = chat(200)
    assembler = ContextAssembler(min_exchanges=0)
    ctx = recency_window(turns, "What came last?", budget=600, assembler=assembler, format=fmt)  # type: ignore[arg-type]
    kept = [i for i in ctx.included_ids if i != "query"]
    assert ctx.tokens_used <= 600
    assert 5 < len(kept) < 200
    assert kept == [t.id for t in turns[-len(kept) :]]  # a contiguous newest window


@pytest.mark.parametrize("fmt", ["messages", "text", "compact"])
def test_top_k_is_the_longest_prefix_of_the_ranking_that_fits(fmt: str) -> None:
    turns = chat(120)
    ranked = turns[::3] + turns[1::3] + turns[2::3]  # any order: the ranking to follow
    assembler = ContextAssembler(min_exchanges=0)
    question = "Which topics came up?"
    for budget in (300, 900, 2500):
        ctx = top_k(ranked, question, budget=budget, assembler=assembler, format=fmt)  # type: ignore[arg-type]
        kept = [i for i in ctx.included_ids if i != "query"]
        n = len(kept)
        assert ctx.tokens_used <= budget
        assert set(kept) == {t.id for t in ranked[:n]}
        assert ctx.included_ids[-1] == "query"
        if n == len(ranked):
            continue
        longer = assembler.assemble(
            [
                *(dataclasses.replace(t, tier=Tier.RETRIEVED) for t in ranked[: n + 1]),
                ContextItem("query", question, tier=Tier.QUERY),
            ],
            budget=10**6,
            format=fmt,  # type: ignore[arg-type]
        )
        assert longer.tokens_used > budget  # one more would not fit


# -- the command -----------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_eval_help_lists_locomo(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["eval", "locomo", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ctxbudget eval locomo")
    for flag in (
        "--budgets",
        "--model",
        "--out",
        "--conversations",
        "--questions",
        "--speakers",
        "--excerpts",
    ):
        assert flag in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--budgets", "1024,lots"], "--budgets: budgets must be an int"),
        (["--budgets", "0"], "--budgets: budgets must be positive, got 0"),
        (["--conversations", "0"], "--conversations must be a positive number"),
        (["--questions", "-3"], "--questions must be a positive number"),
        (["--model", "no-such-model"], "no-such-model"),
    ],
)
def test_eval_usage_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], needle: str
) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample()]), encoding="utf-8")
    code, out, err = run_cli(capsys, "eval", "locomo", str(data), "--out", str(tmp_path), *argv)
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    assert err.startswith("ctxbudget: error: ") and err.count("\n") == 1
    assert needle in err


def test_eval_reports_an_unreadable_file_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere.json"
    code, out, err = run_cli(capsys, "eval", "locomo", str(missing), "--out", str(tmp_path / "o"))
    assert (code, out) == (2, "")
    hint = "pass the path of locomo10.json (or a subset of it)"
    assert err == f"ctxbudget: error: {missing}: no such file; {hint}\n"
    not_list = tmp_path / "dict.json"
    not_list.write_text("{}", encoding="utf-8")
    code, _, err = run_cli(capsys, "eval", "locomo", str(not_list), "--out", str(tmp_path / "o"))
    assert code == 2
    assert "expected a JSON list of LoCoMo samples" in err and "Traceback" not in err


# -- how the speakers are stored (--speakers) and entity memory (--entities) -----------------


def test_speaker_forms_and_entity_settings_read_what_the_options_accept() -> None:
    assert speaker_forms("name") == ("name",)
    assert speaker_forms("all") == SPEAKER_FORMS == ("name", "prefix", "role")
    assert speaker_forms("role, prefix") == ("prefix", "role")  # report order, not given order
    assert speaker_forms("prefix,all") == SPEAKER_FORMS
    for bad in ("", "names", "name,nobody", ","):
        with pytest.raises(ConfigurationError, match="speakers must be one of name, prefix"):
            speaker_forms(bad)
    assert [entity_settings(v) for v in ("off", "on", "both")] == [(False,), (True,), (False, True)]
    with pytest.raises(ConfigurationError, match="entities must be one of off, on, both"):
        entity_settings("yes")


def test_each_form_stores_the_same_turns_and_only_the_speaker_moves() -> None:
    conversation = parse_locomo([sample()]).conversations[0]
    for turn in conversation.turns:
        name, prefix, role = (turn_message(turn, conversation, f) for f in SPEAKER_FORMS)
        assert name["name"] == turn.speaker and name["text"] == turn.text
        assert prefix["text"] == f"{turn.speaker}: {turn.text}" and "name" not in prefix
        assert role["text"] == turn.text and "name" not in role
        for message in (name, prefix, role):
            assert message["id"] == turn.dia_id and message["timestamp"] == turn.timestamp
            assert message["role"] == ("user" if turn.speaker == "Ana" else "assistant")
        # What ContextMemory reads back as the speaker is the same in the first two forms.
        assert speaker_of(name) == speaker_of(prefix) == turn.speaker
        assert speaker_of(role) is None
        items = [turn_item(turn, conversation, f) for f in SPEAKER_FORMS]
        assert [i.name for i in items] == [turn.speaker, None, None]
        assert [turn_line(turn, f) for f in SPEAKER_FORMS] == [
            f"{turn.speaker}: {turn.text}",
            f"{turn.speaker}: {turn.text}",
            turn.text,
        ]
    with pytest.raises(ConfigurationError, match="speakers must be one of"):
        turn_message(conversation.turns[0], conversation, "both")
    with pytest.raises(ConfigurationError, match="speakers must be one of"):
        run_locomo(parse_locomo([sample()]), speakers="prefixed", embedder=object())


def test_eval_help_lists_the_speaker_and_entity_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["eval", "locomo", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--speakers {name,prefix,role,all}" in out and "--entities {off,on,both}" in out
    assert "'comparison'" in out and "'variants'" in out  # the several-runs file is described


def test_eval_refuses_an_unknown_speakers_form_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample()]), encoding="utf-8")
    argv = ["eval", "locomo", str(data), "--out", str(tmp_path / "o"), "--speakers", "names"]
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert err == (
        "ctxbudget: error: --speakers must be one of name, prefix, role, all (or a "
        "comma-separated list of forms), got 'names'\n"
    )
    assert not (tmp_path / "o").exists()  # refused before any work


def small_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, *options: str
) -> tuple[str, dict[str, Any], str]:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample()]), encoding="utf-8")
    out_dir = tmp_path / "results"
    argv = ["eval", "locomo", str(data), "--out", str(out_dir), "--budgets", "200,600"]
    code, out, err = run_cli(capsys, *argv, "--no-progress", *options)
    assert code == 0, err
    table = (out_dir / "locomo.md").read_text(encoding="utf-8")
    assert table in out
    assert (out_dir / "locomo_recall.png").read_bytes().startswith(PNG_MAGIC)
    return table, json.loads((out_dir / "locomo.json").read_text(encoding="utf-8")), out


def test_one_form_writes_the_single_run_files_as_before(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table, data, _ = small_run(capsys, tmp_path, "--speakers", "prefix")
    assert data["benchmark"] == "locomo" and data["speakers"] == "prefix"
    assert {"headline", "adversarial", "by_category", "outcomes", "settings"} <= data.keys()
    assert data["settings"]["entities"] is False
    assert "speakers as a 'Name: ' prefix" in table.splitlines()[0]
    assert "comparison" not in data


def _variants(data: dict[str, Any], labels: list[str], setting: str) -> dict[str, Any]:
    """The comparison of a run of several variants, checked: the runs are ``labels`` in order,
    in the file and in its comparison, and each has ``setting`` on exactly when its label says
    so."""
    comparison: dict[str, Any] = data["comparison"]
    assert [v["label"] for v in data["variants"]] == labels
    assert [v["label"] for v in comparison["variants"]] == labels
    for variant in data["variants"]:
        assert variant["settings"][setting] is variant["label"].endswith(f"{setting} on")
    return comparison


def test_several_runs_are_reported_side_by_side_with_the_gap_per_budget(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table, data, _ = small_run(capsys, tmp_path, "--speakers", "all", "--entities", "both")
    labels = [
        "speakers in name",
        "speakers in name, entities on",
        "speakers as a Name: prefix",
        "speakers as a Name: prefix, entities on",
        "role only (no speaker)",
        "role only (no speaker), entities on",
    ]
    comparison = _variants(data, labels, "entities")
    assert comparison["reference"] == "speakers in name" and comparison["budgets"] == [200, 600]
    for variant in data["variants"]:  # each shaped as a single run's file
        assert variant["budgets"] == [200, 600] and "outcomes" in variant
    recall = comparison["recall"]
    for label in labels[1:]:
        for budget in ("200", "600"):
            wanted = recall[label][budget] - recall["speakers in name"][budget]
            assert comparison["gap"][label][budget] == pytest.approx(wanted)
            assert f"{wanted:+.3f}" in table
        largest = max(abs(v) for v in comparison["gap"][label].values())
        assert comparison["largest_gap"][label] == pytest.approx(largest)
    headline = {v["label"]: v["headline"]["ctxbudget"] for v in data["variants"]}
    for label in labels:
        assert [recall[label][b] for b in ("200", "600")] == [
            headline[label][b]["recall"] for b in ("200", "600")
        ]
        assert f"| {label} |" in table and f"## {label}" in table
    assert "| gap: speakers as a Name: prefix - speakers in name |" in table
    assert "### Evidence recall by category (ContextMemory)" in table
    assert set(comparison["baselines"]) == {labels[0], labels[2], labels[4]}


def test_excerpts_off_and_on_are_two_runs_and_the_baselines_run_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table, data, _ = small_run(capsys, tmp_path, "--excerpts", "both", "--entities", "both")
    labels = [
        "speakers in name",
        "speakers in name, excerpts on",
        "speakers in name, entities on",
        "speakers in name, entities on, excerpts on",
    ]
    comparison = _variants(data, labels, "excerpts")
    assert [v["excerpts"] for v in comparison["variants"]] == [False, True, False, True]
    assert set(comparison["baselines"]) == {labels[0]}
    assert "## speakers in name, excerpts on" in table
    own = table.split("## speakers in name, excerpts on")[1]
    assert "counted for gpt-4o, excerpts on." in own
    assert "| ctxbudget (ContextMemory, excerpts on) |" in own


def test_an_unknown_excerpts_choice_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["eval", "locomo", str(tmp_path / "x.json"), "--excerpts", "yes"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "--excerpts" in err and "'yes'" in err


def test_compare_refuses_runs_that_measured_different_things(tmp_path: Path) -> None:
    run = EvalRun((), (1024,), "gpt-4o", "compact", ("conv-x",), 10, (), {})
    other = dataclasses.replace(run, budgets=(2048,), speakers="prefix")
    with pytest.raises(ConfigurationError, match="must share budgets"):
        compare_summary([run, other])
    with pytest.raises(ConfigurationError, match="at least one"):
        compare_summary([])


# -- a real run on a subset ------------------------------------------------------------------

BUDGETS = (1024, 2048, 4096, 8192)


@pytest.mark.slow
@pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo data not found at {LOCOMO}")
def test_eval_locomo_on_a_subset_writes_consistent_results(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "results"
    code, out, err = run_cli(
        capsys,
        "eval",
        "locomo",
        str(LOCOMO),
        "--conversations",
        "1",
        "--questions",
        "20",
        "--out",
        str(out_dir),
    )
    assert code == 0, err
    assert "Traceback" not in err
    assert re.search(r"conv-26: +100%.*20/20", err)  # the progress bar ran to the end

    table = (out_dir / "locomo.md").read_text(encoding="utf-8")
    data = json.loads((out_dir / "locomo.json").read_text(encoding="utf-8"))
    png = (out_dir / "locomo_recall.png").read_bytes()
    assert table in out  # the table is printed too
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000

    assert data["conversations"] == ["conv-26"]
    assert data["budgets"] == list(BUDGETS)
    assert data["model"] == "gpt-4o" and data["format"] == "compact"
    counted = data["questions"]["headline"] + data["questions"]["adversarial"]
    assert counted == 20
    assert data["loader"]["counts"] == {"skipped": 3, "split": 1}  # conv-26's quirks only

    columns = data["outcomes"]["columns"]
    rows = [dict(zip(columns, row, strict=True)) for row in data["outcomes"]["rows"]]
    assert len(rows) == 20 * len(BUDGETS) * 3
    assert all(r["tokens"] <= r["budget"] and 0.0 <= r["recall"] <= 1.0 for r in rows)
    assert all(r["fitted"] for r in rows)

    for method in ("ctxbudget", "top-k", "recency"):
        for budget in BUDGETS:
            mine = [
                r["recall"]
                for r in rows
                if r["method"] == method and r["budget"] == budget and r["category"] != 5
            ]
            figure = data["headline"][method][str(budget)]
            assert figure["n"] == len(mine)
            assert figure["recall"] == pytest.approx(sum(mine) / len(mine))
            assert f"{figure['recall']:.3f}" in table

    for budget in map(str, BUDGETS):
        ours = data["headline"]["ctxbudget"][budget]["recall"]
        assert ours >= data["headline"]["recency"][budget]["recall"]
    recalls = [data["headline"]["ctxbudget"][str(b)]["recall"] for b in BUDGETS]
    assert recalls == sorted(recalls)  # a bigger budget never finds less on average


# -- the retrieval the evaluation measures (ctxbudget.memory.reading.lexical, ContextMemory) --


def test_lexical_index_stems_and_prefers_rare_terms() -> None:
    index = LexicalIndex()
    texts = [
        "We painted the fence together.",
        "The weather was nice today.",
        "The weather was nice again.",
        "She paints sunsets on weekends.",
    ]
    for text in texts:
        index.add(text)
    assert lexical_terms("Paintings, painted, paints") == ["paint", "paint", "paint"]
    scores = index.scores(lexical_terms("Who painted sunsets?"))
    assert set(scores) == {0, 3}  # stems match; nothing else does
    assert scores[3] > scores[0]  # two terms beat one
    weather = index.scores(lexical_terms("weather fence"))
    assert weather[0] > weather[1]  # the rare term outweighs the common one


def test_in_context_lends_relevance_to_neighbours_within_an_episode() -> None:
    scoring = Scoring(neighbour_weight=0.5, episode_weight=0.0)
    match = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    episodes = [0, 0, 0, 0, 1, 1]
    out = scoring.in_context(match, episodes, neighbours=2)
    assert out.tolist() == [0.25, 0.5, 1.0, 0.5, 0.0, 0.0]  # 1/d, never across episodes
    boosted = Scoring(neighbour_weight=0.0, episode_weight=0.3).in_context(
        match, episodes, neighbours=2
    )
    assert boosted[:4].tolist() == pytest.approx([0.1, 0.1, 1.1, 0.1])  # mean of the best 3
    assert boosted[4:].tolist() == [0.0, 0.0]


def test_author_prior_applies_only_when_the_query_names_some_authors() -> None:
    scoring = Scoring(author_weight=0.2)
    authors = ["Ana", "Ben", None, "Ana"]
    assert scoring.author_prior(authors, {"Ana"}).tolist() == [1.0, 0.8, 1.0, 1.0]
    assert scoring.author_prior(authors, set()).tolist() == [1.0] * 4
    assert scoring.author_prior(authors, {"Ana", "Ben"}).tolist() == [1.0] * 4


def test_memory_config_rejects_impossible_shares() -> None:
    with pytest.raises(ValueError, match="recent_share"):
        MemoryConfig(recent_share=(0.5, 0.2))
    with pytest.raises(ValueError, match="query_turn_weight"):
        MemoryConfig(query_turn_weight=1.5)
    with pytest.raises(ValueError, match="author_weight"):
        Scoring(author_weight=2.0)


DAY = 86_400.0
OLD = [
    ("user", "Ana", "Guess what, we finally bought a sailing boat!"),
    ("assistant", "Ben", "No way! What did you name your new boat?"),
    ("user", "Ana", "Sea Breeze, after my grandmother's cottage."),
    ("assistant", "Ben", "That is a lovely name."),
]
SMALL_TALK = [
    "The bakery on the corner sells good croissants.",
    "I tried their almond croissant this morning.",
    "Was it better than the chocolate one?",
    "Much better, and still warm from the oven.",
]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


def long_memory(tmp_path: Path, embedder: LocalEmbedder) -> ContextMemory:
    """A year of chat: the boat early on, then weeks of small talk, bakery talk last."""
    memory = ContextMemory(store=ChromaStore(tmp_path / "store", embedder=embedder))
    messages: list[dict[str, Any]] = []
    start = 1.68e9
    for i, (role, name, text) in enumerate(OLD):
        messages.append({"id": f"old{i}", "role": role, "name": name, "text": text})
        messages[-1]["timestamp"] = start + i
    for week in range(40):
        for i in range(4):
            role, name = ("user", "Ana") if i % 2 == 0 else ("assistant", "Ben")
            text = f"Week {week}: chat {i} about errands, the weather and the {week}th movie."
            when = start + (week + 1) * 7 * DAY + i
            messages.append({"id": f"w{week}-{i}", "role": role, "name": name, "text": text})
            messages[-1]["timestamp"] = when
    for i, text in enumerate(SMALL_TALK):
        role, name = ("user", "Ana") if i % 2 == 0 else ("assistant", "Ben")
        when = start + 300 * DAY + i
        messages.append({"id": f"new{i}", "role": role, "name": name, "text": text})
        messages[-1]["timestamp"] = when
    memory.add_messages("s", messages, progress=False)
    return memory


def test_history_share_follows_the_query(tmp_path: Path, embedder: LocalEmbedder) -> None:
    memory = long_memory(tmp_path, embedder)
    budget = 1024
    past = memory.assemble("s", "What is the name of Ana's boat?", budget=budget, format="compact")
    recent = memory.assemble(
        "s", "Which croissant did Ana like better?", budget=budget, format="compact"
    )
    assert past.tokens_used <= budget and recent.tokens_used <= budget
    # A question about the distant past leaves recent history a small share of the budget...
    history = past.tiers[Tier.RECENT].tokens if Tier.RECENT in past.tiers else 0
    assert history < 0.15 * budget
    assert {"old1", "old2"} <= set(past.included_ids)
    # ...one about what was just said gives it more, and the thread is there.
    assert recent.tiers[Tier.RECENT].tokens > history
    assert {"new0", "new1", "new2", "new3"} <= set(recent.included_ids)
    # With a tight budget (about 13 of 168 turns fit) the answer, which shares no word with
    # the question, still comes with the question it answers.
    tight = memory.assemble("s", "What is the name of Ana's boat?", budget=256)
    assert {"old1", "old2"} <= set(tight.included_ids)
    memory.close()


def test_the_lexical_index_follows_new_messages_and_deletions(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    memory = long_memory(tmp_path, embedder)
    question = "What is the Wi-Fi password of the cabin?"
    before = memory.assemble("s", question, budget=512)
    assert "pw" not in before.included_ids
    memory.add_messages(
        "s",
        [{"id": "pw", "role": "user", "text": "The cabin Wi-Fi password is tangerine42."}]
        + [{"role": "assistant", "text": f"Filler answer {i} about nothing."} for i in range(45)],
        progress=False,
    )
    after = memory.assemble("s", question, budget=512)
    assert "pw" in after.included_ids  # outside the recent window: found by search
    assert "tangerine42" in after.render()
    memory.delete_session("s")
    gone = memory.assemble("s", question, budget=512)
    assert gone.included_ids == [internal_id("query")]
    memory.close()
