//! Messages of their own that go right after a rich message, in its thread, so every
//! client shows what the blocks hold: a `file` block as an `m.file` (every client offers
//! the download), and in an encrypted room each picture (a chart's drawing, a card's or a
//! gallery's image) as an `m.image`, since there no picture is shown by clear URL. An
//! encrypted upload is referred to by its `file` object (URL, key, IV, hash), as the spec
//! says an encrypted room's media must be; a clear one by its `url`.

use serde_json::{Map, Value, json};

use super::{Relation, relate};

/// Where a companion's bytes are.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// Stored in the clear at this `mxc://` URL.
    Url(&'a str),
    /// Stored encrypted: the `file` object (with its `url`) that opens it.
    File(&'a Value),
}

/// What a client may show before it fetches the media.
#[derive(Debug, Clone, Copy, Default)]
pub struct Info<'a> {
    pub mimetype: Option<&'a str>,
    pub size: Option<u64>,
    /// Width and height of a picture, in pixels.
    pub dimensions: Option<(u32, u32)>,
}

fn media_message(msgtype: &str, name: &str, source: Source<'_>, info: Info<'_>, rel: Relation<'_>) -> Value {
    let mut fields = Map::new();
    if let Some(size) = info.size {
        fields.insert("size".into(), size.into());
    }
    if let Some(mimetype) = info.mimetype {
        fields.insert("mimetype".into(), mimetype.into());
    }
    if let Some((w, h)) = info.dimensions {
        fields.insert("w".into(), w.into());
        fields.insert("h".into(), h.into());
    }
    let mut content = json!({
        "msgtype": msgtype,
        "body": name,
        "filename": name,
        "info": fields,
        "m.mentions": {},
    });
    match source {
        Source::Url(url) => content["url"] = url.into(),
        Source::File(file) => content["file"] = file.clone(),
    }
    relate(&mut content, rel);
    content
}

/// The `m.file` message for a file block: its name, where it is, size and type.
pub fn file_message(name: &str, source: Source<'_>, info: Info<'_>, rel: Relation<'_>) -> Value {
    media_message("m.file", name, source, info, rel)
}

/// The `m.image` message for a picture; `name` is what it shows, in words.
pub fn image_message(name: &str, source: Source<'_>, info: Info<'_>, rel: Relation<'_>) -> Value {
    media_message("m.image", name, source, info, rel)
}

/// The `m.audio` voice message (`org.matrix.msc3245.voice`) of a spoken answer: its
/// length (milliseconds) in `info.duration` and MSC1767's audio part, with the waveform
/// (levels 0-1024) when there is one, as Element sends its own.
pub fn voice_message(
    name: &str,
    source: Source<'_>,
    info: Info<'_>,
    duration_ms: Option<u64>,
    waveform: &[u16],
    rel: Relation<'_>,
) -> Value {
    let mut content = media_message("m.audio", name, source, info, rel);
    let mut audio = Map::new();
    if let Some(ms) = duration_ms {
        content["info"]["duration"] = ms.into();
        audio.insert("duration".into(), ms.into());
    }
    if !waveform.is_empty() {
        audio.insert("waveform".into(), waveform.into());
    }
    content["org.matrix.msc1767.audio"] = Value::Object(audio);
    content["org.matrix.msc3245.voice"] = json!({});
    content
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_message_names_the_file_and_offers_its_upload() {
        let root = ruma::event_id!("$root");
        let info = Info { size: Some(31), mimetype: Some("text/csv"), dimensions: None };
        let c =
            file_message("temps.csv", Source::Url("mxc://s/f"), info, Relation { reply_to: None, thread: Some(root) });
        assert_eq!(c["msgtype"], "m.file");
        assert_eq!(
            (c["body"].as_str(), c["filename"].as_str(), c["url"].as_str()),
            (Some("temps.csv"), Some("temps.csv"), Some("mxc://s/f"))
        );
        assert_eq!(c["info"], json!({"size": 31, "mimetype": "text/csv"}));
        assert_eq!(c["m.relates_to"]["rel_type"], "m.thread");
        let bare = file_message("a", Source::Url("mxc://s/a"), Info::default(), Relation::default());
        assert_eq!(bare["info"], json!({}));
    }

    #[test]
    fn an_encrypted_picture_carries_its_file_object_and_no_url() {
        let file = json!({"url": "mxc://s/p", "v": "v2", "key": {"k": "x"}, "iv": "y", "hashes": {"sha256": "z"}});
        let info = Info { mimetype: Some("image/png"), size: Some(9), dimensions: Some((960, 600)) };
        let c = image_message("Line chart: Revenue.", Source::File(&file), info, Relation::default());
        assert_eq!((c["msgtype"].as_str(), c["body"].as_str()), (Some("m.image"), Some("Line chart: Revenue.")));
        assert_eq!(c["file"], file);
        assert!(c.get("url").is_none(), "never a clear URL beside it");
        assert_eq!(c["info"], json!({"mimetype": "image/png", "size": 9, "w": 960, "h": 600}));
    }

    #[test]
    fn a_voice_message_is_m_audio_marked_as_voice_with_its_length_and_waveform() {
        let info = Info { size: Some(900), mimetype: Some("audio/ogg"), dimensions: None };
        let c = voice_message(
            "Voice answer",
            Source::Url("mxc://s/v"),
            info,
            Some(2_500),
            &[0, 512, 1024],
            Relation::default(),
        );
        assert_eq!(c["msgtype"], "m.audio");
        assert_eq!(c["info"], json!({"size": 900, "mimetype": "audio/ogg", "duration": 2500}));
        assert_eq!(c["org.matrix.msc1767.audio"], json!({"duration": 2500, "waveform": [0, 512, 1024]}));
        assert_eq!(c["org.matrix.msc3245.voice"], json!({}));
        let bare = voice_message("v", Source::Url("mxc://s/v"), Info::default(), None, &[], Relation::default());
        assert_eq!(bare["org.matrix.msc1767.audio"], json!({}));
    }
}
