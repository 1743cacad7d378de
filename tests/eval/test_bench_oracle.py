"""benchmarks/bench_oracle.py: the oracle reranker and its run on a tiny LoCoMo-shaped file.

The real file stays outside the repository; here a two-session conversation with three
questions stands in. Real parts (tiktoken, an embedded Chroma, the default embedder).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]


def load_bench() -> ModuleType:
    """benchmarks/bench_oracle.py as a module."""
    spec = importlib.util.spec_from_file_location(
        "bench_oracle", ROOT / "benchmarks/bench_oracle.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_oracle"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


bench = load_bench()


def turn(dia_id: str, speaker: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text}


TINY: list[dict[str, Any]] = [
    {
        "sample_id": "conv-tiny",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                turn("D1:1", "Ana", "I adopted a beagle called Biscuit last week."),
                turn("D1:2", "Ben", "Lovely! How is the new flat by the river?"),
                turn("D1:3", "Ana", "We walk by the Douro every single morning."),
                turn("D1:4", "Ben", "I started pottery classes on Tuesdays."),
                turn("D1:5", "Ana", "What do you make in the pottery class?"),
                turn("D1:6", "Ben", "Bowls, mostly, and a lopsided teapot."),
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [
                turn("D2:1", "Ana", "Biscuit chewed my running shoes."),
                turn("D2:2", "Ben", "Ha! I ran a 10k on Sunday in the rain."),
                turn("D2:3", "Ana", "My sister visits from Lisbon next month."),
                turn("D2:4", "Ben", "Take her to the pottery studio."),
            ],
        },
        "qa": [
            {"question": "What breed is Biscuit?", "answer": "beagle", "evidence": ["D1:1"],
             "category": 4},
            {"question": "Where do Ana and Biscuit walk, and what did Biscuit chew?",
             "answer": "Douro", "evidence": ["D1:3", "D2:1"], "category": 1},
            {"question": "When did Ben run a 10k?", "answer": "Sunday", "evidence": ["D2:2"],
             "category": 2},
        ],
    }
]  # fmt: skip


def test_the_perfect_oracle_scores_evidence_one_and_the_rest_zero() -> None:
    oracle = bench.Oracle()
    oracle.ask({"We walk by the Douro.": "D1:3"}, "q")
    texts = ["Ana: We walk by the Douro.", "We walk by the Douro.", "Bowls, mostly."]
    assert oracle("where", texts) == [1.0, 1.0, 0.0]
    assert oracle.seen == {"D1:3"}
    # An excerpt of an evidence turn (MemoryConfig.excerpts) is that turn.
    assert oracle.match(f"{bench.MARKER} by the Douro.") == "D1:3"
    assert oracle.match(f"{bench.MARKER} by the Tagus.") is None


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    texts=st.lists(st.sampled_from(["a b", "c d", "e f", "g h"]), min_size=1, max_size=12),
    sigma=st.sampled_from([0.0, 0.25, 1.0]),
)
def test_a_noisy_oracle_is_seeded_and_ranks_evidence_higher_on_average(
    texts: list[str], sigma: float
) -> None:
    first, second = bench.Oracle(sigma), bench.Oracle(sigma)
    first.ask({"a b": "D1:1"}, "conv/1")
    second.ask({"a b": "D1:1"}, "conv/1")
    scores = first("q", texts)
    assert scores == second("q", texts)  # the same seed, the same noise
    assert len(scores) == len(texts)
    if sigma == 0:
        assert scores == [1.0 if t == "a b" else 0.0 for t in texts]


def test_the_script_runs_every_variant_on_a_tiny_locomo_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "tiny-locomo.json"
    data.write_text(json.dumps(TINY), encoding="utf-8")
    out = tmp_path / "oracle.json"
    argv = [str(data), "--budgets", "96,1024", "--speakers", "name,prefix", "--tops", "3", "8"]
    argv += ["--weights", "0.6", "1"]
    bench.main([*argv, "--sigmas", "0.5", "--diagnose", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "speakers=name" in printed and "speakers=prefix" in printed
    assert "| oracle, top 8, w 0.6 | all (headline) |" in printed
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert set(figures) == {"name", "prefix"}
    for form in ("name", "prefix"):
        recall = figures[form]["recall"]
        variants = {key.split("|")[0] for key in recall}
        assert variants == {
            "none",
            *(f"oracle, top {top}, w {w}" for top in (3, 8) for w in ("0.6", "1")),
            "oracle+N(0.5), top 8, w 0.6",
            "oracle+N(0.5), top 8, w 1",
        }
        # Everything fits in 1,024 tokens; at 96 the perfect oracle keeps at least what the
        # plain ranking keeps, and every lost evidence turn is placed.
        for key, value in recall.items():
            assert 0.0 <= value <= 1.0
            if key.split("|")[1] == "1024":
                assert value == 1.0
        for category in ("all", "multi-hop", "temporal", "single-hop"):
            for w in ("0.6", "1"):
                oracle = recall[f"oracle, top 8, w {w}|96|{category}"]
                assert oracle >= recall[f"none|96|{category}"]
        assert all(key.split("|")[0].startswith("oracle, top") for key in figures[form]["lost"])


def test_the_variants_cover_every_weight_and_default_to_the_config() -> None:
    default = bench.names([0.5], [bench.TOP])
    assert default == [
        "none",
        f"oracle, top {bench.TOP}, w {bench.WEIGHT:g}",
        f"oracle+N(0.5), top {bench.TOP}, w {bench.WEIGHT:g}",
    ]
    variants = bench.variants_for([0.5], [50, 200], [0.5, 1.0])
    assert [(top, weight) for _, top, weight in variants.values()] == [
        (50, 0.5),
        (200, 0.5),
        (200, 0.5),
        (50, 1.0),
        (200, 1.0),
        (200, 1.0),
    ]
