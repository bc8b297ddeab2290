//! What a failed chat request means: the configuration or the request refused (told to
//! members as a misconfiguration), a timeout, an outage (retried by the caller), or an
//! endpoint that cannot stream. Servers differ in how they write an error: llama.cpp's
//! puts the status in `error.code` as a number, which async-openai cannot read.

use async_openai::error::OpenAIError;
use serde_json::Value;

use super::Error;

/// What a failed request means: the configuration refused, a timeout, or an outage.
pub(super) fn failed(e: OpenAIError) -> Error {
    match e {
        OpenAIError::ApiError(api) if api.api_error.r#type.as_deref() == Some(super::transport::UNREADABLE_TYPE) => {
            Error::Unreadable(api.api_error.message)
        }
        OpenAIError::ApiError(api) if matches!(api.status_code.as_u16(), 400 | 401 | 403 | 404 | 422) => {
            Error::Refused(api.status_code.as_u16(), api.api_error.message)
        }
        OpenAIError::Reqwest(r) if r.is_timeout() => Error::TimedOut(r.to_string()),
        OpenAIError::JSONDeserialize(e, body) => {
            numbered_refusal(&body).unwrap_or_else(|| Error::Api(OpenAIError::JSONDeserialize(e, body).to_string()))
        }
        e => Error::Api(e.to_string()),
    }
}

/// An error body with the status as a number in `error.code`, as llama.cpp's server
/// writes it (`{"error": {"code": 400, "message": ..., "type": "invalid_request_error"}}`),
/// which async-openai cannot read (it expects a string there): a refusal of the request
/// or its configuration, as [`failed`] would make of a body it could read.
fn numbered_refusal(body: &str) -> Option<Error> {
    let error = serde_json::from_str::<Value>(body).ok()?.get("error")?.clone();
    let status = u16::try_from(error.get("code")?.as_u64()?).ok()?;
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default().to_owned();
    matches!(status, 400 | 401 | 403 | 404 | 422).then_some(Error::Refused(status, message))
}

/// Whether a streamed request's refusal means the endpoint cannot stream.
pub(super) fn cannot_stream(e: &OpenAIError) -> bool {
    match e {
        OpenAIError::ApiError(api) => matches!(api.status_code.as_u16(), 400 | 422),
        OpenAIError::JSONDeserialize(_, body) => matches!(numbered_refusal(body), Some(Error::Refused(400 | 422, _))),
        OpenAIError::StreamError(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpps_error_bodies_are_refusals_with_their_message() {
        let body = r#"{"error":{"code":400,"message":"Failed to initialize samplers: failed to parse grammar","type":"invalid_request_error"}}"#;
        match numbered_refusal(body) {
            Some(Error::Refused(400, m)) => assert_eq!(m, "Failed to initialize samplers: failed to parse grammar"),
            other => panic!("{other:?}"),
        }
        assert!(numbered_refusal(r#"{"error":{"code":500,"message":"x"}}"#).is_none());
        assert!(numbered_refusal("not json").is_none());
    }
}
