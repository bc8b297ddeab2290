//! Registering the personas in the background at start: a homeserver that is still
//! starting must not keep the appservice from answering its transactions. Then one ping:
//! a homeserver that queued transactions while richbot was down (and backs off between
//! retries) sends them at once. Then the personas' devices, when encryption is on.

use std::time::Duration;

use crate::config::Settings;
use crate::crypto::Crypto;
use crate::{check, matrix, personas};

/// How long `serve` waits for its probe to come back before it takes the homeserver to
/// lack what encryption needs (generous: a loaded homeserver is slow, and a wrong "no"
/// turns encrypted rooms off until the next start; a working one answers in milliseconds).
const PROBE_WAIT: Duration = Duration::from_secs(30);

/// Registers `personas` (retrying, with the fix for a registration the homeserver does not
/// know), pings the homeserver through `pinger`, then sets up the personas' devices.
pub async fn register(
    personas: personas::Personas,
    pinger: matrix::Client,
    settings: Settings,
    devices: Option<Crypto>,
) {
    let registration = &settings.config.appservice.registration;
    let appservice_id = &settings.registration.id;
    let mut wait = Duration::from_secs(1);
    loop {
        match personas.register_all().await {
            Ok(()) => {
                match pinger.ping(appservice_id, "richbot-start").await {
                    Ok(ms) => tracing::debug!(ms, "the homeserver reached richbot; queued transactions follow"),
                    // Said once, with the fix: a homeserver that cannot reach richbot
                    // never delivers anything, and nothing else would say so.
                    Err(e) => tracing::warn!(
                        fix = %check::ping_failure(&settings, &e),
                        "the homeserver could not reach richbot at start"
                    ),
                }
                break;
            }
            Err(personas::Error::Matrix(e)) if e.errcode() == Some("M_UNKNOWN_TOKEN") => tracing::error!(
                error = %e,
                registration = %registration.display(),
                "the homeserver does not know this registration: add it to the homeserver's \
                 app_service_config_files and restart the homeserver; retrying"
            ),
            Err(e) => tracing::warn!(error = %e, "could not register the personas yet; retrying"),
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(60));
    }
    // Then the personas' devices (a persona must be registered to have one).
    if let Some(crypto) = devices {
        futures::FutureExt::boxed(crypto.start(PROBE_WAIT)).await;
    }
}
