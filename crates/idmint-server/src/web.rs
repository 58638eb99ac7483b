//! The browser side of the HTTP API: the status page at `/` (assets built into the binary)
//! and the JSON it polls (`/v1/status`, `/v1/namespaces/{namespace}/layout`). The CORS layers
//! of both APIs are in `cors`.

use std::sync::Arc;

use axum::{Json, Router, http::header, response::IntoResponse, routing::get};
use idmint_core::Layout;
use serde_json::{Value, json};

use idmint_engine::{NamespaceCounters, Source};

use crate::{Error, Server};

/// The page, its script and its style sheet: plain files, built into the binary.
const INDEX_HTML: &str = include_str!("../web/index.html");
const APP_JS: &str = include_str!("../web/app.js");
const APP_CSS: &str = include_str!("../web/app.css");

/// Only the page's own files, and requests to its own origin: the page loads nothing else.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The routes of the page and of the JSON it reads.
pub(crate) fn routes() -> Router<Arc<Server>> {
    Router::new()
        .route("/", get(|| async { asset(INDEX_HTML, "text/html; charset=utf-8") }))
        .route("/ui/app.js", get(|| async { asset(APP_JS, "text/javascript; charset=utf-8") }))
        .route("/ui/app.css", get(|| async { asset(APP_CSS, "text/css; charset=utf-8") }))
        .route("/v1/status", get(status))
        .route("/v1/namespaces/{namespace}/layout", get(layout))
}

fn asset(body: &'static str, content_type: &'static str) -> axum::response::Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// `GET /v1/status`: the server's clock and readiness, and per namespace its layout, source,
/// generator ID and claim, high-water mark against the wall clock, and counters (the page
/// turns two polls into rates). Nothing in it is secret: the same numbers are on `/metrics`.
async fn status(axum::extract::State(server): axum::extract::State<Arc<Server>>) -> Json<Value> {
    let wall_ms = server.clocks().wall_ms();
    let namespaces: Vec<Value> = server
        .namespace_list()
        .iter()
        .map(|ns| {
            let status = ns.status(server.clocks());
            let claim = match (ns.source, status.generator_id) {
                (Source::Generator, Some(_)) => "held",
                (Source::Generator, None) => "waiting",
                (Source::Counters, Some(_)) => "counter",
                _ => "none-needed",
            };
            let mark_ms = status.counters.mark_ms;
            json!({
                "name": ns.name,
                "layout": ns.layout.name(),
                "source": ns.source.name(),
                "auth": ns.token().is_some(),
                "ready": status.ready,
                "generator_id": status.generator_id,
                "generators": ns.layout.generator_count(),
                "claim": claim,
                "mark_ms": (mark_ms > 0).then_some(mark_ms),
                "ahead_of_wall_ms": status.ahead_of_wall_ms,
                "js_safe": ns.layout.is_js_safe(),
                "id_bits": ns.layout.id_bits(),
                "default_format": ns.text(None).map_or_else(
                    |_| ns.layout.default_format().to_string(),
                    |text| text.name().to_owned(),
                ),
                "type_prefix": ns.type_prefix().map(ToString::to_string),
                "counters": counters(&status.counters),
            })
        })
        .collect();
    Json(json!({
        "ready": server.is_ready(),
        "wall_ms": wall_ms,
        "time": idmint_core::format_rfc3339_ms(wall_ms),
        "window_ms": server.config().window_ms,
        "namespaces": namespaces,
    }))
}

/// The counters of one namespace, as on `/metrics`.
fn counters(m: &NamespaceCounters) -> Value {
    json!({
        "ids_issued": m.ids_issued,
        "requests": m.requests,
        "batches": m.batches,
        "sequence_exhaustions": m.sequence_exhaustions,
        "wait_ms": m.waited_ms,
        "clock_backward": m.clock_backward_events,
        "window_exhausted": m.window_exhausted,
        "mark_extensions": m.mark_extensions,
        "mark_failures": m.mark_failures,
        "claims": m.claims,
        "claims_lost": m.claims_lost,
        "store_failures": m.store_failures,
    })
}

/// `GET /v1/namespaces/{namespace}/layout`: what `idmint explain --json` says about the
/// namespace's layout (its bit diagram as segments, fields and capacity), with its
/// description. Open like `/v1/namespaces`: a layout is not a secret.
async fn layout(
    axum::extract::State(server): axum::extract::State<Arc<Server>>,
    axum::extract::Path(namespace): axum::extract::Path<String>,
) -> Result<Json<Value>, Error> {
    Ok(Json(explain(server.layout(&namespace)?)))
}

/// A layout as JSON: the shape of `idmint explain --json` plus `description`.
pub(crate) fn explain(layout: &Layout) -> Value {
    let segments = layout.segments().map(|segments| {
        segments
            .iter()
            .map(|s| json!({"label": s.label, "msb": s.msb, "lsb": s.lsb}))
            .collect::<Vec<_>>()
    });
    let fields: Vec<Value> = layout
        .fields()
        .iter()
        .map(|f| {
            json!({
                "name": f.name,
                "bits": f.bits,
                "min": f.min,
                "max": f.max,
                "role": format!("{:?}", f.role).to_lowercase(),
                "text": f.text,
            })
        })
        .collect();
    let c = layout.capacity();
    let description = Layout::builtins()
        .iter()
        .find(|(name, _)| *name == layout.name())
        .map(|(_, description)| *description);
    json!({
        "layout": layout.name(),
        "description": description,
        "bits": layout.id_bits(),
        "segments": segments,
        "fields": fields,
        "capacity": {
            "tick_ms": c.tick_ms,
            "start_ms": c.start_ms,
            "end_ms": c.end_ms,
            "wrap_ms": c.wrap_ms,
            "start": c.start,
            "end": c.end,
            "ids_per_tick": c.ids_per_tick,
            "ids_per_second_per_generator": c.ids_per_second_per_generator,
            "generators": c.generators,
        },
        "has_generator": layout.has_generator(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_layout_explains_itself() {
        for (name, _) in Layout::builtins() {
            let layout = Layout::builtin(name).expect("builtin");
            let explained = explain(&layout);
            assert_eq!(explained["layout"], *name);
            assert!(explained["description"].is_string(), "{name}");
            if let Some(segments) = explained["segments"].as_array() {
                let bits: u64 = segments
                    .iter()
                    .map(|s| s["msb"].as_u64().unwrap() - s["lsb"].as_u64().unwrap() + 1)
                    .sum();
                assert_eq!(bits, u64::from(layout.id_bits()), "{name}");
            }
        }
    }
}
