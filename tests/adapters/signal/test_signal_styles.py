"""Markdown to Signal's text and body ranges (`styles.py`): offsets in UTF-16 units."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from sessiongate.adapters.signal.styles import STYLES, TextStyle, to_signal_text, utf16_units


def styled(markdown: str) -> tuple[str, list[tuple[str, str]]]:
    """(text, [(style, the text it covers)]), sliced the UTF-16 way."""
    text, styles = to_signal_text(markdown)
    units = text.encode("utf-16-le")
    covered = [
        (s.style, units[s.start * 2 : (s.start + s.length) * 2].decode("utf-16-le")) for s in styles
    ]
    return text, sorted(covered)


@pytest.mark.parametrize(
    ("markdown", "text", "covered"),
    [
        ("**bold** and `code`", "bold and code", [("BOLD", "bold"), ("MONOSPACE", "code")]),
        ("__also bold__", "also bold", [("BOLD", "also bold")]),
        ("*it* and _it_", "it and it", [("ITALIC", "it"), ("ITALIC", "it")]),
        (
            "~~gone~~ ||secret||",
            "gone secret",
            [("SPOILER", "secret"), ("STRIKETHROUGH", "gone")],
        ),
        (
            "**bold _inner_ more**",
            "bold inner more",
            [("BOLD", "bold inner more"), ("ITALIC", "inner")],
        ),
        ("# Title\nbody", "Title\nbody", [("BOLD", "Title")]),
        ("```python\nx = 1\n```\nafter", "x = 1\nafter", [("MONOSPACE", "x = 1")]),
        ("`**not bold**`", "**not bold**", [("MONOSPACE", "**not bold**")]),
        ("[docs](https://example.org/a)", "docs (https://example.org/a)", []),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4", []),
        ("**unclosed and *lonely", "**unclosed and *lonely", []),
    ],
)
def test_markdown_becomes_text_and_ranges(markdown, text, covered):
    assert styled(markdown) == (text, sorted(covered))


def test_offsets_count_utf16_units_past_emoji():
    """An emoji outside the BMP is two units: the range after it starts two further on."""
    text, styles = to_signal_text("😀😀 **after**")
    assert text == "😀😀 after"
    assert styles == [TextStyle(start=5, length=5, style="BOLD")]
    assert styles[0].wire() == "5:5:BOLD"


def test_a_table_stays_as_it_is_in_monospace():
    table = "| a | b |\n|---|---|\n| 1 | 2 |"
    text, covered = styled(f"Totals:\n{table}\nend")
    assert text == f"Totals:\n{table}\nend"
    assert covered == [("MONOSPACE", table)]


_PIECES = st.sampled_from(
    ["**", "*", "_", "__", "~~", "||", "`", "```", "\n", " ", "# ", "[a](https://x.y)", "😀",
     "é", "word", "|", "a_b", "1*2"]
)  # fmt: skip


@given(st.lists(_PIECES, max_size=30).map("".join))
def test_every_range_lies_inside_the_text_and_names_a_style(markdown):
    text, styles = to_signal_text(markdown)
    units = utf16_units(text)
    for style in styles:
        assert style.style in STYLES
        assert style.start >= 0
        assert style.length > 0
        assert style.start + style.length <= units


@given(st.text(alphabet=st.characters(blacklist_characters="*_~|`#[\n"), max_size=60))
def test_text_without_markers_is_sent_as_it_is(plain):
    assert to_signal_text(plain) == (plain, [])
