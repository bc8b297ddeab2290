//! What real models send, from the scripted model against a real Synapse: the same call
//! twice in one reply, a call cut off by the token limit, arguments that are not JSON,
//! text before (and between) a reply's calls, streamed and not.

use serde_json::{Value, json};

use crate::support::llm::{Step, text};
use crate::support::{BOT, Env};

fn weather(city: &str) -> Value {
    json!({"payload": {"v": 1, "blocks": [{"type": "weather", "location": city, "temp": "12", "unit": "C", "condition": "Cloudy"}]},
           "fallback": format!("**{city}**: 12 °C, cloudy")})
}

/// The tool results a request carries, in order, parsed.
fn tool_results(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap_or_default()).unwrap_or(Value::Null))
        .collect()
}

fn bodies(messages: &[Value]) -> Vec<String> {
    messages.iter().map(|m| m["content"]["body"].as_str().unwrap_or_default().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_call_twice_in_one_reply_posts_once_and_both_hear_its_event_id() {
    let env = Env::start().await;
    // The second is the same call written with other spacing and key order.
    let twice = weather("Paris").to_string();
    let again = serde_json::to_string_pretty(&weather("Paris")).expect("json");
    let other = weather("Rome").to_string();
    env.llm.script([
        Step::Calls(vec![("rich_send".into(), twice), ("rich_send".into(), again), ("rich_send".into(), other)]),
        text("[no reply]"),
    ]);
    let room = env.dm().await;
    env.alice.say(&room, "weather in Paris?").await;
    assert_eq!(env.wait_turns(&room, 1).await[0].0, "no_reply");
    let posted = env.alice.messages_from(&room, BOT).await;
    assert_eq!(bodies(&posted), ["**Paris**: 12 °C, cloudy", "**Rome**: 12 °C, cloudy"], "{posted:#?}");
    let results = tool_results(&env.llm.requests()[1]);
    assert_eq!(results.len(), 3, "every call has its result: {results:?}");
    assert_eq!(results[0]["event_id"], posted[0]["event_id"]);
    assert_eq!(results[1], results[0], "the repeat hears the first's result");
    assert_eq!(results[2]["event_id"], posted[1]["event_id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_by_the_token_limit_or_not_json_is_never_run_and_the_model_hears_why() {
    let env = Env::start().await;
    let whole = weather("Lisbon").to_string();
    let cut = whole[..whole.len() / 2].to_owned();
    for streamed in [true, false] {
        if !streamed {
            env.llm.refuse_streaming();
        }
        env.llm.script([
            Step::Length(vec![("rich_send".into(), cut.clone())]),
            Step::Calls(vec![("rich_send".into(), "{\"payload\": {\"v\": 1,, }".into())]),
            text("Sorry, I could not draw it."),
        ]);
        let room = env.dm().await;
        env.alice.say(&room, "weather in Lisbon?").await;
        assert_eq!(env.wait_turns(&room, 1).await[0].0, "answered");
        let posted = env.alice.messages_from(&room, BOT).await;
        assert_eq!(bodies(&posted), ["Sorry, I could not draw it."], "streamed {streamed}: nothing half-made went out");
        let requests = env.llm.requests();
        let (second, third) = (&requests[requests.len() - 2], &requests[requests.len() - 1]);
        let cut_off = &tool_results(second)[0];
        assert_eq!(cut_off["code"], "cut_off", "streamed {streamed}: {cut_off}");
        assert!(cut_off["error"].as_str().is_some_and(|e| e.contains("send a shorter one")), "{cut_off}");
        let broken = tool_results(third).pop().expect("a result");
        assert_eq!(broken["code"], "invalid_arguments", "{broken}");
        assert!(broken["error"].as_str().is_some_and(|e| e.contains("not valid JSON")), "{broken}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_before_and_between_a_replys_calls_is_posted_once_before_the_rich_messages() {
    let env = Env::start().await;
    let pieces = || vec!["Here is ".to_owned(), "the weather ".to_owned(), "for both.".to_owned()];
    let calls = || {
        vec![
            ("rich_send".to_owned(), weather("Paris").to_string()),
            ("rich_send".to_owned(), weather("Rome").to_string()),
        ]
    };
    for streamed in [true, false] {
        if !streamed {
            env.llm.refuse_streaming();
        }
        env.llm.script([Step::Mixed(pieces(), calls()), text("[no reply]")]);
        let room = env.dm().await;
        env.alice.say(&room, "weather in Paris and Rome?").await;
        assert_eq!(env.wait_turns(&room, 1).await[0].0, "no_reply");
        let posted = env.alice.messages_from(&room, BOT).await;
        assert_eq!(
            bodies(&posted),
            ["Here is the weather for both.", "**Paris**: 12 °C, cloudy", "**Rome**: 12 °C, cloudy"],
            "streamed {streamed}: {posted:#?}"
        );
        let last = env.llm.requests().pop().expect("a request");
        let reply =
            last["messages"].as_array().into_iter().flatten().rfind(|m| m["role"] == "assistant").expect("the reply");
        assert_eq!(reply["content"], "Here is the weather for both.", "the model's own text goes back with its calls");
        assert_eq!(reply["tool_calls"].as_array().map(Vec::len), Some(2));
    }
}
