//! What a live message shows of an answer still streaming. Each snapshot stands for
//! 2.5 s at least, and the first is what notifications keep for good, so none may look
//! broken: no half word, no heading or table row still being typed, no table before its
//! header and delimiter rows are complete, no half-written link; emphasis and code spans
//! still open are closed, and so is an open code fence. The first snapshot is a complete
//! sentence (or line). The final edit is the whole answer, as written: none of this
//! applies to it.

/// The part of `text` (a prefix of it) a snapshot shows, and what closes its open markup;
/// `None` while nothing is fit to show. `first`: the first snapshot, which ends at a
/// sentence.
pub fn snapshot(text: &str, first: bool) -> Option<(&str, String)> {
    let mut cut = words_end(text);
    if first {
        cut = sentence_end(&text[..cut])?;
    }
    let fence = open_fence(&text[..cut]);
    if fence.is_none() {
        cut = whole_lines(text, cut);
    }
    let shown = text[..cut].trim_end();
    if shown.is_empty() {
        return None;
    }
    let closer = match fence {
        Some(f) => format!("\n{}", fence_of(f)),
        None => {
            let (cut, closer) = inline_open(shown);
            return Some((shown[..cut].trim_end(), closer)).filter(|(s, _)| !s.is_empty());
        }
    };
    Some((shown, closer))
}

/// Where the last whole word ends: a word still arriving is left out.
fn words_end(text: &str) -> usize {
    match text.chars().last() {
        Some(c) if c.is_whitespace() => text.len(),
        _ => text.rfind(char::is_whitespace).unwrap_or(0),
    }
}

/// Where the last sentence or line of `text` ends.
fn sentence_end(text: &str) -> Option<usize> {
    let mut ends = text.char_indices().filter(|&(i, c)| {
        let next = text[i + c.len_utf8()..].chars().next();
        // "1. " at a line's start is a list item's number, not a sentence's end.
        let line = &text[text[..i].rfind('\n').map_or(0, |n| n + 1)..i];
        let number = c == '.' && !line.is_empty() && line.trim_start().chars().all(|d| d.is_ascii_digit());
        c == '\n' || (matches!(c, '.' | '!' | '?' | ':') && next.is_none_or(char::is_whitespace) && !number)
    });
    ends.next_back().map(|(i, c)| i + c.len_utf8())
}

/// The opening line of a code block still open at the end of `text` (its fence, ```` ``` ````
/// or `~~~`, and its language), if one is.
pub fn open_fence(text: &str) -> Option<&str> {
    let mut open: Option<&str> = None;
    for line in text.lines() {
        let t = line.trim_start();
        let run = fence_of(t);
        match open {
            Some(o)
                if run.len() >= fence_of(o).len()
                    && run.starts_with(fence_of(o))
                    && t[run.len()..].trim().is_empty() =>
            {
                open = None
            }
            None if !run.is_empty() => open = Some(t.trim_end()),
            _ => {}
        }
    }
    open
}

/// The fence a line starts with: three or more backticks or tildes (empty: none).
pub fn fence_of(line: &str) -> &str {
    let Some(c) = line.chars().next().filter(|c| *c == '`' || *c == '~') else { return "" };
    let run = &line[..line.find(|x| x != c).unwrap_or(line.len())];
    if run.len() >= 3 { run } else { "" }
}

/// `cut`, moved back so that the last line, a heading or a table row, is not half-typed,
/// and a table shows only once its header and delimiter rows are whole.
fn whole_lines(text: &str, cut: usize) -> usize {
    let line_start = text[..cut].rfind('\n').map_or(0, |i| i + 1);
    let last = text[line_start..cut].trim_start();
    let tabular = |l: &str| l.trim_start().starts_with('|');
    let half = !last.is_empty() && !text[cut..].starts_with('\n');
    let cut = if half && (last.starts_with('#') || tabular(last)) { line_start } else { cut };
    let before = text[..cut].trim_end_matches('\n');
    let rows: Vec<&str> = before.lines().rev().take_while(|l| tabular(l)).collect();
    match rows.as_slice() {
        [header] => before.len() - header.len(),
        _ => cut,
    }
}

/// In the last paragraph of `text`: where a half-written link starts (the text is cut
/// there), and the closers of the emphasis and code spans still open before it.
fn inline_open(text: &str) -> (usize, String) {
    let para = text.rfind("\n\n").map_or(0, |i| i + 2);
    let mut open: Vec<(usize, &str)> = Vec::new();
    // A link being written: where its `[` is, and whether its `](` has come.
    let mut link: Option<(usize, bool)> = None;
    let mut i = para;
    while let Some(c) = text[i..].chars().next() {
        let rest = &text[i..];
        let in_code = open.last().is_some_and(|(_, d)| *d == "`");
        let delim = ["**", "__", "~~", "`", "*", "_"].into_iter().find(|d| rest.starts_with(d));
        match (delim, link) {
            (Some("`"), _) if in_code => {
                open.pop();
            }
            _ if in_code => {}
            (_, Some((_, true))) => link = link.filter(|_| c != ')'),
            (Some(d), _) => {
                let before = text[..i].chars().next_back();
                let after = rest[d.len()..].chars().next();
                let in_word = d.starts_with('_') && before.is_some_and(char::is_alphanumeric);
                let bullet = d == "*" && (i == para || before == Some('\n')) && after == Some(' ');
                if open.last().is_some_and(|(_, o)| *o == d) {
                    open.pop();
                } else if !in_word && !bullet && after.is_some_and(|a| !a.is_whitespace()) {
                    open.push((i, d));
                }
                i += d.len();
                continue;
            }
            (None, None) if c == '[' => link = Some((i, false)),
            (None, Some((at, false))) if c == ']' => link = rest.starts_with("](").then_some((at, true)),
            _ => {}
        }
        i += c.len_utf8();
    }
    let cut = link.map_or(text.len(), |(at, _)| at);
    let closer = open.iter().rev().filter(|(at, _)| *at < cut).map(|(_, d)| *d).collect();
    (cut, closer)
}

#[cfg(test)]
mod tests;
