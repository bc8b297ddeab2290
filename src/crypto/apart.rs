//! A crypto inbox row that keeps failing, taken apart. A row is one transaction's share
//! for a persona: to-device messages from many members (room keys among them), device
//! list changes and key counts. Set aside whole, one message the machine cannot take
//! would cost the persona every room key that came beside it. So after a row has failed
//! whole `inbox::ATTEMPTS` times, its pieces go through the machine
//! one at a time, in order: what it brought besides messages, then each message alone.
//! The first piece that fails is set aside alone and the row keeps the rest; the pieces
//! taken before it are taken again with the rest (the machine knows an Olm message by its
//! hash, and the rest is idempotent), so nothing but the failing piece is lost.

use super::pushed::Pushed;
use super::{Error, Settled};

/// What became of a row taken apart.
#[derive(Debug)]
pub enum Apart {
    /// Every piece was taken.
    Taken(Settled),
    /// A piece failed: it goes aside, the row keeps the rest.
    Failed(Box<Failed>),
}

/// The piece of a row that failed, with `error`; `rest`: what the row keeps (`None`:
/// nothing else); `settled`: what the pieces before it brought.
#[derive(Debug)]
pub struct Failed {
    pub settled: Settled,
    pub piece: Pushed,
    pub rest: Option<Pushed>,
    pub error: Error,
}

/// One piece of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    /// What the row brought besides to-device messages.
    Remainder,
    /// Its `n`th to-device message.
    Message(usize),
}

/// `row`'s pieces, in order.
fn pieces(row: &Pushed) -> Vec<Piece> {
    let remainder = !Pushed { to_device: Vec::new(), ..row.clone() }.is_empty();
    remainder.then_some(Piece::Remainder).into_iter().chain((0..row.to_device.len()).map(Piece::Message)).collect()
}

/// The piece `p` of `row` alone, and `row` without it.
fn split(row: &Pushed, p: Piece) -> (Pushed, Pushed) {
    match p {
        Piece::Remainder => (
            Pushed { to_device: Vec::new(), ..row.clone() },
            Pushed { to_device: row.to_device.clone(), ..Default::default() },
        ),
        Piece::Message(n) => {
            let mut rest = row.clone();
            let message = rest.to_device.remove(n);
            (Pushed { to_device: vec![message], ..Default::default() }, rest)
        }
    }
}

/// `row` through `receive` piece by piece, until one fails.
pub async fn take_apart<F, R>(row: &Pushed, mut receive: F) -> Apart
where
    F: FnMut(Pushed) -> R,
    R: std::future::Future<Output = Result<Settled, Error>>,
{
    let mut settled = Settled::default();
    for p in pieces(row) {
        let (piece, rest) = split(row, p);
        match receive(piece.clone()).await {
            Ok((keys, asks)) => {
                settled.0.extend(keys);
                settled.1.extend(asks);
            }
            Err(error) => {
                let rest = (!rest.is_empty()).then_some(rest);
                return Apart::Failed(Box::new(Failed { settled, piece, rest, error }));
            }
        }
    }
    Apart::Taken(settled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn message(sender: &str, kind: &str) -> serde_json::Value {
        json!({"type": kind, "sender": sender, "content": {"n": sender}})
    }

    /// A machine that takes every message but one of type `poison`, each room key
    /// bringing a key named after its sender.
    async fn fake(piece: Pushed, seen: std::sync::Arc<std::sync::Mutex<Vec<Pushed>>>) -> Result<Settled, Error> {
        seen.lock().expect("seen").push(piece.clone());
        let mut keys = Vec::new();
        for m in &piece.to_device {
            match m["type"].as_str() {
                Some("poison") => return Err(Error::Olm("the store cannot hold it".into())),
                Some("m.room_key") => keys.push(("!room".to_owned(), m["sender"].as_str().unwrap_or("").to_owned())),
                _ => {}
            }
        }
        Ok((keys, Vec::new()))
    }

    #[tokio::test]
    async fn only_the_failing_message_goes_aside_and_the_room_keys_beside_it_are_kept() {
        let mut row = Pushed {
            to_device: vec![
                message("@alice:x", "m.room_key"),
                message("@mallory:x", "poison"),
                message("@bob:x", "m.room_key"),
            ],
            ..Default::default()
        };
        row.device_lists.changed.push("@carol:x".into());
        let seen = std::sync::Arc::default();
        let Apart::Failed(failed) = take_apart(&row, |p| fake(p, Arc::clone(&seen))).await else {
            panic!("the poison fails")
        };
        let Failed { settled, piece, rest, error } = *failed;
        assert!(error.to_string().contains("cannot hold"), "{error}");
        assert_eq!(piece.to_device, [message("@mallory:x", "poison")], "the failing message alone");
        assert!(piece.device_lists.changed.is_empty());
        let rest = rest.expect("the rest stays");
        assert_eq!(rest.to_device, [message("@alice:x", "m.room_key"), message("@bob:x", "m.room_key")]);
        assert_eq!(rest.device_lists.changed, ["@carol:x"], "with what the row brought besides messages");
        assert_eq!(settled.0, [("!room".to_owned(), "@alice:x".to_owned())], "what came before it was taken");
        assert_eq!(seen.lock().expect("seen").len(), 3, "the remainder, Alice's, then the poison: {seen:#?}");

        // The rest, taken apart again (the next pass), is taken whole: Bob's key too.
        let Apart::Taken(settled) = take_apart(&rest, |p| fake(p, Arc::default())).await else { panic!("taken") };
        let senders: Vec<&str> = settled.0.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(senders, ["@alice:x", "@bob:x"]);
    }

    #[tokio::test]
    async fn a_row_of_one_failing_piece_goes_aside_whole() {
        let row = Pushed { to_device: vec![message("@mallory:x", "poison")], ..Default::default() };
        let Apart::Failed(failed) = take_apart(&row, |p| fake(p, Arc::default())).await else { panic!("fails") };
        assert_eq!((failed.piece, failed.rest), (row, None));
    }
}
