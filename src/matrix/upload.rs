//! Uploading to the homeserver's media repository as a persona, in two steps (Matrix
//! 1.7's asynchronous upload): `POST /_matrix/media/v1/create` reserves an `mxc://` URL,
//! then `PUT /_matrix/media/v3/upload/{server}/{id}` fills it. The URL is known before a
//! byte is sent, so a caller can record it first and, after a crash, fill the same URL
//! again instead of uploading twice; a fill the homeserver already has
//! (`M_CANNOT_OVERWRITE_MEDIA`) counts as done.

use reqwest::Method;
use ruma::UserId;

use super::{Client, Error, enc, media::parse_mxc};

impl Client {
    /// A new, empty `mxc://` URL owned by `user`.
    pub async fn create_mxc(&self, user: &UserId) -> Result<String, Error> {
        let answer =
            self.call(Method::POST, "/_matrix/media/v1/create", Some(user), Some(&serde_json::json!({}))).await?;
        answer
            .get("content_uri")
            .and_then(serde_json::Value::as_str)
            .filter(|uri| parse_mxc(uri).is_some())
            .map(str::to_owned)
            .ok_or_else(|| Error::Unavailable("the homeserver's answer to create lacks a valid content_uri".into()))
    }

    /// Fills `mxc` (made by [`Client::create_mxc`] for `user`) with `bytes`.
    pub async fn upload_to(
        &self,
        mxc: &str,
        user: &UserId,
        bytes: &[u8],
        mimetype: &str,
        filename: &str,
    ) -> Result<(), Error> {
        let refused = |error: String| Error::Refused { status: 400, errcode: "M_INVALID_PARAM".into(), error };
        let (server, id) = parse_mxc(mxc).ok_or_else(|| refused("not an mxc:// URL".into()))?;
        let url = format!(
            "{}/_matrix/media/v3/upload/{}/{}?filename={}&user_id={}",
            self.base,
            enc(server),
            enc(id),
            enc(filename),
            enc(user.as_str())
        );
        let attempt = || {
            self.http
                .request(Method::PUT, &url)
                .bearer_auth(&self.as_token)
                .header(reqwest::header::CONTENT_TYPE, crate::mime::or_octet_stream(mimetype))
                .body(bytes.to_vec())
                .send()
        };
        match self.retry.run(attempt).await {
            Ok(_) => Ok(()),
            Err(e) if e.errcode() == Some("M_CANNOT_OVERWRITE_MEDIA") => Ok(()),
            Err(e) => Err(e),
        }
    }
}
