//! Charts as pictures, and where a rich message's pictures are shown. Each `chart` block
//! is drawn (`crate::chart`, off the async threads, bounded in time and
//! in charts at once) and uploaded as the call's, exactly
//! once across a crash (its upload number is fixed by the block's place). In a clear room
//! the message shows it inline (`render::Pictures`); in an encrypted room it is uploaded
//! encrypted and goes as an `m.image` after the message (`attachments`). A chart that
//! cannot be drawn or uploaded is left to its numbers, which the text carries anyway.
//!
//! Drawing costs CPU, so a model cannot make richbot draw without end: at most
//! [`CHARTS_PER_MESSAGE`] charts of a message are drawn, and none after the turn's
//! uploads ran out (`media.uploads_per_turn`); the rest are shown by their numbers.

use serde_json::Value;

use super::planned::Drawn;
use crate::blocks::{Block, Rich};
use crate::chart::{self, Chart};
use crate::media::Upload;
use crate::store::UploadKey;
use crate::tools::ToolErrorCode;
use crate::turn::reach::Reach;
use crate::turn::stop::Stop;
use crate::turn::tools::targets::internal;

/// Upload numbers of a call's charts (plus the block's place): apart from its `data:`
/// URLs' (0, 1, ...).
const CHART_IDX: u32 = 1_000;

/// Charts of one message drawn at most.
pub const CHARTS_PER_MESSAGE: usize = 4;

/// Where a companion's bytes are, as found for a room.
#[derive(Debug, Clone)]
pub(in crate::turn) enum Held {
    Url(String),
    File(Value),
}

impl Held {
    pub fn source(&self) -> crate::render::Source<'_> {
        match self {
            Held::Url(url) => crate::render::Source::Url(url),
            Held::File(file) => crate::render::Source::File(file),
        }
    }
}

/// Each chart block of `payload` drawn and uploaded as call `nth`'s, encrypted for an
/// encrypted room.
pub(in crate::turn) async fn draw_charts(
    r: &Reach<'_>,
    payload: &Rich,
    nth: u32,
    encrypt: bool,
) -> Result<Vec<Drawn>, Stop> {
    let mut drawn = Vec::new();
    let charts = payload.blocks().iter().enumerate().filter_map(|(i, block)| match block {
        Block::Known { spec, fields } if spec.name == "chart" => Some((i, Chart::from_block(fields)?)),
        _ => None,
    });
    for (i, chart) in charts.take(CHARTS_PER_MESSAGE) {
        let alt = chart::describe(&chart);
        let png = match chart::draw_bounded(chart).await {
            Ok(png) => png,
            Err(why) => {
                tracing::warn!(turn = r.turn, why, "a chart was not drawn; its numbers are in the text");
                continue;
            }
        };
        let key = UploadKey { turn: r.turn, nth, idx: CHART_IDX + u32::try_from(i).unwrap_or(0) };
        let file = Upload { key, bytes: &png.bytes, mimetype: "image/png", name: "chart.png", encrypt };
        match super::uploads::upload(r, file, "").await {
            Ok(uploaded) => {
                drawn.push(Drawn { block: i, uploaded, alt, bytes: png.bytes.len(), size: (png.width, png.height) })
            }
            Err(Stop::Tool(e)) => {
                tracing::warn!(turn = r.turn, error = %e.error, "a chart was not uploaded; its numbers are in the text");
                // Out of uploads: the next ones would be drawn for nothing.
                if e.code == ToolErrorCode::LimitReached {
                    break;
                }
            }
            Err(stop) => return Err(stop),
        }
    }
    Ok(drawn)
}

/// How a message in a room (`encrypted` or not) refers to `mxc`: by the `file` object
/// of an encrypted upload (the persona's own, or one a member posted encrypted), else
/// by its URL.
pub(in crate::turn) async fn held(r: &Reach<'_>, mxc: &str, encrypted: bool) -> Result<Held, Stop> {
    if !encrypted {
        return Ok(Held::Url(mxc.to_owned()));
    }
    let own = r.store.own_upload(&r.scope.persona, mxc).await.map_err(internal)?;
    let file = match own.and_then(|row| row.encryption) {
        Some(e) => serde_json::from_str::<Value>(&e).ok().map(|mut file| {
            file["url"] = Value::String(mxc.to_owned());
            file
        }),
        None => r.store.media_file(mxc).await.map_err(internal)?,
    };
    Ok(file.map_or_else(|| Held::Url(mxc.to_owned()), Held::File))
}
