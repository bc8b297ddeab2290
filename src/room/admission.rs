//! Who may invite the personas and talk to them (`[access]`), as one decision: a user is
//! admitted by an `allow` pattern and not refused by a `deny` one. Pure.
//!
//! A wildcard pattern (`*:example.org`, the default) never admits a guest (a numeric
//! localpart, as Synapse gives guests) nor a user of another appservice's exclusive
//! namespace (read from its registration, `access.other_registrations`): those are other
//! programs' users or anonymous visitors, not members who asked for the bot. A pattern
//! naming a user exactly admits them anyway.

use regex::Regex;

/// The compiled `[access]` rules.
#[derive(Debug, Clone, Default)]
pub struct Admission {
    /// `allow`, each with whether it has a wildcard.
    allow: Vec<(Regex, bool)>,
    /// `deny`, and the other appservices' exclusive user namespaces.
    deny: Vec<Regex>,
}

impl Admission {
    /// `allow`: compiled patterns and whether each had a `*`; `deny`: refused whatever.
    pub fn new(allow: Vec<(Regex, bool)>, deny: Vec<Regex>) -> Self {
        Self { allow, deny }
    }

    pub fn admits(&self, user: &str) -> bool {
        let stranger = is_guest(user);
        self.allow.iter().any(|(re, wild)| re.is_match(user) && !(*wild && stranger))
            && !self.deny.iter().any(|re| re.is_match(user))
    }
}

/// Whether `user` looks like a guest: a localpart of digits only.
fn is_guest(user: &str) -> bool {
    let local = user.strip_prefix('@').and_then(|u| u.split_once(':')).map_or("", |(l, _)| l);
    !local.is_empty() && local.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(p: &str) -> Regex {
        Regex::new(p).expect("pattern")
    }

    #[test]
    fn wildcards_admit_members_but_not_guests_or_other_appservices_users() {
        let a = Admission::new(
            vec![(re("^.*:example\\.org$"), true), (re("^@42:example\\.org$"), false)],
            vec![re("^@whatsapp_.*:example\\.org$")],
        );
        let cases = [
            ("@alice:example.org", true),
            ("@1234:example.org", false),
            ("@42:example.org", true),
            ("@whatsapp_4915:example.org", false),
            ("@alice:elsewhere.org", false),
            ("@a1:example.org", true),
        ];
        for (user, admitted) in cases {
            assert_eq!(a.admits(user), admitted, "{user}");
        }
    }
}
