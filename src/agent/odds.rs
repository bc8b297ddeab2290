//! How likely the model found its own words: the token log-probabilities an endpoint
//! reports when asked (`logprobs: true`), summed per reply.
//!
//! Why: a small local model now and then loses its thread and writes word salad
//! (`antonopoulos) WebSite comp.lang.Overrideumo`, Qwen2.5-Coder-1.5B on llama.cpp, most
//! often right after a tool result). Posted, the salad is also shown back to the model as
//! the persona's own earlier answer, and every later answer copies it. No test of the
//! text tells salad from an answer in several languages or a made-up word; the model's
//! own odds do. Measured on that model with Qwen's recommended sampling: its answers
//! average -0.03 (one sentence in Portuguese) to -0.92 (a surreal poem) per token, and
//! -1.35 at temperature 3; salad, -4.7 and below. A reply whose mean is under
//! [`BABBLE_MEAN`] over at least [`MIN_TOKENS`] tokens is babble: it is cut off as soon
//! as it is, never shown, and the model is asked again without it (`turn::answer::review`).
//!
//! An endpoint that reports no log-probabilities leaves a reply's odds unknown, and
//! nothing is judged; one that refuses them is asked another way, or not at all
//! ([`Asking`]).

use std::sync::atomic::{AtomicU8, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Tokens a reply needs before its odds say anything (and before it shows live, when
/// odds come: a few tokens at any mean prove nothing).
pub const MIN_TOKENS: u32 = 24;

/// The mean log-probability per token under which a reply is babble: e^-2.5, about one
/// chance in twelve for every token, where a fluent answer averages better than one in
/// three.
pub const BABBLE_MEAN: f64 = -2.5;

/// The log-probabilities of a reply's tokens, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Odds {
    pub tokens: u32,
    pub sum: f64,
}

impl Odds {
    /// Adds the tokens of one choice (a streamed chunk's, or a whole answer's):
    /// `choice.logprobs.content[].logprob`, as OpenAI, vLLM and llama.cpp report them.
    /// Returns whether the choice had any.
    pub fn add(&mut self, choice: &Value) -> bool {
        let Some(tokens) = choice.pointer("/logprobs/content").and_then(Value::as_array) else { return false };
        let mut any = false;
        for logprob in tokens.iter().filter_map(|t| t.get("logprob").and_then(Value::as_f64)) {
            // A server's "impossible" (-inf as -9999 or a huge negative) counts as very
            // unlikely, not as the whole sum.
            self.sum += logprob.clamp(-30.0, 0.0);
            self.tokens += 1;
            any = true;
        }
        any
    }

    /// The mean log-probability per token (0 with none).
    pub fn mean(&self) -> f64 {
        if self.tokens == 0 { 0.0 } else { self.sum / f64::from(self.tokens) }
    }

    /// Whether enough tokens came to judge them.
    pub fn enough(&self) -> bool {
        self.tokens >= MIN_TOKENS
    }

    /// Word salad: enough tokens, too unlikely on average.
    pub fn babble(&self) -> bool {
        self.enough() && self.mean() < BABBLE_MEAN
    }
}

/// How an endpoint is asked for the odds, shared by every clone of its client: OpenAI's
/// way (`logprobs`, one alternative a token: llama.cpp sends twenty unless told, about
/// 2 KB a token, and takes `top_logprobs: 0` as none at all); then llama.cpp's own
/// `n_probs`, once the endpoint refused the first (its server refuses `logprobs` with
/// tools and streaming, "logprobs is not supported with tools + stream", and reports
/// `n_probs` there in the same shape); then not at all, once it refused that too.
#[derive(Debug, Default)]
pub struct Asking(AtomicU8);

impl Asking {
    /// Adds the asking to a request `body`.
    pub fn ask(&self, body: &mut Value) {
        match self.0.load(Ordering::Relaxed) {
            0 => {
                body["logprobs"] = Value::Bool(true);
                body["top_logprobs"] = Value::from(1);
            }
            1 => body["n_probs"] = Value::from(1),
            _ => {}
        }
    }

    /// After the endpoint refused a request saying `why`: whether it refused the asking
    /// (then the next way is used from now on, and the request is to be made again).
    pub fn refused(&self, why: &str) -> bool {
        let why = why.to_ascii_lowercase();
        let now = self.0.load(Ordering::Relaxed);
        let theirs = match now {
            0 => why.contains("logprob"),
            1 => why.contains("n_probs"),
            _ => false,
        };
        if theirs {
            self.0.store(now + 1, Ordering::Relaxed);
        }
        theirs
    }
}

/// The odds of `choice`'s tokens, if it reports any.
pub fn of(choice: &Value) -> Option<Odds> {
    let mut odds = Odds::default();
    odds.add(choice).then_some(odds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn choice(logprobs: &[f64]) -> Value {
        let content: Vec<Value> =
            logprobs.iter().map(|l| json!({"token": "x", "logprob": l, "bytes": [120]})).collect();
        json!({"index": 0, "delta": {"content": "x"}, "logprobs": {"content": content}})
    }

    #[test]
    fn fluent_text_is_not_babble_and_word_salad_is_once_there_is_enough_of_it() {
        let mut fluent = Odds::default();
        for _ in 0..40 {
            fluent.add(&choice(&[-0.02, -0.9, -0.1]));
        }
        assert!(!fluent.babble(), "{fluent:?}");
        let mut salad = Odds::default();
        salad.add(&choice(&[-5.0; 23]));
        assert!(!salad.babble(), "23 tokens are not enough to judge");
        salad.add(&choice(&[-4.0]));
        assert!(salad.babble(), "{salad:?}");
        assert!((salad.mean() - (-119.0 / 24.0)).abs() < 1e-9);
    }

    #[test]
    fn an_endpoint_that_refuses_the_odds_is_asked_llama_cpps_way_then_not_at_all() {
        let asking = Asking::default();
        let asked = |a: &Asking| {
            let mut body = json!({});
            a.ask(&mut body);
            body
        };
        assert_eq!(asked(&asking), json!({"logprobs": true, "top_logprobs": 1}));
        assert!(!asking.refused("Unknown model: x"), "another refusal is not about the odds");
        assert!(asking.refused("logprobs is not supported with tools + stream"));
        assert_eq!(asked(&asking), json!({"n_probs": 1}));
        assert!(!asking.refused("logprobs is not supported with tools + stream"), "asked so once only");
        assert!(asking.refused("Unrecognized request argument supplied: n_probs"));
        assert_eq!(asked(&asking), json!({}));
        assert!(!asking.refused("Unrecognized request argument supplied: n_probs"));
    }

    #[test]
    fn a_choice_without_log_probabilities_says_nothing() {
        assert_eq!(of(&json!({"delta": {"content": "x"}})), None);
        assert_eq!(of(&json!({"delta": {"content": "x"}, "logprobs": null})), None);
        assert_eq!(of(&json!({"logprobs": {"content": []}})), None);
        assert_eq!(of(&choice(&[-0.5])), Some(Odds { tokens: 1, sum: -0.5 }));
        // -inf as servers write it counts as very unlikely, bounded.
        assert_eq!(of(&choice(&[-9999.0])), Some(Odds { tokens: 1, sum: -30.0 }));
    }
}
