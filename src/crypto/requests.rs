//! Sending what a persona's machine asks for (`outgoing_requests`, key claims, room key
//! shares, cross-signing uploads) as the persona's device, and handing each answer back
//! (`mark_request_as_sent`).
//!
//! The requests are the crypto library's own (ruma 0.16 types): each is rendered to its
//! HTTP method, path and JSON body by ruma, sent through `matrix` (which adds the
//! appservice token, `user_id` and `device_id`, and retries), and the answer parsed back
//! with ruma's response type. Nothing is reshaped by hand, so what goes over the wire is
//! exactly what the library meant.

use std::borrow::Cow;
use std::sync::LazyLock;
use std::time::Duration;

use matrix_sdk_common::ruma::api::auth_scheme::{AuthScheme, SendAccessToken};
use matrix_sdk_common::ruma::api::client::keys::{get_keys, upload_signing_keys};
use matrix_sdk_common::ruma::api::client::message::send_message_event;
use matrix_sdk_common::ruma::api::client::to_device::send_event_to_device;
use matrix_sdk_common::ruma::api::path_builder::VersionHistory;
use matrix_sdk_common::ruma::api::{IncomingResponse, MatrixVersion, OutgoingRequest, SupportedVersions};
use matrix_sdk_common::ruma::events::{MessageLikeEventContent, MessageLikeEventType};
use matrix_sdk_common::ruma::serde::Raw;
use matrix_sdk_crypto::types::requests::{
    AnyIncomingResponse, AnyOutgoingRequest, OutgoingRequest as Outgoing, UploadSigningKeysRequest,
};
use matrix_sdk_crypto::{CrossSigningBootstrapRequests, OlmMachine};
use ruma::UserId;
use serde_json::Value;

use super::Error;
use crate::matrix;

/// Who sends: the persona, as its device.
#[derive(Clone, Copy)]
pub struct Device<'a> {
    pub matrix: &'a matrix::Client,
    pub user: &'a UserId,
    pub device: &'a str,
}

/// How long the homeserver is asked to wait for other servers when it queries or claims
/// keys for us.
const REMOTE_WAIT: Duration = Duration::from_secs(5);
/// The most a key query or claim may take: the persona's crypto is held meanwhile, and a
/// slow server must not hold up its decryptions in every other room.
const HELD_MAX: Duration = Duration::from_secs(10);

/// The versions paths are chosen for (v3 paths from Matrix 1.1 on).
static VERSIONS: LazyLock<SupportedVersions> =
    LazyLock::new(|| SupportedVersions { versions: [MatrixVersion::V1_1].into(), features: Default::default() });

/// Sends one request as the device and returns its parsed answer.
pub async fn call<R>(dev: Device<'_>, request: R) -> Result<R::IncomingResponse, Error>
where
    R: OutgoingRequest<PathBuilder = VersionHistory>,
    for<'a> R::Authentication: AuthScheme<Input<'a> = SendAccessToken<'a>>,
{
    // The token here only satisfies ruma; `matrix` sends the appservice's own.
    let http: http::Request<Vec<u8>> = request
        .try_into_http_request("", SendAccessToken::Always("-"), Cow::Borrowed(&*VERSIONS))
        .map_err(|e| Error::Olm(format!("building a crypto request: {e}")))?;
    let path = http.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let body: Option<Value> = if http.body().is_empty() { None } else { Some(serde_json::from_slice(http.body())?) };
    let answer = dev.matrix.call_device(http.method().as_str(), &path, body.as_ref(), dev.user, dev.device).await?;
    let response = http::Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&answer)?)
        .map_err(|e| Error::Olm(e.to_string()))?;
    R::IncomingResponse::try_from_http_response(response)
        .map_err(|e| Error::Olm(format!("the homeserver's answer to {path} is not what the spec says: {e}")))
}

/// Sends one of the machine's outgoing requests and hands its answer back.
pub async fn send(dev: Device<'_>, machine: &OlmMachine, outgoing: &Outgoing) -> Result<(), Error> {
    let id = outgoing.request_id();
    let olm = |e: matrix_sdk_crypto::OlmError| Error::Olm(e.to_string());
    match outgoing.request() {
        AnyOutgoingRequest::KeysUpload(r) => {
            let answer = Box::pin(call(dev, r.clone())).await?;
            Box::pin(machine.mark_request_as_sent(id, &answer)).await.map_err(olm)
        }
        AnyOutgoingRequest::KeysQuery(r) => {
            let mut request = get_keys::v3::Request::new();
            request.device_keys = r.device_keys.clone();
            request.timeout = Some(REMOTE_WAIT);
            let answer = time_boxed("a key query", Box::pin(call(dev, request))).await?;
            Box::pin(machine.mark_request_as_sent(id, &answer)).await.map_err(olm)
        }
        AnyOutgoingRequest::KeysClaim(r) => {
            let mut request = r.clone();
            request.timeout = Some(REMOTE_WAIT);
            let answer = time_boxed("a key claim", Box::pin(call(dev, request))).await?;
            Box::pin(machine.mark_request_as_sent(id, &answer)).await.map_err(olm)
        }
        AnyOutgoingRequest::ToDeviceRequest(r) => {
            let request =
                send_event_to_device::v3::Request::new_raw(r.event_type.clone(), r.txn_id.clone(), r.messages.clone());
            let answer = Box::pin(call(dev, request)).await?;
            Box::pin(machine.mark_request_as_sent(id, &answer)).await.map_err(olm)
        }
        AnyOutgoingRequest::SignatureUpload(r) => {
            let answer = Box::pin(call(dev, r.clone())).await?;
            Box::pin(machine.mark_request_as_sent(id, &answer)).await.map_err(olm)
        }
        AnyOutgoingRequest::RoomMessage(r) => {
            let event_type = MessageLikeEventType::from(r.content.event_type().to_string());
            let body = Raw::new(&*r.content)?.cast_unchecked();
            let request =
                send_message_event::v3::Request::new_raw(r.room_id.clone(), r.txn_id.clone(), event_type, body);
            let answer = Box::pin(call(dev, request)).await?;
            Box::pin(machine.mark_request_as_sent(id, &answer)).await.map_err(olm)
        }
    }
}

