use super::snapshot;

fn shown(text: &str, first: bool) -> Option<String> {
    snapshot(text, first).map(|(s, closer)| format!("{s}{closer}"))
}

#[test]
fn a_snapshot_never_looks_broken() {
    let cases = [
        // No half words; a word is whole once the next space or line came.
        ("Here's the answer", Some("Here's the")),
        ("Here's the answer ", Some("Here's the answer")),
        // Emphasis and code spans are closed; a half word in them is left out first.
        ("Here's the **s", Some("Here's the")),
        ("Here's the **strong words", Some("Here's the **strong**")),
        ("Run `cargo test --all", Some("Run `cargo test`")),
        ("Run `cargo` and *then* _more of it", Some("Run `cargo` and *then* _more of_")),
        ("snake_case_names and", Some("snake_case_names")),
        ("* a bullet, not emphasis", Some("* a bullet, not")),
        // A link is shown once written; a half one is left out.
        ("See [the docs](https://ex.org/do", Some("See")),
        ("See [the docs](https://ex.org/docs) and", Some("See [the docs](https://ex.org/docs)")),
        ("A [x] marker, not a link", Some("A [x] marker, not a")),
        // A heading or a table row still being typed is left out.
        ("Intro.\n\n## Thin", Some("Intro.")),
        ("Intro.\n\n## Thinking about it", Some("Intro.")),
        ("Intro.\n\n## Thinking\n\nMore", Some("Intro.\n\n## Thinking")),
        // A table shows once its header and delimiter rows are whole.
        ("Data:\n\n| City | °C |\n", Some("Data:")),
        ("Data:\n\n| City | °C |\n| -- | -", Some("Data:")),
        ("Data:\n\n| City | °C |\n| -- | -- |\n| Lisbon | 2", Some("Data:\n\n| City | °C |\n| -- | -- |")),
        // An open fence is closed; the code in it shows.
        ("Code:\n\n```rust\nfn main() {\n    let x", Some("Code:\n\n```rust\nfn main() {\n    let\n```")),
        ("Code:\n\n```\na\n```\n\nAfter the `b", Some("Code:\n\n```\na\n```\n\nAfter the")),
        ("", None),
        ("Word", None),
    ];
    for (text, want) in cases {
        assert_eq!(shown(text, false).as_deref(), want, "{text:?}");
    }
}

#[test]
fn the_first_snapshot_is_a_complete_sentence() {
    assert_eq!(shown("Hello there, how", true), None);
    assert_eq!(shown("Hello there. How are", true).as_deref(), Some("Hello there."));
    assert_eq!(shown("It costs 3.5 euros", true), None, "a decimal point ends no sentence");
    assert_eq!(shown("Steps:\n1. Open the", true).as_deref(), Some("Steps:"));
    assert_eq!(shown("Really? Yes! And", true).as_deref(), Some("Really? Yes!"));
}
