//! A member's interactive verification request sent to a persona's device (to-device
//! `m.key.verification.request`, as clients send it to verify one device) is cancelled at
//! once, with the reason the member's client shows (`strings::NO_VERIFICATION`), as the
//! in-room request is (`room::verification`): there is no person at richbot's end to
//! compare emoji with, and its devices are cross-signed by its own identity. The machine
//! is told at once, so it keeps no request waiting; the cancel itself is sent once the
//! persona's crypto is let go (a network call must not hold it).

use matrix_sdk_common::deserialized_responses::ProcessedToDeviceEvent;
use matrix_sdk_crypto::OlmMachine;
use serde_json::{Value, json};

use super::requests::Device;
use crate::matrix::enc;
use crate::strings;

/// The event type of a to-device verification request.
const REQUEST: &str = "m.key.verification.request";

/// A verification request to cancel: who sent it, from which device, its transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    sender: String,
    device: String,
    transaction: String,
}

/// The verification requests among what `machine` took in (clear or decrypted), which it
/// forgets (its own cancel, with the library's wording, is not sent: ours says why).
pub fn requests(machine: &OlmMachine, processed: &[ProcessedToDeviceEvent]) -> Vec<Ask> {
    let asks: Vec<Ask> = processed.iter().filter_map(|e| ask(&e.as_raw().deserialize_as::<Value>().ok()?)).collect();
    for ask in &asks {
        if let Ok(user) = matrix_sdk_common::ruma::UserId::parse(ask.sender.as_str())
            && let Some(request) = machine.get_verification_request(&user, &ask.transaction)
        {
            let _ = request.cancel();
        }
    }
    asks
}

fn ask(event: &Value) -> Option<Ask> {
    if event.get("type")?.as_str()? != REQUEST {
        return None;
    }
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let content = event.get("content")?;
    Some(Ask {
        sender: text(event.get("sender"))?,
        device: text(content.get("from_device"))?,
        transaction: text(content.get("transaction_id"))?,
    })
}

/// Sends each of `asks` its cancel, with the reason; one that cannot be sent is logged
/// (the member's client gives up on its own after a while).
pub async fn send(dev: Device<'_>, asks: &[Ask]) {
    for ask in asks {
        let content = json!({"transaction_id": ask.transaction, "code": "m.user", "reason": strings::NO_VERIFICATION});
        let body = json!({"messages": {&ask.sender: {&ask.device: content}}});
        let txn = format!("cancel-{}", crate::crypto::digest(format!("{}|{}", ask.sender, ask.transaction).as_bytes()));
        let path = format!("/_matrix/client/v3/sendToDevice/m.key.verification.cancel/{}", enc(&txn));
        match dev.matrix.call_device("PUT", &path, Some(&body), dev.user, dev.device).await {
            Ok(_) => tracing::info!(persona = %dev.user, member = ask.sender, "a verification request was cancelled"),
            Err(e) => {
                tracing::warn!(persona = %dev.user, member = ask.sender, error = %e, "could not cancel a verification request")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_verification_request_is_one_to_cancel() {
        let request = json!({"type": REQUEST, "sender": "@a:x", "content": {"from_device": "D", "transaction_id": "t1", "methods": ["m.sas.v1"]}});
        assert_eq!(ask(&request), Some(Ask { sender: "@a:x".into(), device: "D".into(), transaction: "t1".into() }));
        let mut partial = request.clone();
        partial["content"].as_object_mut().expect("object").remove("from_device");
        assert_eq!(ask(&partial), None);
        assert_eq!(ask(&json!({"type": "m.room_key", "sender": "@a:x", "content": {}})), None);
    }
}
