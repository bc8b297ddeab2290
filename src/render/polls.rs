//! A poll as every client shows it. Clients without MSC3381 (nheko, FluffyChat, most
//! bridges) draw nothing for a poll's start, so richbot posts it as a message too: its
//! question, its numbered answers and how to vote without a poll ("reply with a
//! number"). When the poll ends, its result is a message as well, a reply to that one.
//! Both are `m.notice`s: richbot's words, not the model's, which bots never answer.

use ruma::EventId;
use serde_json::{Value, json};

use super::blocks::doc::{Node, Span, html, plain};

/// How a member votes in a client that draws no poll.
pub const HOW_TO_VOTE: &str = "Vote in the poll, or reply with a number.";

/// The message that shows a poll: `ends_in_secs` when it ends by itself.
pub fn poll_message(question: &str, answers: &[String], disclosed: bool, ends_in_secs: Option<u64>) -> Value {
    let mut how = HOW_TO_VOTE.to_owned();
    if let Some(secs) = ends_in_secs {
        how.push_str(&format!(" It ends in {}.", lasting(secs)));
    }
    if !disclosed {
        how.push_str(" The votes are shown when it ends.");
    }
    let nodes = [
        Node::Title(vec![Span::deco("📊 "), Span::fact(question)]),
        Node::List { ordered: true, items: answers.iter().map(|a| vec![Span::fact(a.as_str())]).collect() },
        Node::Line(vec![Span::deco(how).em()]),
    ];
    notice(&nodes, None)
}

/// The message that says a poll's result: `counts` per answer (in order), `result` in
/// words, a reply to `shown_by` (the poll's message) when there is one.
pub fn result_message(question: &str, counts: &[(String, usize)], result: &str, shown_by: Option<&EventId>) -> Value {
    let votes = |n: usize| if n == 1 { "1 vote".to_owned() } else { format!("{n} votes") };
    let nodes = [
        Node::Title(vec![Span::deco("📊 "), Span::fact(question)]),
        Node::Line(vec![Span::deco(format!("The poll has ended. {result}"))]),
        Node::List {
            ordered: true,
            items: counts
                .iter()
                .map(|(a, n)| vec![Span::fact(a.as_str()), Span::deco(format!(": {}", votes(*n)))])
                .collect(),
        },
    ];
    notice(&nodes, shown_by)
}

fn notice(nodes: &[Node], reply_to: Option<&EventId>) -> Value {
    let mut content = json!({
        "msgtype": "m.notice",
        "body": plain(nodes),
        "format": "org.matrix.custom.html",
        "formatted_body": html(nodes),
        "m.mentions": {},
    });
    if let Some(to) = reply_to {
        content["m.relates_to"] = json!({"m.in_reply_to": {"event_id": to}});
    }
    content
}

/// A span of time in words, rounded: "90 seconds", "10 minutes", "2 hours", "3 days".
fn lasting(secs: u64) -> String {
    let (n, unit) = match secs {
        0..=119 => (secs, "second"),
        120..=7_199 => ((secs + 30) / 60, "minute"),
        7_200..=172_799 => ((secs + 1_800) / 3_600, "hour"),
        _ => ((secs + 43_200) / 86_400, "day"),
    };
    if n == 1 { format!("1 {unit}") } else { format!("{n} {unit}s") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_reads_in_any_client_with_how_to_vote() {
        let c = poll_message("Lunch <now>?", &["Pizza".into(), "Sushi & rice".into()], false, Some(600));
        assert_eq!(c["msgtype"], "m.notice");
        assert_eq!(
            c["body"],
            "📊 Lunch <now>?\n1. Pizza\n2. Sushi & rice\nVote in the poll, or reply with a number. It ends in 10 \
             minutes. The votes are shown when it ends."
        );
        let html = c["formatted_body"].as_str().expect("html");
        assert!(
            html.starts_with(
                "<p><strong>📊 Lunch &lt;now&gt;?</strong></p><ol><li>Pizza</li><li>Sushi &amp; rice</li></ol>"
            ),
            "{html}"
        );
        assert!(html.contains("<em>Vote in the poll, or reply with a number."), "{html}");
        assert!(c.get("m.relates_to").is_none());
    }

    #[test]
    fn a_result_replies_to_the_polls_message_with_every_answers_count() {
        let shown = EventId::parse("$shown:x").expect("id");
        let counts = [("Pizza".to_owned(), 2), ("Sushi".to_owned(), 1)];
        let c = result_message("Lunch?", &counts, "Top answer: Pizza (2 votes).", Some(&shown));
        assert_eq!(
            c["body"],
            "📊 Lunch?\nThe poll has ended. Top answer: Pizza (2 votes).\n1. Pizza: 2 votes\n2. Sushi: 1 vote"
        );
        assert_eq!(c["m.relates_to"]["m.in_reply_to"]["event_id"], "$shown:x");
    }

    #[test]
    fn spans_of_time_read_rounded() {
        let cases = [
            (45, "45 seconds"),
            (60, "60 seconds"),
            (600, "10 minutes"),
            (3_600, "60 minutes"),
            (7_200, "2 hours"),
            (86_400, "24 hours"),
            (259_200, "3 days"),
        ];
        for (secs, words) in cases {
            assert_eq!(lasting(secs), words, "{secs}");
        }
    }
}
