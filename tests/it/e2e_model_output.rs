//! What real models send, from the scripted model against a real Synapse: the same call
//! twice in one reply, a call cut off by the token limit, arguments that are not JSON,
//! text before (and between) a reply's calls, word salad, streamed and not.

use serde_json::{Value, json};

use richbot::strings;

use crate::support::llm::{Step, salad, text};
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
    assert_eq!(bodies(&posted), ["Paris: 12 °C, cloudy", "Rome: 12 °C, cloudy"], "{posted:#?}");
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
async fn a_model_that_gives_up_after_its_cut_call_leaves_the_member_told_why_not_in_silence() {
    let env = Env::start().await;
    let whole = weather("Lisbon").to_string();
    // Told its call was cut, the model ends its turn with "no reply" having posted nothing
    // (the real small model does).
    env.llm.script([Step::Length(vec![("rich_send".into(), whole[..whole.len() / 2].to_owned())]), text("[no reply]")]);
    let room = env.dm().await;
    env.alice.say(&room, "weather in Lisbon?").await;
    let turns = env.wait_turns(&room, 1).await;
    assert_eq!(turns[0].0, "unfinished: the model gave no answer after its tool call was cut off");
    assert_eq!(bodies(&env.alice.messages_from(&room, BOT).await), [richbot::strings::MODEL_CUT_OFF]);

    // Having posted its answer, it may end so: nothing more is said.
    env.llm.script([
        Step::Length(vec![("rich_send".into(), whole[..whole.len() / 2].to_owned())]),
        Step::Calls(vec![("rich_send".into(), whole.clone())]),
        text("[no reply]"),
    ]);
    let room = env.dm().await;
    env.alice.say(&room, "weather in Lisbon?").await;
    assert_eq!(env.wait_turns(&room, 1).await[0].0, "no_reply");
    assert_eq!(bodies(&env.alice.messages_from(&room, BOT).await), ["Lisbon: 12 °C, cloudy"]);
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
        // Small models copy the marker in another case: it is still no reply.
        env.llm.script([Step::Mixed(pieces(), calls()), text("[No reply]")]);
        let room = env.dm().await;
        env.alice.say(&room, "weather in Paris and Rome?").await;
        assert_eq!(env.wait_turns(&room, 1).await[0].0, "no_reply");
        let posted = env.alice.messages_from(&room, BOT).await;
        assert_eq!(
            bodies(&posted),
            ["Here is the weather for both.", "Paris: 12 °C, cloudy", "Rome: 12 °C, cloudy"],
            "streamed {streamed}: {posted:#?}"
        );
        let last = env.llm.requests().pop().expect("a request");
        let reply =
            last["messages"].as_array().into_iter().flatten().rfind(|m| m["role"] == "assistant").expect("the reply");
        assert_eq!(reply["content"], "Here is the weather for both.", "the model's own text goes back with its calls");
        assert_eq!(reply["tool_calls"].as_array().map(Vec::len), Some(2));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_endpoint_refuses_for_its_tools_is_told_as_misconfiguration_and_not_retried_unstreamed_for_good()
{
    let env = Env::start().await;
    // As llama-server answers a schema it cannot turn into a grammar, streamed or not.
    env.llm.respond_with(|_| Step::Status(400));
    let dm = env.dm().await;
    env.alice.say(&dm, "hello?").await;
    let turns = env.wait_turns(&dm, 1).await;
    assert!(
        turns[0].0.starts_with("misconfigured: ") && turns[0].0.contains("HTTP 400: scripted failure"),
        "{}",
        turns[0].0
    );
    let said = env.alice.messages_from(&dm, BOT).await;
    let body = said[0]["content"]["body"].as_str().unwrap_or_default();
    assert!(body.contains("misconfigured") && !body.contains("try again in a little while"), "{body}");
    // Refused streamed, then unstreamed: the request, not streaming, was refused, so the
    // next question streams again.
    env.llm.respond_with(|_| text("Fixed."));
    env.alice.say(&dm, "and now?").await;
    env.wait_turns(&dm, 2).await;
    let streamed: Vec<bool> = env.llm.requests().iter().map(|r| r["stream"] == true).collect();
    assert_eq!(streamed, [true, false, true]);
}

/// `richbot check --model` on the environment's config: (exit status, the model's line).
async fn check_model(env: &Env) -> (bool, String) {
    // The running serve sets the devices up; until then check's encryption line fails.
    crate::e2e_encrypted::devices_ready(env).await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_richbot"))
        .args(["check", "--model", "--config", env.config_path.to_str().expect("utf8")])
        .output()
        .await
        .expect("richbot check");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = stdout.lines().find(|l| l.contains(" model test-model: ")).unwrap_or_default().to_owned();
    (out.status.success(), format!("{line}\n--- all:\n{stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_model_warns_of_a_model_that_answers_in_text_and_fails_an_endpoint_that_refuses_the_tools() {
    let env = Env::start().await;
    env.llm.script([text("It is sunny in Lisbon, 21 °C.")]);
    let (passed, said) = check_model(&env).await;
    assert!(
        passed
            && said.starts_with(
                "WARN model test-model: answered with text, no tool call; richbot will post plain answers\n"
            ),
        "{said}"
    );
    // Asked with the persona's real prompt and the rich tools, as a turn asks.
    let asked = env.llm.requests().pop().expect("the question");
    let messages = asked["messages"].as_array().expect("messages");
    assert!(messages[0]["content"].as_str().is_some_and(|s| s.starts_with("You are Richbot.")), "{asked}");
    assert_eq!(messages.last().expect("a question")["content"], richbot::check::MODEL_QUESTION);
    let tools: Vec<&str> =
        asked["tools"].as_array().into_iter().flatten().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert_eq!(tools, ["rich_send", "rich_edit", "rich_poll", "rich_poll_end", "schedule", "schedules", "unschedule"]);

    env.llm.script([Step::Status(400)]);
    let (passed, said) = check_model(&env).await;
    assert!(
        !passed
            && said.starts_with(
                "FAIL model test-model: the endpoint refused the tool schema (HTTP 400: scripted failure)\n"
            ),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_server_cannot_read_is_a_cut_call_never_retried_and_twice_ends_the_turn_in_one_sentence() {
    let env = Env::start().await;
    for streamed in [true, false] {
        if !streamed {
            env.llm.refuse_streaming();
        }
        // Once: the model hears it was cut and answers.
        env.llm.script([Step::Unreadable, text("Lisbon: 21 °C and sunny.")]);
        let before = env.llm.requests().len();
        let room = env.dm().await;
        env.alice.say(&room, "weather in Lisbon?").await;
        assert_eq!(env.wait_turns(&room, 1).await[0].0, "answered", "streamed {streamed}");
        let requests = env.llm.requests();
        // Unstreamed, the first request is the streamed one the endpoint refuses.
        let asked = requests.len() - before - usize::from(!streamed);
        assert_eq!(asked, 2, "streamed {streamed}: asked again once, never retried as an outage");
        let last = &requests[requests.len() - 1];
        let cut = tool_results(last)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("streamed {streamed}: {:#}", last["messages"]));
        assert_eq!(cut["code"], "cut_off", "{cut}");
        assert!(cut["error"].as_str().is_some_and(|e| e.contains("could not read your tool call")), "{cut}");
        assert_eq!(bodies(&env.alice.messages_from(&room, BOT).await), ["Lisbon: 21 °C and sunny."]);

        // Twice: the turn ends, and the member reads what happened, not "can't reach".
        env.llm.script([Step::Unreadable, Step::Unreadable]);
        let before = env.llm.requests().len();
        let room = env.dm().await;
        env.alice.say(&room, "weather in Lisbon?").await;
        let turns = env.wait_turns(&room, 1).await;
        assert_eq!(turns[0].0, "unfinished: the model's tool calls were cut off twice", "streamed {streamed}");
        assert_eq!(env.llm.requests().len() - before, 2, "streamed {streamed}");
        let told = bodies(&env.alice.messages_from(&room, BOT).await);
        assert_eq!(told, [richbot::strings::MODEL_CUT_OFF], "streamed {streamed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_call_again_is_not_run_and_the_third_time_ends_the_turn_with_what_it_has() {
    let env = Env::start().await;
    // A model that sends the same message whatever it hears: posted once.
    env.llm.respond_with(|_| Step::Calls(vec![("rich_send".into(), weather("Paris").to_string())]));
    let room = env.dm().await;
    env.alice.say(&room, "weather in Paris?").await;
    let turns = env.wait_turns(&room, 1).await;
    assert_eq!((turns[0].0.as_str(), turns[0].1), ("unfinished: the model made the same rich_send call 3 times", 3));
    let posted = env.alice.messages_from(&room, BOT).await;
    assert_eq!(bodies(&posted), ["Paris: 12 °C, cloudy"], "once, and no notice after an answer: {posted:#?}");
    let again = &tool_results(&env.llm.requests()[2])[1];
    assert_eq!(again["code"], "repeated", "{again}");

    // One that keeps making a call that fails: nothing was answered, so the member is told.
    let edit = json!({"event_id": "$nothing", "payload": weather("Rome")["payload"], "fallback": "Rome"});
    env.llm.respond_with(move |_| Step::Calls(vec![("rich_edit".into(), edit.to_string())]));
    let room = env.dm().await;
    env.alice.say(&room, "weather in Rome?").await;
    assert!(env.wait_turns(&room, 1).await[0].0.starts_with("unfinished: the model made the same rich_edit call"));
    assert_eq!(bodies(&env.alice.messages_from(&room, BOT).await), [richbot::strings::MODEL_REPEATING]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn word_salad_is_never_posted_nor_shown_to_the_model_again_and_an_endpoint_may_refuse_the_odds() {
    let env = Env::start().await;
    for streamed in [true, false] {
        if !streamed {
            env.llm.refuse_streaming();
        }
        env.llm.script([salad(30), text("Lisbon is the capital of Portugal.")]);
        let room = env.dm().await;
        env.alice.say(&room, "Qual é a capital de Portugal?").await;
        assert_eq!(env.wait_turns(&room, 1).await[0].0, "answered");
        let posted = env.alice.messages_from(&room, BOT).await;
        assert_eq!(bodies(&posted), ["Lisbon is the capital of Portugal."], "streamed {streamed}: {posted:#?}");
        let requests = env.llm.requests();
        let (first, again) = (&requests[requests.len() - 2], &requests[requests.len() - 1]);
        assert_eq!((&first["logprobs"], &first["top_logprobs"]), (&json!(true), &json!(1)), "the odds are asked for");
        let sent = again["messages"].as_array().expect("messages");
        assert!(!again["messages"].to_string().contains("Overrideumo"), "the model never reads its salad again");
        let last = sent.last().expect("a message");
        assert_eq!((last["role"].as_str(), last["content"].as_str()), (Some("user"), Some(strings::CORRECT_BABBLE)));
    }
    // llama.cpp's server refuses `logprobs` with tools and streaming, and takes its own
    // `n_probs`: salad is caught there too.
    env.llm.refuse_logprobs("logprobs is not supported with tools + stream");
    env.llm.script([salad(30), text("Lisboa.")]);
    let room = env.dm().await;
    env.alice.say(&room, "Qual é a capital de Portugal?").await;
    assert_eq!(env.wait_turns(&room, 1).await[0].0, "answered");
    assert_eq!(bodies(&env.alice.messages_from(&room, BOT).await), ["Lisboa."]);
    // An endpoint that refuses both answers without them, now and from then on.
    env.llm.refuse_n_probs();
    for answer in ["Olá!", "Tudo bem."] {
        env.llm.script([text(answer)]);
        let room = env.dm().await;
        env.alice.say(&room, "Olá").await;
        assert_eq!(env.wait_turns(&room, 1).await[0].0, "answered");
        assert_eq!(bodies(&env.alice.messages_from(&room, BOT).await), [answer]);
    }
    let requests = env.llm.requests();
    let asked: Vec<(bool, Option<i64>)> = requests[requests.len() - 6..]
        .iter()
        .map(|r| (r.get("logprobs").is_some(), r.get("n_probs").and_then(Value::as_i64)))
        .collect();
    let (openai, llama, none) = ((true, None), (false, Some(1)), (false, None));
    assert_eq!(asked, [openai, llama, llama, llama, none, none], "each way refused once, then never asked again");
}
