use serde_json::json;

use super::*;
use crate::schedules::when::time;

const NOW: &str = "2026-12-05T10:00:30Z";

fn now() -> i64 {
    time(NOW).expect("time")
}

fn lisbon() -> Tz {
    when::zone("Europe/Lisbon").expect("zone")
}

fn check(args: Value) -> Result<ScheduleCall, ToolError> {
    plan_schedule(SCHEDULE, &args, CallTime::now(now()), lisbon(), &Bounds::default())
}

fn error_at(args: Value) -> (String, String) {
    let e = check(args.clone()).expect_err(&args.to_string());
    (e.path.unwrap_or_default(), e.error)
}

#[test]
fn a_one_off_text_and_a_weekly_prompt_in_the_askers_zone_are_made() {
    let once = check(json!({"at": "2026-12-06T09:00:00+00:00", "message": "Stand-up!", "title": "Stand-up"}));
    assert_eq!(
        once,
        Ok(ScheduleCall::Create(NewSchedule {
            when: When::At(time("2026-12-06T09:00:00Z").expect("time")),
            body: Body::Text("Stand-up!".into()),
            room: RoomTarget::Here,
            title: Some("Stand-up".into()),
        }))
    );
    let Ok(ScheduleCall::Create(weekly)) = check(
        json!({"every": "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0", "prompt": "Sum up the sprint", "room": "dm"}),
    ) else {
        panic!("made")
    };
    assert_eq!(weekly.body, Body::Prompt("Sum up the sprint".into()));
    assert_eq!(weekly.room, RoomTarget::Dm);
    // No tz given: the asker's; no start: this minute.
    let next = weekly.when.after(now(), 2);
    let shown: Vec<String> = next.iter().map(|t| when::rfc3339_in(*t, lisbon())).collect();
    assert_eq!(shown, ["2026-12-07T09:00:00+00:00", "2026-12-14T09:00:00+00:00"]);
}

#[test]
fn a_delay_is_a_time_counted_from_the_persons_words() {
    // "Remind me in 2 minutes": small models give the delay, not a computed time.
    let Ok(ScheduleCall::Create(soon)) = check(json!({"at": "in 2 minutes", "message": "Stretch!"})) else {
        panic!("made")
    };
    assert_eq!(soon.when, When::At(now() + 120_000));
    // Asked 73 s before the (slow) model made the call: still two minutes from the words.
    let asked = CallTime { asked: now() - 73_000, now: now() };
    let args = json!({"at": "in 2 minutes", "message": "Stretch!"});
    let Ok(ScheduleCall::Create(late)) = plan_schedule(SCHEDULE, &args, asked, lisbon(), &Bounds::default()) else {
        panic!("made")
    };
    assert_eq!(late.when, When::At(now() + 47_000));
    // And a text message as an object of its text alone.
    let Ok(ScheduleCall::Create(texted)) = check(json!({"at": "in 1 minute", "message": {"text": "Stretch!"}})) else {
        panic!("made")
    };
    assert_eq!(texted.body, Body::Text("Stretch!".into()));
    // A tz beside at reads a local time without an offset (and a delay ignores it).
    let Ok(ScheduleCall::Create(local)) =
        check(json!({"at": "2026-12-07T09:00", "tz": "Europe/Berlin", "message": "x"}))
    else {
        panic!("made")
    };
    assert_eq!(local.when, When::At(time("2026-12-07T08:00:00Z").expect("time")));
    let Ok(ScheduleCall::Create(later)) = check(json!({"at": "in 1 minute", "tz": "UTC", "message": "x"})) else {
        panic!("made")
    };
    assert_eq!(later.when, When::At(now() + 60_000));
    let (path, error) = error_at(json!({"message": "Stretch!"}));
    assert_eq!(path, "at");
    assert!(error.contains("in 2 minutes"), "{error}");
}

#[test]
fn a_rich_message_is_checked_now_as_rich_send_checks_it() {
    let payload = json!({"v": 1, "blocks": [{"type": "details", "summary": "Sprint", "body": "Review at 10"}]});
    let made = check(
        json!({"at": "2026-12-06T09:00:00Z", "message": {"payload": payload, "fallback": "Sprint: review at 10"}}),
    );
    let Ok(ScheduleCall::Create(NewSchedule { body: Body::Rich { fallback, .. }, .. })) = made else {
        panic!("{made:?}")
    };
    assert_eq!(fallback, "Sprint: review at 10");
    let broken = json!({"v": 1, "blocks": [{"type": "nonsense"}]});
    let (path, _) = error_at(json!({"at": "2026-12-06T09:00:00Z", "message": {"payload": broken, "fallback": "x"}}));
    assert!(path.starts_with("message.payload"), "{path}");
}

