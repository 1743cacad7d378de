"""What a second probe of the LlamaIndex adapter found, fixed: one test each (real Chroma, model).

1. A memory block never reads another user's session: ``get`` and ``aget`` refuse the session
   (`SessionOwnerError`) before its messages reach the block (and whatever LLM it holds).
2. A ``set`` (an agent's ``run(chat_history=...)``) or ``put_messages`` with a message the store
   refuses (a lone surrogate) changes nothing: before, ``set`` had already forgotten the stored
   conversation and system prompt, and ``put_messages`` had pinned the system messages.
3. ``from_defaults`` whose ``chat_history`` or ``system_prompt`` is refused closes the store it
   opened, and a refused ``system_prompt`` leaves the session's conversation as it was.
4. What is not a ``ChatMessage`` (``put("hi")``), or a ``get(input=5)``, is an ``InvalidItemError``
   saying what to pass, not an ``AttributeError``.
5. ``CtxBudgetRetriever(collections="name")`` searches that collection, not its letters; an empty
   list is refused (as the LangChain retriever refuses it), not an empty answer.
6. Tiers and counts take numpy ints as every number boundary does (a node's tier, ``block_tiers``,
   ``cache_size``); a tier of 5,000 digits is an ``InvalidItemError``, not Python's ``ValueError``.
7. A lone surrogate in a node's content, a memory block's text or ``get``'s input is refused
   naming the node, the block or the input.
8. ``CtxBudgetEmbedding`` refuses a text with a lone surrogate by its index (``InvalidItemError``),
   where the tokenizer raised ``TypeError: TextInputSequence must be str``.
9. The postprocessor's ``near_duplicate_threshold`` is checked as the LangChain compressor's is
   (above 0, at most 1): NaN or 2.0 silently turned near-duplicate dropping off.
10. ``pin(text, user_wide="false")`` and ``clear(pins="false")`` are refused: the truthy str
    pinned the fact to every session of the user, or forgot the session's pinned facts.
11. ``from_defaults(session_id="")`` (an empty form field, a missing header) is refused, as the
    store refuses it: it was replaced by a new random session, so each turn started afresh.
12. Memory blocks need unique, valid names, as LlamaIndex's ``Memory`` checks: two blocks of one
    name made every ``get`` fail with an error about ids the user never gave, and a block named
    with a lone surrogate crashed the context log's thread (the call's record was lost).
13. The image of the question being answered is still sent after a system message is put (or
    ``put_messages([])``): the question is still the session's last message, but its copy with
    the image was dropped, so the model got "What is in this picture? [image]".
14. ``LLMSummarizer`` and ``LLMEntityExtractor`` refuse what is not a LlamaIndex LLM, and the
    summarizer a prompt that is not a template, when made (``ConfigurationTypeError``), not with
    an ``AttributeError`` on the first summary, in the middle of an assembly.
15. ``additional_kwargs`` JSON cannot hold (a circular reference) are an ``InvalidItemError``
    naming the message, not json's bare ``ValueError``; nothing is written.
16. ``CtxBudgetRetriever(fetch_k=10**18)`` is refused when made, naming ``fetch_k``: it was taken,
    and every retrieval then failed with "k must be at most 2,147,483,647".
17. A ``CtxBudgetMemory`` given where a ``ContextMemory`` goes (``CtxBudgetRetriever(memory=)``,
    ``from_defaults(memory=)``) is a ``ConfigurationTypeError`` saying to pass its
    ``.context_memory``, not an ``AttributeError`` about ``counter_for``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, MessageRole, TextBlock
from llama_index.core.llms import MockLLM
from llama_index.core.memory import StaticMemoryBlock
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.schema import NodeWithScore, TextNode

from ctxbudget import (
    ConfigurationError,
    ConfigurationTypeError,
    InvalidItemError,
    SessionOwnerError,
    StoreInputError,
    Tier,
)
from ctxbudget.memory.context import ContextMemory
from llama_index.ctxbudget import (
    CtxBudgetEmbedding,
    CtxBudgetMemory,
    CtxBudgetNodePostprocessor,
    CtxBudgetRetriever,
    LLMEntityExtractor,
    LLMSummarizer,
)

from .helpers import assistant, memory_on, user

BAD = "caf\ud800e"  # a lone surrogate: a str, but not Unicode


class SpyBlock(BaseMemoryBlock[str]):
    """A memory block that keeps the messages it is given (as one that sends them to an LLM)."""

    seen: list[str] = []

    async def _aget(self, messages: list[ChatMessage] | None = None, **kwargs: Any) -> str:
        self.seen.extend(m.content or "" for m in messages or [])
        return "block text"

    async def _aput(self, messages: list[ChatMessage]) -> None:
        return None


@pytest.mark.parametrize("how", ["get", "aget"])
def test_a_memory_block_never_reads_another_users_session(
    context_memory: ContextMemory, how: str
) -> None:
    alice = memory_on(context_memory, session_id="shared", user_id="alice", token_limit=500)
    alice.put(user("My bank PIN is 1234."))
    spy = SpyBlock(name="spy", seen=[])
    bob = memory_on(
        context_memory, session_id="shared", user_id="bob", token_limit=500, memory_blocks=[spy]
    )
    with pytest.raises(SessionOwnerError):
        bob.get() if how == "get" else asyncio.run(bob.aget())
    assert spy.seen == []  # before: ["My bank PIN is 1234."]


@pytest.mark.parametrize("how", ["set", "aset", "put_messages"])
@pytest.mark.parametrize(
    "bad",
    [
        user(BAD),
        ChatMessage(role=MessageRole.SYSTEM, content=BAD),
        ChatMessage(role=MessageRole.USER, content="x", additional_kwargs={"name": BAD}),
    ],
    ids=["text", "system", "name"],
)
def test_a_write_the_store_refuses_changes_nothing(
    context_memory: ContextMemory, how: str, bad: ChatMessage
) -> None:
    memory = memory_on(context_memory, token_limit=500, system_prompt="Be kind.")
    memory.put_messages([user("keep me"), assistant("kept")])
    before = [(m.role, m.content) for m in memory.get_all()]
    given = [ChatMessage(role=MessageRole.SYSTEM, content="New prompt."), user("new"), bad]
    with pytest.raises(StoreInputError, match="lone surrogate"):
        if how == "aset":
            asyncio.run(memory.aset(given))
        else:
            getattr(memory, how)(given)
    # Before: set had forgotten everything (even the system prompt); put_messages had pinned
    # "New prompt." before the bad message was refused.
    assert [(m.role, m.content) for m in memory.get_all()] == before


def test_a_refused_from_defaults_closes_its_store_and_keeps_the_session(
    tmp_path: Path,
    context_memory: ContextMemory,
    embedding: CtxBudgetEmbedding,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closed: list[ContextMemory] = []
    close = ContextMemory.close

    def recording_close(self: ContextMemory) -> None:
        closed.append(self)
        close(self)

    monkeypatch.setattr(ContextMemory, "close", recording_close)
    for options in ({"chat_history": [user(BAD)]}, {"system_prompt": BAD}):
        with pytest.raises(StoreInputError, match="lone surrogate"):
            CtxBudgetMemory.from_defaults(
                path=tmp_path / "own", token_limit=300, embedder=embedding, **options
            )
        assert len(closed) == 1  # before: the store it opened stayed open
        closed.clear()
    # On a session with a conversation: a refused prompt leaves it as it was.
    memory = memory_on(context_memory, session_id="kept", token_limit=300)
    memory.put_messages([user("keep me"), assistant("kept")])
    with pytest.raises(StoreInputError, match="lone surrogate"):
        memory_on(context_memory, session_id="kept", chat_history=[user("new")], system_prompt=BAD)
    assert [m.content for m in memory.get_all()] == ["keep me", "kept"]  # before: ["new"]
    assert closed == []  # a given ContextMemory is not closed


@pytest.mark.parametrize("given", ["hello", {"role": "user", "content": "hi"}, None])
def test_what_is_not_a_chat_message_is_refused_saying_what_to_pass(
    context_memory: ContextMemory, given: object
) -> None:
    memory = memory_on(context_memory, token_limit=300)
    memory.put(user("stored"))
    for write in (memory.put, lambda m: memory.set([user("a"), m])):
        with pytest.raises(InvalidItemError, match="not a LlamaIndex ChatMessage"):
            write(given)  # before: AttributeError: 'str' object has no attribute 'role'
    with pytest.raises(InvalidItemError, match="list of LlamaIndex ChatMessage"):
        memory.set(None)  # type: ignore[arg-type]
    for question in (5, b"where?"):
        with pytest.raises(InvalidItemError, match=r"get\(input=\) must be"):
            memory.get(input=question)  # type: ignore[arg-type]
    assert [m.content for m in memory.get_all()] == ["stored"]


def test_collections_given_as_one_name_search_that_collection(
    context_memory: ContextMemory,
) -> None:
    context_memory.add_documents(["Porto has a river and six bridges."], collection="porto")
    context_memory.add_documents(["Lisbon has seven hills."], collection="lisbon")
    one = CtxBudgetRetriever(context_memory, budget=200, collections="porto")
    # Before: searched the collections "p", "o", "r", "t", "o": nothing.
    assert [n.node.text for n in one.retrieve("bridges over the river")] == [
        "Porto has a river and six bridges."
    ]
    with pytest.raises(ConfigurationError, match="empty list"):
        CtxBudgetRetriever(context_memory, budget=200, collections=[])


def test_tiers_and_counts_take_numpy_ints_and_refuse_unreadable_digits() -> None:
    postprocessor = CtxBudgetNodePostprocessor(budget=200)

    def node(tier: object) -> NodeWithScore:
        return NodeWithScore(
            node=TextNode(id_="n1", text="Fact.", metadata={"ctxbudget_tier": tier}), score=1.0
        )

    (kept,) = postprocessor.postprocess_nodes([node(np.int64(int(Tier.PINNED)))])
    assert postprocessor.last_context is not None
    assert postprocessor.last_context.included[0].tier == Tier.PINNED  # before: refused
    assert kept.node_id == "n1"
    for unreadable in ("9" * 5000, "²"):  # before: ValueError from int()
        with pytest.raises(InvalidItemError, match="is not a tier"):
            postprocessor.postprocess_nodes([node(unreadable)])
    with pytest.raises(InvalidItemError, match="must be an int"):
        postprocessor.postprocess_nodes([node(30.0)])
    assert CtxBudgetEmbedding(cache_size=np.int64(3)) is not None  # before: ConfigurationError
    with pytest.raises(ConfigurationError):
        CtxBudgetEmbedding(cache_size=-1)


def test_block_tiers_take_numpy_ints(context_memory: ContextMemory) -> None:
    block = StaticMemoryBlock(name="facts", static_content="Ada likes tea.", priority=1)
    memory = memory_on(
        context_memory,
        token_limit=300,
        memory_blocks=[block],
        block_tiers={"facts": np.int64(int(Tier.RETRIEVED))},  # before: InvalidItemError
    )
    assert memory.block_tiers == {"facts": int(Tier.RETRIEVED)}
    with pytest.raises(InvalidItemError, match="must be an int"):
        memory_on(context_memory, token_limit=300, block_tiers={"facts": "30"})


def test_a_lone_surrogate_is_refused_naming_the_node_the_block_or_the_input(
    context_memory: ContextMemory,
) -> None:
    nodes = [
        NodeWithScore(node=TextNode(id_="fine", text="Fine."), score=1.0),
        NodeWithScore(node=TextNode(id_="broken", text=BAD), score=0.5),
    ]
    with pytest.raises(InvalidItemError, match=r"node 1 \(id 'broken'\).*lone surrogate"):
        CtxBudgetNodePostprocessor(budget=200).postprocess_nodes(nodes)
    block = StaticMemoryBlock(name="facts", static_content=BAD, priority=0)
    memory = memory_on(context_memory, token_limit=300, memory_blocks=[block])
    memory.put(user("Hello"))
    with pytest.raises(InvalidItemError, match="memory block 'facts'.*lone surrogate"):
        memory.get()
    plain = memory_on(context_memory, token_limit=300)
    plain.put(user("Hello"))
    for question in (BAD, ChatMessage(role=MessageRole.USER, content=BAD)):
        with pytest.raises(InvalidItemError, match=r"get\(input=\).*lone surrogate"):
            plain.get(input=question)


def test_the_embedding_refuses_a_lone_surrogate_by_its_index(
    embedding: CtxBudgetEmbedding,
) -> None:
    with pytest.raises(InvalidItemError, match="text 1 holds a lone surrogate"):
        embedding.embed_documents(["fine", BAD])  # before: TypeError from the tokenizer
    with pytest.raises(InvalidItemError, match="lone surrogate"):
        embedding.get_text_embedding_batch(["fine", BAD])  # as an index embeds its nodes
    with pytest.raises(InvalidItemError, match="lone surrogate"):
        asyncio.run(embedding.aget_query_embedding(BAD))


@pytest.mark.parametrize("threshold", [float("nan"), 2.0, 0.0, "0.9"])
def test_a_near_duplicate_threshold_out_of_range_is_refused(threshold: object) -> None:
    with pytest.raises(ConfigurationError, match="near_duplicate_threshold"):
        CtxBudgetNodePostprocessor(budget=100, near_duplicate_threshold=threshold)
    same = [
        NodeWithScore(node=TextNode(id_=name, text=f"Fact {name}.", embedding=[1.0, 0.0]))
        for name in ("a", "b")
    ]
    kept = CtxBudgetNodePostprocessor(budget=100, near_duplicate_threshold=np.float32(0.9))
    assert [n.node_id for n in kept.postprocess_nodes(same)] == ["a"]


def test_pin_user_wide_takes_a_bool_only(context_memory: ContextMemory) -> None:
    memory = memory_on(context_memory, user_id="ada", token_limit=300)
    with pytest.raises(ConfigurationError, match="user_wide"):
        memory.pin("Ada's passport number is X123.", user_wide="false")  # type: ignore[arg-type]
    other = memory_on(context_memory, user_id="ada", token_limit=300)
    other.put(user("What do you know about me?"))
    sent = " ".join(m.content or "" for m in other.get())
    assert "X123" not in sent  # before: pinned user-wide, sent in all of Ada's sessions
    memory.pin("Ada likes tea.", user_wide=np.bool_(True))
    assert "Ada likes tea." in " ".join(m.content or "" for m in other.get())


def test_clear_pins_takes_a_bool_only(context_memory: ContextMemory) -> None:
    memory = memory_on(context_memory, token_limit=300)
    memory.pin("Ada is allergic to peanuts.")
    memory.put(user("Hello"))
    with pytest.raises(ConfigurationError, match="pins"):
        memory.clear(pins="false")  # type: ignore[arg-type]
    assert [m.content for m in memory.get_all()] == ["Hello"]  # nothing was forgotten
    memory.clear()
    memory.put(user("What should I avoid?"))
    assert "peanuts" in " ".join(m.content or "" for m in memory.get())  # before: forgotten


def test_an_empty_session_id_is_refused_not_replaced(context_memory: ContextMemory) -> None:
    for options in ({"session_id": ""}, {"session_id": "s1", "user_id": ""}):
        with pytest.raises(StoreInputError, match="must be a non-empty str"):
            CtxBudgetMemory.from_defaults(memory=context_memory, token_limit=300, **options)
    fresh = CtxBudgetMemory.from_defaults(memory=context_memory, token_limit=300)
    assert fresh.session_id  # None is still a new random session


def test_memory_blocks_need_unique_valid_names(context_memory: ContextMemory) -> None:
    def block(name: str, text: str) -> StaticMemoryBlock:
        return StaticMemoryBlock(name=name, static_content=text, priority=0)

    twins = [block("facts", "Ada likes tea."), block("facts", "Ada is allergic to peanuts.")]
    with pytest.raises(ConfigurationError, match="'facts' is the name of another block"):
        memory_on(context_memory, token_limit=300, memory_blocks=twins)
    with pytest.raises(ConfigurationError, match="lone surrogate"):
        memory_on(context_memory, token_limit=300, memory_blocks=[block(BAD, "Fact.")])
    memory = memory_on(
        context_memory,
        token_limit=300,
        memory_blocks=[block("tea", "Ada likes tea."), block("food", "Ada hates peanuts.")],
    )
    memory.put(user("Hello"))
    sent = memory.get()[0].content or ""
    assert "Ada likes tea." in sent and "Ada hates peanuts." in sent


PNG = (  # a 1x1 PNG
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00"
    b"\x00\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92"
    b"\xef\x00\x00\x00\x00IEND\xaeB`\x82"
)


@pytest.mark.parametrize(
    "after",
    [
        [ChatMessage(role=MessageRole.SYSTEM, content="Answer in French.")],
        [],
    ],
    ids=["system", "nothing"],
)
def test_the_questions_image_is_still_sent_after_a_write_that_stores_nothing_after_it(
    context_memory: ContextMemory, after: list[ChatMessage]
) -> None:
    memory = memory_on(context_memory, token_limit=2000)
    question = ChatMessage(
        role=MessageRole.USER,
        blocks=[TextBlock(text="What is in this picture?"), ImageBlock(image=PNG)],
    )
    memory.put(question)
    memory.put_messages(after)
    sent = memory.get()[-1]
    assert [type(b).__name__ for b in sent.blocks] == ["TextBlock", "ImageBlock"]  # before: text
    assert sent.blocks[0].text == "What is in this picture?"  # type: ignore[union-attr]
    # Also when the system message comes in the same write, after the question.
    again = memory_on(context_memory, token_limit=2000)
    again.put_messages([question, *after])
    assert [type(b).__name__ for b in again.get()[-1].blocks] == ["TextBlock", "ImageBlock"]


def test_the_llm_helpers_refuse_what_is_not_an_llm_or_a_prompt_when_made() -> None:
    with pytest.raises(ConfigurationTypeError, match="LlamaIndex LLM"):
        LLMSummarizer("gpt-4o")  # type: ignore[arg-type]  # before: on the first summary
    with pytest.raises(ConfigurationTypeError, match="LlamaIndex LLM"):
        LLMEntityExtractor("gpt-4o")  # type: ignore[arg-type]
    for prompt in (None, 5):
        with pytest.raises(ConfigurationTypeError, match="prompt"):
            LLMSummarizer(MockLLM(), prompt=prompt)  # type: ignore[arg-type]
    assert LLMSummarizer(MockLLM(max_tokens=3)).summarize(["We met in Lisbon."], 10)


def test_additional_kwargs_json_cannot_hold_are_refused_naming_the_message(
    context_memory: ContextMemory,
) -> None:
    memory = memory_on(context_memory, token_limit=300)
    loop: dict[str, Any] = {}
    loop["self"] = loop
    given = [
        user("fine"),
        ChatMessage(role=MessageRole.ASSISTANT, content="x", additional_kwargs={"trace": loop}),
    ]
    with pytest.raises(InvalidItemError, match=r"message 1: its additional_kwargs \['trace'\]"):
        memory.put_messages(given)  # before: ValueError: Circular reference detected
    assert memory.get_all() == []


def test_a_fetch_k_no_search_can_take_is_refused_when_made(context_memory: ContextMemory) -> None:
    with pytest.raises(ConfigurationError, match="fetch_k must be at most 2,147,483,647"):
        CtxBudgetRetriever(context_memory, budget=100, fetch_k=10**18)
    context_memory.add_documents(["Ada lives in Lisbon."])
    found = CtxBudgetRetriever(context_memory, budget=100, fetch_k=np.int64(2**31 - 1))
    assert [n.node.text for n in found.retrieve("Where does Ada live?")] == ["Ada lives in Lisbon."]


def test_a_chat_memory_given_for_its_context_memory_says_what_to_pass(
    context_memory: ContextMemory,
) -> None:
    chat = memory_on(context_memory, token_limit=300)
    for make in (
        lambda: CtxBudgetRetriever(chat, budget=100),  # type: ignore[arg-type]
        lambda: CtxBudgetMemory.from_defaults(memory=chat, token_limit=300),  # type: ignore[arg-type]
    ):
        with pytest.raises(ConfigurationTypeError, match=r"<your CtxBudgetMemory>\.context_memory"):
            make()
    assert CtxBudgetRetriever(chat.context_memory, budget=100).memory is context_memory


def test_blocks_not_stored_are_warned_of_once_per_kind(caplog: pytest.LogCaptureFixture) -> None:
    """A reasoning model's every turn holds a ThinkingBlock: the warning that it is not stored
    came on every turn. Once per kind of block and process now; later ones at DEBUG."""
    import logging

    from llama_index.core.base.llms.types import ImageBlock, TextBlock, ThinkingBlock

    from llama_index.ctxbudget import convert

    convert._WARNED.clear()
    with caplog.at_level(logging.DEBUG, logger=convert.__name__):
        for _ in range(3):
            convert.text_of_blocks([TextBlock(text="hi"), ThinkingBlock(content="hmm")])
        convert.text_of_blocks([ImageBlock(url="https://example.com/a.png")])
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2
    assert "ThinkingBlock" in warned[0] and "ImageBlock" in warned[1]
