//! Downloading from the homeserver's media repository as a persona (authenticated media,
//! `/_matrix/client/v1/media/download`), at most `cap` bytes: a larger file is refused
//! by its `Content-Length` or cut off as it streams, never read whole.

use reqwest::Method;
use ruma::UserId;

use super::{Client, Error, enc};

/// A media id as the homeserver serves it: letters, digits, `_` and `-`.
fn valid(part: &str) -> bool {
    !part.is_empty() && part.len() <= 255 && part.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
}

/// The server name and media id of an `mxc://` URL.
pub fn parse_mxc(url: &str) -> Option<(&str, &str)> {
    let (server, id) = url.strip_prefix("mxc://")?.split_once('/')?;
    let server_ok = !server.is_empty() && server.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c));
    (server_ok && valid(id)).then_some((server, id))
}

impl Client {
    /// The bytes of `mxc` (`mxc://server/id`), fetched as `user`, if at most `cap`.
    pub async fn download(&self, mxc: &str, user: &UserId, cap: usize) -> Result<Vec<u8>, Error> {
        let refused = |error: String| Error::Refused { status: 400, errcode: "M_INVALID_PARAM".into(), error };
        let (server, id) = parse_mxc(mxc).ok_or_else(|| refused(format!("not an mxc:// URL ({} bytes)", mxc.len())))?;
        let url = format!(
            "{}/_matrix/client/v1/media/download/{}/{}?user_id={}",
            self.base,
            enc(server),
            enc(id),
            enc(user.as_str())
        );
        let mut last = String::new();
        for n in 0..self.retry.attempts {
            if n > 0 {
                tokio::time::sleep(self.retry.base.saturating_mul(2u32.saturating_pow(n - 1)).min(self.retry.max_wait))
                    .await;
            }
            let response = match self.http.request(Method::GET, &url).bearer_auth(&self.as_token).send().await {
                Ok(r) => r,
                Err(e) => {
                    last = format!("request failed: {e}");
                    continue;
                }
            };
            let status = response.status();
            if status.is_server_error() || status.as_u16() == 429 {
                last = format!("{status}");
                continue;
            }
            if !status.is_success() {
                let body: serde_json::Value = response.json().await.unwrap_or_default();
                let errcode = body["errcode"].as_str().unwrap_or("M_UNKNOWN").to_owned();
                let error = body["error"].as_str().unwrap_or_default().to_owned();
                return Err(Error::Refused { status: status.as_u16(), errcode, error });
            }
            if response.content_length().is_some_and(|len| len > cap as u64) {
                return Err(refused(format!("larger than {cap} bytes")));
            }
            return read_capped(response, cap).await.map_err(|e| match e {
                Some(e) => Error::Unavailable(e),
                None => refused(format!("larger than {cap} bytes")),
            });
        }
        Err(Error::Unavailable(last))
    }
}

/// The body, unless it passes `cap` (`Err(None)`) or breaks off (`Err(Some(why))`).
async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<Vec<u8>, Option<String>> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| Some(e.to_string()))? {
        if out.len() + chunk.len() > cap {
            return Err(None);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse_mxc;

    #[test]
    fn only_plain_mxc_urls_are_fetched() {
        assert_eq!(parse_mxc("mxc://example.org/AbC_12-x"), Some(("example.org", "AbC_12-x")));
        assert_eq!(parse_mxc("mxc://localhost:8448/abc"), Some(("localhost:8448", "abc")));
        for bad in [
            "https://evil/x",
            "mxc://example.org/../admin",
            "mxc://example.org/..",
            "mxc://ex ample/x",
            "mxc:///x",
            "mxc://a/b/c",
        ] {
            assert_eq!(parse_mxc(bad), None, "{bad}");
        }
    }
}