#[test]
fn bad_input_is_refused_at_its_path_with_what_to_do() {
    let cases = [
        (json!({"every": "FREQ=DAILY", "tz": "Mars/Olympus", "message": "x"}), "tz", "unknown time zone"),
        (json!({"every": "FREQ=SECONDLY;INTERVAL=10", "message": "x"}), "every", "schedules.min_interval_secs"),
        (json!({"every": "FREQ=MINUTELY;BYSECOND=0,30", "message": "x"}), "every", "at most every 60 s"),
        (json!({"at": "2026-12-05T09:00:00Z", "message": "x"}), "at", "in the past"),
        (json!({"at": "2028-01-01T09:00:00Z", "message": "x"}), "at", "more than a year ahead"),
        (json!({"every": "FREQ=DAILY", "start": "2028-01-01T09:00:00Z", "message": "x"}), "start", "a year"),
        (json!({"at": "tomorrow 9am", "message": "x"}), "at", "RFC 3339"),
        (json!({"every": "every monday", "message": "x"}), "every", "RFC 5545"),
        (json!({"at": "2026-12-06T09:00:00Z", "every": "FREQ=DAILY", "message": "x"}), "every", "not both"),
        (json!({"message": "x"}), "at", "say when"),
        (json!({"at": "2026-12-06T09:00:00Z"}), "message", "say what"),
        (json!({"at": "2026-12-06T09:00:00Z", "message": "x", "prompt": "y"}), "prompt", "not both"),
        (
            json!({"at": "2026-12-06T09:00:00Z", "start": "2026-12-06T08:00:00Z", "message": "x"}),
            "start",
            "goes with every",
        ),
        (json!({"at": "2026-12-06T09:00:00", "tz": "Mars/Olympus", "message": "x"}), "tz", "unknown time zone"),
        (json!({"at": "2026-12-06T09:00:00Z", "message": 7}), "message", "text or"),
        (json!({"at": "2026-12-06T09:00:00Z", "prompt": " "}), "prompt", "empty"),
        (json!({"at": "2026-12-06T09:00:00Z", "message": "x", "when": "soon"}), "when", "unknown argument"),
        (
            json!({"every": "FREQ=YEARLY;COUNT=1", "start": "2025-01-01T00:00:00Z", "message": "x"}),
            "every",
            "never fires",
        ),
    ];
    for (args, path, says) in cases {
        let (at, error) = error_at(args.clone());
        assert_eq!(at, path, "{args}: {error}");
        assert!(error.contains(says), "{args}: {error}");
    }
    let e = plan_schedule(UNSCHEDULE, &json!({"id": "twelve"}), CallTime::now(now()), lisbon(), &Bounds::default())
        .expect_err("id");
    assert_eq!(e.path.as_deref(), Some("id"));
    let e = plan_schedule(SCHEDULES, &json!({"all_rooms": "yes"}), CallTime::now(now()), lisbon(), &Bounds::default())
        .expect_err("bool");
    assert_eq!(e.path.as_deref(), Some("all_rooms"));
}

#[test]
fn ids_and_flags_may_come_quoted_as_models_write_them() {
    let plan = |name, args: Value| plan_schedule(name, &args, CallTime::now(now()), lisbon(), &Bounds::default());
    for id in [json!(4), json!("4"), json!(" 4"), json!(4.0), json!("4.0")] {
        assert!(matches!(plan(UNSCHEDULE, json!({ "id": id })), Ok(ScheduleCall::Cancel { id: 4 })), "{id}");
    }
    assert!(matches!(plan(SCHEDULES, json!({"all_rooms": "true"})), Ok(ScheduleCall::List { all_rooms: true })));
    assert!(plan(UNSCHEDULE, json!({"id": "0"})).is_err(), "no schedule 0");
}

#[test]
fn a_lower_min_interval_lets_a_rule_fire_that_often() {
    let bounds = Bounds { min_interval: std::time::Duration::from_secs(5), ..Bounds::default() };
    let args = json!({"every": "FREQ=SECONDLY;INTERVAL=10", "message": "tick"});
    assert!(matches!(
        plan_schedule(SCHEDULE, &args, CallTime::now(now()), lisbon(), &bounds),
        Ok(ScheduleCall::Create(_))
    ));
}

#[test]
fn a_body_round_trips_through_its_stored_form() {
    for body in [
        Body::Text("hi".into()),
        Body::Prompt("check the deploy".into()),
        Body::Rich { payload: json!({"v": 1, "blocks": []}), fallback: "f".into() },
    ] {
        assert_eq!(Body::from_value(&body.to_value()), Some(body.clone()));
    }
}
