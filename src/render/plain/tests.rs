use super::plain_text;

#[test]
fn a_body_carries_the_words_without_markdown_markers() {
    let cases = [
        ("plain words stay", "plain words stay"),
        ("**Bold**, *em*, ~~gone~~ and `code`", "Bold, em, gone and code"),
        ("# Weather\n\nSunny, **21 °C**.", "Weather\n\nSunny, 21 °C."),
        (
            "See [the docs](https://ex.org/docs) or <https://ex.org>.",
            "See the docs (https://ex.org/docs) or https://ex.org.",
        ),
        ("Mail [me](mailto:a@ex.org) or [a@ex.org](mailto:a@ex.org)", "Mail me (mailto:a@ex.org) or a@ex.org"),
        ("![a chart](mxc://ex.org/c)", "a chart (mxc://ex.org/c)"),
        ("- one\n- two\n  - two and a half\n- three", "• one\n• two\n  • two and a half\n• three"),
        ("3. third\n4. fourth", "3. third\n4. fourth"),
        ("- [x] packed\n- [ ] shipped", "• ✅ packed\n• ⬜ shipped"),
        ("> quoted\n> more\n\nafter", "│ quoted\n│ more\n\nafter"),
        ("line one  \nline two", "line one\nline two"),
        ("before\n\n---\n\nafter", "before\n\n──────────\n\nafter"),
        ("Hi <b>there</b>", "Hi there"),
        ("```rust\nfn main() {\n    x < y;\n}\n```\nafter", "fn main() {\n    x < y;\n}\n\nafter"),
    ];
    for (markdown, want) in cases {
        assert_eq!(plain_text(markdown), want, "{markdown:?}");
    }
}

#[test]
fn a_table_is_aligned_columns_and_a_loose_list_keeps_its_code() {
    let table = "| City | °C |\n|:--|--:|\n| Lisbon | 21.5 |\n| **Oslo** | -3 |";
    assert_eq!(plain_text(table), "City      °C\n------  ----\nLisbon  21.5\nOslo      -3");
    let item = "1. Install:\n\n   ```\n   pip install x\n   ```\n2. Run";
    assert_eq!(plain_text(item), "1. Install:\n\n   pip install x\n2. Run");
}
