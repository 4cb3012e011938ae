from __future__ import annotations

from hypothesis import given, settings, strategies as st

from sessiongate.adapters.kit.splitting import (
    DISCORD_LIMIT,
    TELEGRAM_LIMIT,
    open_fence,
    split_text,
    utf16_len,
)


def test_text_that_fits_is_one_chunk():
    assert split_text("short", TELEGRAM_LIMIT, measure=utf16_len) == ["short"]


def test_utf16_counts_astral_characters_twice():
    assert utf16_len("a😀") == 3
    assert utf16_len("é") == 1


def test_a_paragraph_break_is_preferred_over_a_sentence_end():
    text = "First paragraph. It goes on.\n\nSecond paragraph here." + " more" * 5
    chunks = split_text(text, 60)
    assert chunks[0] == "First paragraph. It goes on."


def test_a_sentence_end_is_preferred_over_a_space():
    text = "One sentence here. Another sentence that is longer than the rest of them"
    chunks = split_text(text, 40)
    assert chunks[0] == "One sentence here."


def test_astral_text_is_split_by_the_platforms_measure():
    text = "😀" * 5000
    chunks = split_text(text, TELEGRAM_LIMIT, measure=utf16_len)
    assert all(utf16_len(c) <= TELEGRAM_LIMIT for c in chunks)
    assert "".join(chunks) == text


def test_an_open_fence_is_closed_and_reopened_with_its_language():
    code = "\n".join(f"x = {i}" for i in range(600))
    chunks = split_text(f"Intro\n\n```python\n{code}\n```\nOutro", DISCORD_LIMIT)
    assert len(chunks) > 2
    for chunk in chunks:
        assert open_fence(chunk) is None
    assert all(c.startswith("```python") for c in chunks[1:-1])


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("ab .\n😀`é")), min_size=0, max_size=3000),
    st.integers(min_value=40, max_value=500),
)
def test_no_chunk_is_over_the_limit_and_no_text_is_lost(text, limit):
    chunks = split_text(text, limit, measure=utf16_len)
    assert all(utf16_len(c) <= limit for c in chunks)
    # Only whitespace at the cuts and fence markers added to balance may differ.
    squeeze = lambda s: "".join(s.split()).replace("`", "")  # noqa: E731
    assert squeeze("".join(chunks)) == squeeze(text)
