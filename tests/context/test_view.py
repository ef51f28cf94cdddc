"""The model's history view: sizes at once, attribution when read, each entry counted once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring.context import MainspringAdapter
from mainspring.context.accounting import Accounting, Meter, Piece, message_segments
from mainspring.context.compaction import Compaction
from mainspring.context.compiler import CompiledContext, ContextCompiler
from mainspring.context.history import Microcompact, ToolResultBudget
from mainspring.context.pipeline import Processor
from mainspring.context.view import ModelView
from mainspring.errors import ContextError
from mainspring.messages import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mainspring.tokens import EstimateTokenizer

SETTINGS = settings(max_examples=60, deadline=None)

words = st.text(alphabet="ab cdé\n", max_size=30)


class WordTokenizer:
    """An 'exact' tokenizer (counts go through the count cache): one token per word."""

    name = "test-words"
    exact = True

    def count(self, text: str) -> int:
        return len(text.split())


def part() -> st.SearchStrategy[Part]:
    return st.one_of(
        st.builds(TextPart, text=words),
        st.builds(ImagePart, url=st.just("https://example.test/i.png")),
        st.builds(
            ToolCallPart,
            id=st.sampled_from(["c1", "c2"]),
            name=st.sampled_from(["read", "grep"]),
            arguments=st.dictionaries(st.sampled_from("qk"), words, max_size=2),
        ),
        st.builds(
            ToolResultPart,
            tool_use_id=st.sampled_from(["c1", "c2"]),
            name=st.sampled_from(["read", "grep"]),
            content=words,
            is_error=st.booleans(),
        ),
        st.builds(ThinkingPart, text=words, redacted=st.booleans()),
    )


messages_st = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant", "tool"]),
    parts=st.one_of(
        st.tuples(st.builds(TextPart, text=words)),  # the common, fast case
        st.lists(part(), max_size=3).map(tuple),
    ),
)

tokenizers = st.one_of(
    st.builds(EstimateTokenizer, st.just("test"), chars_per_token=st.sampled_from([1.0, 3.5, 4.0])),
    st.builds(WordTokenizer),
)


def live(totals: Mapping[Any, list[int]]) -> dict[Any, list[int]]:
    return {k: v for k, v in totals.items() if v != [0, 0]}


def reference(
    meter: Meter, entries: Sequence[Message], owners: Sequence[tuple[str, str]]
) -> tuple[list[tuple[Piece, ...]], dict[Any, list[int]]]:
    """Every entry measured from scratch, and the totals they add up to."""
    pieces = [
        meter.measure(message_segments(m), *owner) for m, owner in zip(entries, owners, strict=True)
    ]
    totals: dict[Any, list[int]] = {}
    for entry in pieces:
        for p in entry:
            total = totals.setdefault((p.source, p.module, p.processor), [0, 0])
            total[0] += p.chars
            total[1] += p.tokens
    return pieces, live(totals)


# -- sizes agree with the attributed pieces ------------------------------------


@pytest.mark.slow
@SETTINGS
@given(st.lists(messages_st, max_size=12), tokenizers)
def test_the_view_sizes_equal_its_pieces_for_every_kind_of_message(
    messages: list[Message], tokenizer: EstimateTokenizer | WordTokenizer
) -> None:
    compiler = ContextCompiler(messages=messages, accounting=Accounting(tokenizer=tokenizer))
    view = compiler.view
    totals = view.totals
    assert view.tokens == sum(t for _, t in totals.values())
    assert view.chars == sum(c for c, _ in totals.values())
    independent = sum(tokenizer.count(text) for m in messages for _, text in message_segments(m))
    assert view.tokens == independent
    assert list(view.user_indices) == [i for i, m in enumerate(messages) if m.role == "user"]
    assert view.tokens_before(len(view)) == view.tokens


plain_text_st = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant"]),
    parts=st.tuples(st.builds(TextPart, text=words)),
)


@SETTINGS
@given(
    st.one_of(
        st.lists(plain_text_st, min_size=16, max_size=60),
        st.lists(messages_st, min_size=16, max_size=40),
    ),
    st.sampled_from([1.0, 3.5, 4.0]),
    st.integers(0, 3),
)
def test_a_long_run_of_messages_sizes_as_each_message_does(
    messages: list[Message], per: float, split: int
) -> None:
    # A history handed over whole (a new session's, or many appends between two
    # compiles) is sized in one pass; it must agree with sizing each message.
    tokenizer = EstimateTokenizer("test", chars_per_token=per)
    whole = ContextCompiler(messages=messages, accounting=Accounting(tokenizer=tokenizer)).view
    expected_tokens = sum(
        tokenizer.count(text) for m in messages for _, text in message_segments(m)
    )
    expected_chars = sum(len(text) for m in messages for _, text in message_segments(m))
    assert whole.tokens == expected_tokens and whole.chars == expected_chars
    plain = ContextCompiler(messages=messages[:split], model="m")
    plain.append(messages[split:])
    single: ContextCompiler[Message] = ContextCompiler(messages=(), model="m")
    for message in messages:
        single.append([message])
        len(single.view)  # each message mapped on its own
    assert plain.view.tokens == single.view.tokens
    assert plain.view.chars == single.view.chars == expected_chars
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    assert list(plain.view.user_indices) == list(single.view.user_indices) == users


# -- edits keep every figure equal to a recount ---------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("extend"), st.lists(messages_st, max_size=4)),
        st.tuples(st.just("replace"), st.integers(0, 30), messages_st),
        st.tuples(
            st.just("splice"),
            st.integers(0, 30),
            st.integers(0, 3),
            st.lists(messages_st, max_size=2),
        ),
        st.tuples(st.just("clear")),
        st.tuples(st.just("read"), st.integers(0, 30)),
        st.tuples(st.just("read"), st.integers(0, 30)),  # reads as often as edits
    ),
    max_size=16,
)


@pytest.mark.slow
@SETTINGS
@given(st.lists(messages_st, max_size=8), ops, tokenizers)
def test_edits_and_reads_in_any_order_match_a_recount(
    start: list[Message], script: list[tuple[Any, ...]], tokenizer: Any
) -> None:
    compiler = ContextCompiler(messages=start, accounting=Accounting(tokenizer=tokenizer))
    view = compiler.view
    meter = compiler.meter
    assert meter is not None
    entries = list(start)
    owners = [("transcript", "transcript")] * len(start)
    for op in script:
        if op[0] == "extend":
            view.extend(op[1])
            entries += op[1]
            owners += [("transcript", "transcript")] * len(op[1])
        elif op[0] == "replace" and entries:
            index = op[1] % len(entries)
            view.replace(index, op[2], "m", "replacer")
            entries[index], owners[index] = op[2], ("m", "replacer")
        elif op[0] == "splice":
            a = op[1] % (len(entries) + 1)
            b = min(a + op[2], len(entries))
            view.splice(a, b, op[3], "m", "splicer")
            entries[a:b] = op[3]
            owners[a:b] = [("m", "splicer")] * len(op[3])
        elif op[0] == "clear":
            view.clear()
            entries, owners = [], []
        elif op[0] == "read" and entries:
            index = op[1] % len(entries)
            pieces, totals = reference(meter, entries, owners)
            assert view.pieces(index) == pieces[index]
            assert view.pieces(index - len(entries)) == pieces[index]
            assert view.tokens_before(index) == sum(
                p.tokens for entry in pieces[:index] for p in entry
            )
            assert live(view.totals) == totals
        pieces, totals = reference(meter, entries, owners)
        assert list(view) == entries
        assert [view.owner(i) for i in range(len(view))] == owners
        assert view.tokens == sum(p.tokens for entry in pieces for p in entry)
        assert view.chars == sum(p.chars for entry in pieces for p in entry)
        assert list(view.user_indices) == [i for i, m in enumerate(entries) if m.role == "user"]
    pieces, totals = reference(meter, entries, owners)
    assert live(view.totals) == totals
    assert view.tokens_before(len(view)) == view.tokens


def test_bad_indexes_raise_and_change_nothing() -> None:
    compiler = ContextCompiler(
        messages=[Message.user("one two"), Message.assistant("three")],
        accounting=Accounting(tokenizer=EstimateTokenizer("test")),
    )
    view = compiler.view

    def state() -> tuple[object, ...]:
        return (list(view), view.tokens, view.chars, live(view.totals), view.tokens_before(2))

    before = state()
    with pytest.raises(IndexError, match="out of range"):
        view.replace(2, Message.user("x"), "m", "p")
    with pytest.raises(IndexError, match="out of range"):
        view.replace(-1, Message.user("x"), "m", "p")
    with pytest.raises(IndexError, match="out of range"):
        view.splice(1, 3, [Message.user("x")], "m", "p")
    with pytest.raises(IndexError, match="out of range"):
        view.splice(2, 1, [], "m", "p")
    with pytest.raises(IndexError):
        view.pieces(2)
    with pytest.raises(IndexError):
        view.pieces(-3)
    assert state() == before


# -- each entry is counted once, when attribution is read -------------------------


class CountingMeasure:
    def __init__(self) -> None:
        self.meter = Meter(Accounting(tokenizer=EstimateTokenizer("test")), "")
        self.calls = 0

    def __call__(self, message: Message, module: str, processor: str) -> tuple[Piece, ...]:
        self.calls += 1
        return self.meter.measure(message_segments(message), module, processor)


def history(n: int) -> list[Message]:
    return [Message.user(f"q {i}") if i % 2 == 0 else Message.assistant(f"a {i}") for i in range(n)]


def test_appends_count_sizes_only_and_reads_count_each_entry_once() -> None:
    from mainspring.context._sizes import mainspring_scan

    measure = CountingMeasure()
    view: ModelView[Message] = ModelView(
        measure, MainspringAdapter().role, mainspring_scan(measure.meter)
    )
    view.extend(history(1_000))
    assert measure.calls == 0  # a compile without accounting never pays for attribution
    assert view.tokens == sum(measure.meter.count(m.text) for m in history(1_000))
    assert view.last_user == 998
    totals = view.totals
    assert measure.calls == 1_000
    assert sum(t for _, t in totals.values()) == view.tokens
    assert view.tokens_before(500) > 0
    view.totals  # noqa: B018  # a second read counts nothing again
    assert measure.calls == 1_000
    view.extend(history(10))
    view.tokens_before(1_010)
    assert measure.calls == 1_010  # only what was added
    view.replace(3, Message.assistant("changed"), "m", "p")
    assert measure.calls == 1_011
    view.splice(1_000, 1_010, [Message.user("summary")], "m", "p")
    view.totals  # noqa: B018
    assert measure.calls == 1_012  # the spliced-in entry; the prefix is never rescanned


def test_a_view_without_a_scan_measures_what_it_sizes() -> None:
    measure = CountingMeasure()
    view: ModelView[Message] = ModelView(measure, MainspringAdapter().role)
    view.extend(history(10))
    assert view.tokens == sum(measure.meter.count(m.text) for m in history(10))
    assert list(view.user_indices) == [0, 2, 4, 6, 8]
    assert sum(t for _, t in view.totals.values()) == view.tokens


# -- a long history appended at once compiles as one appended message by message ---


@st.composite
def sessions(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []
    for t in range(draw(st.integers(1, 6))):
        out.append(Message.user(draw(st.sampled_from(["hi", "again", "x" * 90]))))
        for k in range(draw(st.integers(0, 2))):
            call_id = f"c{t}-{k}"
            args: dict[str, JsonValue] = {"q": draw(st.sampled_from(["a", "b"]))}
            out.append(
                Message(
                    role="assistant", parts=(ToolCallPart(id=call_id, name="r", arguments=args),)
                )
            )
            content = draw(st.sampled_from(["same result " * 30, "other " * 80, "short"]))
            out.append(
                Message.tool_results(
                    [ToolResultPart(tool_use_id=call_id, name="r", content=content)]
                )
            )
        if draw(st.booleans()):
            out.append(Message.assistant(draw(st.sampled_from(["ok", "done " * 40]))))
    return out


class Shout(Processor):
    """A sanitize mapper written the old way: one message at a time."""

    phase = "sanitize"

    def map_message(self, message: Message, index: int) -> Message:
        if message.role == "user" and index % 3 == 0:
            return Message.user(message.text.upper())
        return message


class TagEveryOther(Processor):
    """A history mapper that sees a run at once."""

    phase = "history"

    def __init__(self) -> None:
        super().__init__("tag", before=("tool-result-budget",))

    def map_messages(self, messages: Sequence[Message], start: int) -> Mapping[int, Message]:
        return {
            i: Message(role=m.role, parts=m.parts, meta={"tag": start + i})
            for i, m in enumerate(messages)
            if (start + i) % 2 == 1
        }


class OneByOneMicrocompact(Microcompact):
    """Microcompact as it saw messages before it had a pass of its own."""

    map_messages = Processor.map_messages


def pipeline(*, one_by_one: bool = False, over_tokens: int | None = None) -> list[Processor]:
    return [
        Shout("shout"),
        TagEveryOther(),
        ToolResultBudget(200),
        (OneByOneMicrocompact if one_by_one else Microcompact)(
            min_chars=100, over_tokens=over_tokens
        ),
        Compaction(600, keep_recent_turns=1),
    ]


def compiled_now(compiler: ContextCompiler[Message], turn: int) -> CompiledContext[Message]:
    import anyio

    async def go() -> CompiledContext[Message]:
        return await compiler.compile(turn_index=turn)

    return anyio.run(go)


@pytest.mark.slow
@SETTINGS
@given(
    sessions(),
    st.lists(st.integers(1, 6), max_size=4),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, 0, 150, 400]),
)
def test_runs_appended_at_once_compile_like_messages_appended_one_by_one(
    messages: list[Message],
    chunks: list[int],
    accounting: bool,
    by_sync: bool,
    over_tokens: int | None,
) -> None:
    def compiler(one_by_one: bool = False) -> ContextCompiler[Message]:
        return ContextCompiler(
            processors=pipeline(one_by_one=one_by_one, over_tokens=over_tokens),
            accounting=Accounting(tokenizer=EstimateTokenizer("test")) if accounting else None,
        )

    bulk, other = compiler(), compiler(one_by_one=True)
    bounds = [0]
    for size in chunks:
        bounds.append(min(bounds[-1] + size, len(messages)))
    bounds.append(len(messages))
    for turn, (a, b) in enumerate(pairwise(bounds)):
        bulk.append(messages[a:b])  # a run at once: one pass of each mapper
        for i in range(a, b):
            if by_sync:
                other.sync(messages[: i + 1])
            else:
                other.append([messages[i]])
        got, want = compiled_now(bulk, turn), compiled_now(other, turn)
        assert list(got.messages) == list(want.messages)
        assert got.segments == want.segments
        assert got.tokens == want.tokens
        assert [bulk.view.owner(i) for i in range(len(bulk.view))] == [
            other.view.owner(i) for i in range(len(other.view))
        ]
        assert bulk.view.tokens == other.view.tokens
    assert list(bulk.transcript.messages) == messages


def test_a_processor_with_only_map_messages_maps() -> None:
    tag = TagEveryOther()
    assert tag.maps_messages
    compiler = ContextCompiler(messages=history(4), processors=[tag])
    assert [m.meta for m in compiler.view] == [{}, {"tag": 1}, {}, {"tag": 3}]
    assert compiler.view.owner(1) == ("core", "tag")
    assert compiler.view.owner(0) == ("transcript", "transcript")
    compiler.append(history(2))  # the next run starts at transcript index 4
    assert [m.meta for m in compiler.view][4:] == [{}, {"tag": 5}]


class Broken(Processor):
    phase = "history"

    def map_messages(self, messages: Sequence[Message], start: int) -> Mapping[int, Message]:
        return {len(messages): Message.user("nowhere")}


def test_a_mapper_naming_a_message_outside_the_run_is_refused_and_the_view_recovers() -> None:
    broken = Broken("broken")
    compiler: ContextCompiler[Message] = ContextCompiler(processors=[broken])
    compiler.append(history(2))  # committed: the view is derived, when next read
    with pytest.raises(ContextError, match=r"broken.*outside the run of 2"):
        len(compiler.view)
    assert list(compiler.transcript.messages) == history(2)
    with pytest.raises(ContextError, match=r"broken.*outside the run of 2"):
        compiled_now(compiler, 1)  # a compile maps the run again, and fails again
    broken.map_messages = lambda messages, start: {}  # type: ignore[method-assign]  # the test breaks the adapter on purpose
    out = compiled_now(compiler, 1)  # the view is rebuilt from the transcript
    assert list(out.messages) == history(2)
    assert compiler.view.tokens > 0


# -- a view without accounting: shared sizing, lent lists ----------------------


@pytest.mark.slow
@SETTINGS
@given(st.lists(messages_st, max_size=8), ops)
def test_a_view_without_accounting_sizes_as_one_with_and_lent_lists_never_change(
    start: list[Message], script: list[tuple[Any, ...]]
) -> None:
    plain = ContextCompiler(messages=start, model="m").view  # the model's shared sizing
    counted = ContextCompiler(
        messages=start, model="m", accounting=Accounting(tokenizer=EstimateTokenizer("chars"))
    ).view
    lent: list[tuple[list[Message], list[Message]]] = []
    for op in script:
        for view in (plain, counted):
            if op[0] == "extend":
                view.extend(op[1])
            elif op[0] == "replace" and len(view):
                view.replace(op[1] % len(view), op[2], "m", "replacer")
            elif op[0] == "splice":
                a = op[1] % (len(view) + 1)
                view.splice(a, min(a + op[2], len(view)), op[3], "m", "splicer")
            elif op[0] == "clear":
                view.clear()
        if op[0] == "read":  # what a compile does: the request reads the lent list
            entries = plain.lend()
            lent.append((entries, list(entries)))
            assert plain.tokens_before(op[1] % (len(plain) + 1)) == counted.tokens_before(
                op[1] % (len(counted) + 1)
            )
        assert list(plain) == list(counted)
        assert (plain.tokens, plain.chars) == (counted.tokens, counted.chars)
        assert [plain.owner(i) for i in range(len(plain))] == [
            counted.owner(i) for i in range(len(counted))
        ]
        assert list(plain.user_indices) == list(counted.user_indices)
    for entries, then in lent:  # an edit after the lend worked on a copy; appends go after
        assert entries[: len(then)] == then
    with pytest.raises(IndexError):
        plain.owner(len(plain))


def test_compilers_without_accounting_count_alike_and_keep_their_own_views() -> None:
    one = ContextCompiler(messages=[Message.user("a b c d e")], model="m")
    two = ContextCompiler(messages=[Message.user("x")], model="m")
    one.view.replace(0, Message.user("longer text here"), "m", "p")
    assert [m.text for m in two.view] == ["x"]
    assert two.view.owner(0) == ("transcript", "transcript")
    assert one.view.owner(0) == ("m", "p")
    assert one.view.tokens == 4  # 16 characters, the estimate of 4 per token
    assert dict(two.view.totals) != {}  # read on demand, with the shared meter
