//! What a turn shows beyond text, on its way out: the `data:` URLs of a payload's media
//! fields and an MCP tool's images are uploaded as the persona (`media::upload`, exactly
//! once per call and index; encrypted when the room they go to is), and every `mxc://`
//! URL a payload shows must be the persona's own upload or media a member posted in a
//! room the asker is in: a model cannot show what the asker could not see, nor point at
//! media it only guessed. Charts are drawn by `pictures`; `tools::rich` plans a call with both.

use serde_json::Value;

use crate::blocks::{index, join};
use crate::media::{Upload, UploadError, Uploaded, decode_data_url};
use crate::store::{Store, UploadKey};
use crate::tools::{ToolError, ToolErrorCode};
use crate::turn::Scope;
use crate::turn::reach::Reach;
use crate::turn::stop::Stop;
use crate::turn::tools::targets::{self, internal};

/// The keys of a block's fields that hold media URLs (`gallery`'s `images[].url`, `file`'s
/// `url`, `card`'s `image`).
const MEDIA_KEYS: [&str; 2] = ["url", "image"];

/// One URL of a payload, with its JSON path.
struct Found {
    path: String,
    /// The pointer to the object holding it, and its key.
    at: (String, String),
}

/// The media URLs in `value` starting with `scheme`, in order.
fn urls(value: &Value, scheme: &str) -> Vec<Found> {
    fn walk(v: &Value, path: &str, pointer: &str, scheme: &str, out: &mut Vec<Found>) {
        match v {
            Value::Object(map) => {
                for (key, v) in map {
                    let escaped = key.replace('~', "~0").replace('/', "~1");
                    if MEDIA_KEYS.contains(&key.as_str()) && v.as_str().is_some_and(|s| s.starts_with(scheme)) {
                        out.push(Found { path: join(path, key), at: (pointer.to_owned(), key.clone()) });
                    } else {
                        walk(v, &join(path, key), &format!("{pointer}/{escaped}"), scheme, out);
                    }
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &index(path, i), &format!("{pointer}/{i}"), scheme, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, "payload", "", scheme, &mut out);
    out
}

/// A `data:` URL of a payload, decoded, waiting for its upload.
pub(in crate::turn) struct Pending {
    found: Found,
    mimetype: String,
    bytes: Vec<u8>,
    name: String,
}

/// Where an upload's URL stands until it is made: a well-formed `mxc://` URL, so the rest
/// of the payload can be checked (and refused) before anything is uploaded.
const PLACEHOLDER: &str = "mxc://upload.invalid/pending";

/// `args` with a JSON-string payload parsed and each `data:` URL of its media fields
/// decoded and replaced by [`PLACEHOLDER`]; and those uploads, in order.
pub(in crate::turn) fn pending_uploads(args: &Value) -> Result<(Value, Vec<Pending>), ToolError> {
    let mut args = args.clone();
    let Some(payload) = args.get_mut("payload") else { return Ok((args, Vec::new())) };
    if let Some(parsed) = payload.as_str().and_then(|s| serde_json::from_str::<Value>(s).ok()) {
        *payload = parsed;
    }
    let mut pending = Vec::new();
    for found in urls(payload, "data:") {
        let Some(holder) = payload.pointer_mut(&found.at.0).and_then(Value::as_object_mut) else { continue };
        let url = holder[&found.at.1].as_str().unwrap_or_default();
        let (mimetype, bytes) = match decode_data_url(url) {
            Some(Ok(decoded)) => decoded,
            Some(Err(why)) => return Err(ToolError::at(ToolErrorCode::InvalidPayload, found.path, why)),
            None => continue,
        };
        let name = holder.get("name").and_then(Value::as_str).unwrap_or("upload");
        let name = crate::invisible::strip_deceptive(name).into_owned();
        holder.insert(found.at.1.clone(), Value::String(PLACEHOLDER.to_owned()));
        pending.push(Pending { found, mimetype, bytes, name });
    }
    Ok((args, pending))
}

/// Uploads what [`pending_uploads`] found and puts each `mxc://` URL in its place (a
/// `file` block also gets its `size` and `mimetype`).
pub(in crate::turn) async fn upload_pending(
    r: &Reach<'_>,
    args: &mut Value,
    pending: Vec<Pending>,
    nth: u32,
    encrypt: bool,
) -> Result<(), Stop> {
    for (idx, p) in (0u32..).zip(pending) {
        let file = Upload {
            key: UploadKey { turn: r.turn, nth, idx },
            bytes: &p.bytes,
            mimetype: &p.mimetype,
            name: &p.name,
            encrypt,
        };
        let mxc = upload(r, file, &p.found.path).await?.mxc;
        let holder = args
            .pointer_mut(&format!("/payload{}", p.found.at.0))
            .and_then(Value::as_object_mut)
            .ok_or_else(|| internal("lost a payload field"))?;
        holder.insert(p.found.at.1.clone(), Value::String(mxc));
        if holder.get("type").and_then(Value::as_str) == Some("file") {
            holder.entry("size").or_insert(Value::from(p.bytes.len()));
            holder.entry("mimetype").or_insert(Value::String(p.mimetype));
        }
    }
    Ok(())
}

/// Uploads an MCP tool's images (`(mimetype, base64)`), and the lines the model reads
/// of them: each one's `mxc://` URL, or why it was not uploaded.
pub(in crate::turn) async fn upload_images(
    r: &Reach<'_>,
    images: &[(String, String)],
    nth: u32,
) -> Result<String, Stop> {
    use base64::Engine;
    let mut lines = Vec::new();
    let encrypt = r.encrypted(&r.scope.room).await?;
    for (idx, (n, (mimetype, data))) in (0u32..).zip(images.iter().enumerate()) {
        let n = n + 1;
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data.as_bytes()) else {
            lines.push(format!("[image {n}: not uploaded: its base64 does not decode]"));
            continue;
        };
        let ext = mimetype.rsplit('/').next().unwrap_or("bin");
        let name = format!("image-{n}.{ext}");
        let key = UploadKey { turn: r.turn, nth, idx };
        match upload(r, Upload { key, bytes: &bytes, mimetype, name: &name, encrypt }, "").await {
            Ok(Uploaded { mxc, .. }) => lines.push(format!(
                "[image {n} ({mimetype}, {} bytes) is uploaded as {mxc}: show it with a gallery, a card's image or a file block]",
                bytes.len()
            )),
            Err(Stop::Tool(e)) => lines.push(format!("[image {n}: not uploaded: {}]", e.error)),
            Err(stop) => return Err(stop),
        }
    }
    Ok(lines.join("\n"))
}

pub(in crate::turn) async fn upload(r: &Reach<'_>, upload: Upload<'_>, path: &str) -> Result<Uploaded, Stop> {
    let Some(media) = r.kit.media else {
        return Err(Stop::Tool(ToolError::new(ToolErrorCode::SendFailed, "uploads are not available here")));
    };
    let at = |code, why: String| {
        Stop::Tool(if path.is_empty() { ToolError::new(code, why) } else { ToolError::at(code, path, why) })
    };
    match media.upload(r.store, &r.scope.persona, upload).await {
        Ok(uploaded) => Ok(uploaded),
        Err(e @ UploadError::TooLarge(..)) => Err(at(ToolErrorCode::TooLarge, e.to_string())),
        Err(e @ UploadError::TooMany(_)) => Err(at(ToolErrorCode::LimitReached, e.to_string())),
        Err(e @ UploadError::Refused(_)) => Err(at(ToolErrorCode::SendFailed, e.to_string())),
        Err(e @ (UploadError::Unavailable(_) | UploadError::Store(_))) => Err(Stop::Suspend(e.to_string())),
    }
}

/// Refuses a payload showing an `mxc://` URL the asker may not show ([`media_allowed`]).
pub(in crate::turn) async fn check_media(r: &Reach<'_>, payload: &Value) -> Result<(), Stop> {
    media_allowed(r.store, r.scope, payload).await.map_err(Stop::Tool)
}

/// Refuses a payload showing an `mxc://` URL that is neither `scope`'s persona's upload nor
/// media a member posted in a room the asker is in ([`PLACEHOLDER`]s are uploads to be).
/// `rich_send` asks it of every call; a scheduled rich message, when it is made and again
/// when it is posted.
pub(in crate::turn) async fn media_allowed(store: &Store, scope: &Scope, payload: &Value) -> Result<(), ToolError> {
    for found in urls(payload, "mxc://") {
        let holder = payload.pointer(&found.at.0).unwrap_or(&Value::Null);
        let mxc = holder[&found.at.1].as_str().unwrap_or_default();
        if mxc == PLACEHOLDER || store.uploaded_by(&scope.persona, mxc).await.map_err(internal)? {
            continue;
        }
        let mut seen = false;
        for room in store.rooms_posting_media(mxc).await.map_err(internal)? {
            if targets::joined(store, &room, &scope.asker).await? {
                seen = true;
                break;
            }
        }
        if !seen {
            return Err(ToolError::at(
                ToolErrorCode::MediaNotAllowed,
                found.path,
                format!(
                    "{} is not media you uploaded or that was posted in a room {} is in; use an mxc:// URL you were given, or a data: URL",
                    crate::blocks::cut(mxc, 80),
                    scope.asker
                ),
            ));
        }
    }
    Ok(())
}