/// `call`, given up after `HELD_MAX` (as the homeserver being unavailable).
async fn time_boxed<T>(what: &str, call: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
    match tokio::time::timeout(HELD_MAX, call).await {
        Ok(answer) => answer,
        Err(_) => Err(Error::Matrix(matrix::Error::Unavailable(format!("{what} took over {} s", HELD_MAX.as_secs())))),
    }
}

/// Sends everything the machine has queued (keys to upload, devices to query, ...). A key
/// query that does not finish in time is left queued (the machine asks it again at the
/// next flush) rather than failing the rest.
pub async fn flush(dev: Device<'_>, machine: &OlmMachine) -> Result<(), Error> {
    let requests = Box::pin(machine.outgoing_requests()).await.map_err(|e| Error::Olm(e.to_string()))?;
    for outgoing in &requests {
        match Box::pin(send(dev, machine, outgoing)).await {
            Err(Error::Matrix(matrix::Error::Unavailable(why)))
                if matches!(outgoing.request(), AnyOutgoingRequest::KeysQuery(_)) =>
            {
                tracing::warn!(persona = %dev.user, why, "a key query did not finish; asked again later");
            }
            sent => sent?,
        }
    }
    Ok(())
}

/// Uploads a new (or not yet uploaded) cross-signing identity: the device keys if they
/// are not up yet, then the master, self-signing and user-signing keys, then the
/// signatures (the device signed by its owner), in that order.
pub async fn cross_signing(
    dev: Device<'_>,
    machine: &OlmMachine,
    r: CrossSigningBootstrapRequests,
) -> Result<(), Error> {
    if let Some(keys) = &r.upload_keys_req {
        Box::pin(send(dev, machine, keys)).await?;
    }
    let answer = Box::pin(call(dev, signing_keys(r.upload_signing_keys_req))).await?;
    let id = matrix_sdk_common::ruma::TransactionId::new();
    Box::pin(machine.mark_request_as_sent(&id, AnyIncomingResponse::SigningKeysUpload(&answer)))
        .await
        .map_err(|e| Error::Olm(e.to_string()))?;
    Box::pin(call(dev, r.upload_signatures_req)).await?;
    Ok(())
}

fn signing_keys(r: UploadSigningKeysRequest) -> upload_signing_keys::v3::Request {
    let mut request = upload_signing_keys::v3::Request::new();
    request.master_key = r.master_key.map(|k| k.to_raw());
    request.self_signing_key = r.self_signing_key.map(|k| k.to_raw());
    request.user_signing_key = r.user_signing_key.map(|k| k.to_raw());
    request
}

#[cfg(test)]
mod tests {
    //! What goes over the wire for the machine's requests, against a stand-in homeserver
    //! that records each request and answers as Synapse would.
    use std::sync::{Arc, Mutex};

    use axum::extract::{OriginalUri, State};
    use matrix_sdk_common::ruma::{device_id, user_id};
    use serde_json::json;

    use super::*;

    type Seen = Arc<Mutex<Vec<(String, String, Value)>>>;

    async fn stand_in() -> (String, Seen) {
        stand_in_hanging(false).await
    }

    /// The stand-in; with `hang_queries`, a key query is never answered (a remote
    /// server that never replies, and a homeserver that waits for it).
    async fn stand_in_hanging(hang_queries: bool) -> (String, Seen) {
        let seen: Seen = Arc::default();
        let app = axum::Router::new()
            .fallback(
                move |State(seen): State<Seen>, method: http::Method, uri: OriginalUri, body: axum::body::Bytes| async move {
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let path = uri.0.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
                    seen.lock().expect("lock").push((method.to_string(), path.clone(), body));
                    if hang_queries && uri.0.path() == "/_matrix/client/v3/keys/query" {
                        std::future::pending::<()>().await;
                    }
                    let answer = match uri.0.path() {
                        "/_matrix/client/v3/keys/upload" => json!({"one_time_key_counts": {"signed_curve25519": 50}}),
                        "/_matrix/client/v3/keys/query" => json!({"device_keys": {}, "failures": {}}),
                        _ => json!({}),
                    };
                    axum::Json(answer)
                },
            )
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (base, seen)
    }

