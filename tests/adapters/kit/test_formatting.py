from __future__ import annotations

from sessiongate.adapters.kit.formatting import (
    defuse_mass_mentions,
    to_plain_text,
    to_telegram_html,
)


def test_bold_italic_code_and_links_become_telegram_html():
    html = to_telegram_html("**b** *i* `c<d` [link](https://example.com/a?b=1&c=2)")
    assert html == (
        '<b>b</b> <i>i</i> <code>c&lt;d</code> <a href="https://example.com/a?b=1&amp;c=2">link</a>'
    )


def test_snake_case_is_not_italic():
    assert to_telegram_html("call my_function_name now") == "call my_function_name now"


def test_text_is_escaped_outside_markup():
    assert to_telegram_html("1 < 2 & 3 > 2") == "1 &lt; 2 &amp; 3 &gt; 2"


def test_a_fence_keeps_its_language_and_escapes_its_body():
    html = to_telegram_html("```py\nif a<b:\n    pass\n```")
    assert html == '<pre><code class="language-py">if a&lt;b:\n    pass</code></pre>'


def test_headings_become_bold_and_tables_stay_monospace():
    html = to_telegram_html("# Title\n| a | b |\n|---|---|\n| 1 | 2 |")
    assert html.startswith("<b>Title</b>\n<pre>| a | b |")


def test_plain_text_drops_the_markers():
    assert to_plain_text("**b** `c` [x](https://e.com)") == "b c x (https://e.com)"


def test_mass_mentions_are_defused():
    text = defuse_mass_mentions("@everyone and @here and @Room")
    assert "@everyone" not in text
    assert "@here" not in text
    assert text.replace("\u200b", "") == "@everyone and @here and @Room"
