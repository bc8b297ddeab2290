//! Who may change a room's settings (`!mode`, `!reset` in a group room), from the room's
//! state, by the room version's rules. Pure, and table-tested.
//!
//! - Creators outrank every power level in the room versions of MSC4289 (12 and later,
//!   and its unstable `org.matrix.hydra.11`): the create event's sender and its
//!   `additional_creators`.
//! - Otherwise the `m.room.power_levels` event: `users[user]`, else `users_default`
//!   (0). Room versions before 10 allow levels as strings ("50"), which count as numbers.
//! - With no power levels event, the room's creator has 100 and everyone else 0 (the
//!   creator being the create event's `content.creator` before room version 11, its
//!   sender from then on).

use ruma::UserId;
use serde_json::Value;

/// A user's power in a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// A creator where creators outrank every level.
    Creator,
    Level(i64),
}

impl Power {
    pub fn at_least(self, level: i64) -> bool {
        match self {
            Power::Creator => true,
            Power::Level(l) => l >= level,
        }
    }
}

/// `user`'s power in the room whose current state is `state`.
pub fn power(state: &[Value], user: &UserId) -> Power {
    let of = |t: &str| state.iter().find(|e| e.get("type").and_then(Value::as_str) == Some(t));
    let create = of("m.room.create");
    let content = create.and_then(|c| c.get("content"));
    let version = content.and_then(|c| c.get("room_version")).and_then(Value::as_str).unwrap_or("1");
    let sender = create.and_then(|c| c.get("sender")).and_then(Value::as_str);
    let is = |v: Option<&str>| v == Some(user.as_str());
    if creators_outrank(version) {
        let additional = content.and_then(|c| c.get("additional_creators")).and_then(Value::as_array);
        if is(sender) || additional.is_some_and(|a| a.iter().any(|v| is(v.as_str()))) {
            return Power::Creator;
        }
    }
    let Some(levels) = of("m.room.power_levels").and_then(|p| p.get("content")) else {
        let creator = if numbered(version).is_some_and(|v| v >= 11) || creators_outrank(version) {
            sender
        } else {
            content.and_then(|c| c.get("creator")).and_then(Value::as_str)
        };
        return Power::Level(if is(creator) { 100 } else { 0 });
    };
    let default = levels.get("users_default").and_then(level).unwrap_or(0);
    Power::Level(levels.get("users").and_then(|u| u.get(user.as_str())).and_then(level).unwrap_or(default))
}

/// The level `m.room.power_levels` asks of a user who redacts another's event (its
/// `redact`, 50 by default).
pub fn redact_level(state: &[Value]) -> i64 {
    let levels = state.iter().find(|e| e.get("type").and_then(Value::as_str) == Some("m.room.power_levels"));
    levels.and_then(|p| p.get("content")?.get("redact")).and_then(level).unwrap_or(50)
}

/// A power level as a number, or as a string of one (room versions before 10).
fn level(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_str()?.trim().parse().ok())
}

fn numbered(version: &str) -> Option<u32> {
    version.parse().ok()
}

/// Whether creators outrank every power level in this room version (MSC4289).
fn creators_outrank(version: &str) -> bool {
    numbered(version).is_some_and(|v| v >= 12) || version == "org.matrix.hydra.11"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn create(version: &str, sender: &str, extra: Value) -> Value {
        let mut content = json!({"room_version": version, "creator": "@old:x"});
        if let (Some(c), Some(e)) = (content.as_object_mut(), extra.as_object()) {
            c.extend(e.clone());
        }
        json!({"type": "m.room.create", "state_key": "", "sender": sender, "content": content})
    }

    fn levels(users: Value, default: Value) -> Value {
        json!({"type": "m.room.power_levels", "state_key": "", "content": {"users": users, "users_default": default}})
    }

    #[test]
    fn power_follows_the_room_versions_rules() {
        let alice = ruma::user_id!("@alice:x");
        let cases: Vec<(&str, Vec<Value>, Power)> = vec![
            (
                "a level as a number",
                vec![create("10", "@c:x", json!({})), levels(json!({"@alice:x": 50}), json!(0))],
                Power::Level(50),
            ),
            (
                "a level as a string (v < 10)",
                vec![create("9", "@c:x", json!({})), levels(json!({"@alice:x": "50"}), json!(0))],
                Power::Level(50),
            ),
            (
                "a string default",
                vec![create("5", "@c:x", json!({})), levels(json!({}), json!(" 60 "))],
                Power::Level(60),
            ),
            (
                "not a number",
                vec![create("5", "@c:x", json!({})), levels(json!({"@alice:x": "lots"}), json!(0))],
                Power::Level(0),
            ),
            ("a v12 creator", vec![create("12", "@alice:x", json!({})), levels(json!({}), json!(0))], Power::Creator),
            (
                "a hydra creator",
                vec![create("org.matrix.hydra.11", "@alice:x", json!({})), levels(json!({}), json!(0))],
                Power::Creator,
            ),
            (
                "an additional creator",
                vec![create("12", "@c:x", json!({"additional_creators": ["@alice:x"]})), levels(json!({}), json!(0))],
                Power::Creator,
            ),
            (
                "a v11 creator has only the levels",
                vec![create("11", "@alice:x", json!({})), levels(json!({}), json!(0))],
                Power::Level(0),
            ),
            ("no levels: the v11 creator is the sender", vec![create("11", "@alice:x", json!({}))], Power::Level(100)),
            ("no levels: before v11, content.creator", vec![create("10", "@alice:x", json!({}))], Power::Level(0)),
            ("no levels, not the creator", vec![create("12", "@c:x", json!({}))], Power::Level(0)),
        ];
        for (what, state, want) in cases {
            assert_eq!(power(&state, alice), want, "{what}");
        }
        assert!(Power::Creator.at_least(i64::MAX) && Power::Level(50).at_least(50) && !Power::Level(49).at_least(50));
    }
}