    fn client(base: &str) -> matrix::Client {
        let once = matrix::RetryPolicy { attempts: 1, ..matrix::RetryPolicy::default() };
        matrix::Client::new(base, "as-token", once)
    }

    #[tokio::test]
    async fn the_machines_requests_go_out_as_the_personas_device_and_their_answers_come_back() {
        let (base, seen) = stand_in().await;
        let matrix = client(&base);
        let machine = OlmMachine::new(user_id!("@bot:x"), device_id!("RBTEST")).await;
        let user = ruma::user_id!("@bot:x");
        let dev = Device { matrix: &matrix, user, device: "RBTEST" };
        flush(dev, &machine).await.expect("sent");

        let requests = seen.lock().expect("lock").clone();
        let upload =
            requests.iter().find(|(_, p, _)| p.starts_with("/_matrix/client/v3/keys/upload")).expect("an upload");
        assert_eq!(upload.0, "POST");
        assert!(upload.1.ends_with("?user_id=%40bot%3Ax&device_id=RBTEST"), "{}", upload.1);
        assert_eq!(upload.2["device_keys"]["device_id"], "RBTEST");
        assert_eq!(upload.2["one_time_keys"].as_object().map(|k| k.len()), Some(50), "its one-time keys");
        assert!(requests.iter().any(|(m, p, b)| m == "POST"
            && p.starts_with("/_matrix/client/v3/keys/query")
            && b["device_keys"] == json!({"@bot:x": []})));
        // The answer reached the machine: the keys are not uploaded twice.
        seen.lock().expect("lock").clear();
        flush(dev, &machine).await.expect("sent");
        let again = seen.lock().expect("lock").clone();
        assert!(!again.iter().any(|(_, p, _)| p.contains("/keys/upload")), "{again:?}");
    }

    #[tokio::test]
    async fn cross_signing_uploads_the_three_keys_then_the_signatures() {
        let (base, seen) = stand_in().await;
        let matrix = client(&base);
        let machine = OlmMachine::new(user_id!("@bot:x"), device_id!("RBTEST")).await;
        let dev = Device { matrix: &matrix, user: ruma::user_id!("@bot:x"), device: "RBTEST" };
        let bootstrap = machine.bootstrap_cross_signing(false).await.expect("bootstrap");
        cross_signing(dev, &machine, bootstrap).await.expect("uploaded");
        let paths: Vec<String> =
            seen.lock().expect("lock").iter().map(|(_, p, _)| p.split('?').next().unwrap_or("").to_owned()).collect();
        assert_eq!(
            paths,
            [
                "/_matrix/client/v3/keys/upload",
                "/_matrix/client/v3/keys/device_signing/upload",
                "/_matrix/client/v3/keys/signatures/upload"
            ]
        );
        let keys = seen.lock().expect("lock")[1].2.clone();
        for k in ["master_key", "self_signing_key", "user_signing_key"] {
            assert!(keys[k]["keys"].is_object(), "{k}: {keys}");
        }
        let signatures = seen.lock().expect("lock")[2].2.clone();
        let by = signatures["@bot:x"]["RBTEST"]["signatures"]["@bot:x"].as_object().cloned().unwrap_or_default();
        assert!(
            by.len() == 1 && by.keys().all(|k| k.starts_with("ed25519:") && k != "ed25519:RBTEST"),
            "the device signed by the self-signing key: {signatures}"
        );
        assert!(machine.cross_signing_status().await.is_complete());
    }

    /// Time is paused: the test takes no real time, yet the clock runs past the box.
    #[tokio::test(start_paused = true)]
    async fn a_key_query_that_never_ends_is_given_up_after_the_box_and_asked_again_later() {
        let (base, seen) = stand_in_hanging(true).await;
        let matrix = client(&base);
        let machine = OlmMachine::new(user_id!("@bot:x"), device_id!("RBTEST")).await;
        let dev = Device { matrix: &matrix, user: ruma::user_id!("@bot:x"), device: "RBTEST" };
        let start = tokio::time::Instant::now();
        flush(dev, &machine).await.expect("the rest of the flush went out");
        assert!(start.elapsed() <= HELD_MAX + Duration::from_secs(1), "held for {:?}", start.elapsed());
        let query = seen.lock().expect("lock").iter().find(|(_, p, _)| p.contains("/keys/query")).cloned();
        assert_eq!(query.expect("asked").2["timeout"], 5_000, "the homeserver is asked to wait 5 s for others");
        let queued = machine.outgoing_requests().await.expect("requests");
        assert!(queued.iter().any(|r| matches!(r.request(), AnyOutgoingRequest::KeysQuery(_))), "asked again later");
    }
}
