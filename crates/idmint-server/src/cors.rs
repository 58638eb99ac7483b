//! CORS for the origins of `cors_allow_origins` (each checked at start with the rest of the
//! configuration): the layers of the HTTP and gRPC APIs, which answer only allowed origins.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Method, Response, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The CORS layer for `origins` (already checked), or `None` when the list is empty. `grpc`
/// adds the headers that gRPC-web requests send and its responses need to expose.
pub(crate) fn cors(origins: &[String], grpc: bool) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    let mut allow_headers = vec![header::AUTHORIZATION, header::CONTENT_TYPE];
    let mut expose = vec![header::RETRY_AFTER, header::WWW_AUTHENTICATE];
    if grpc {
        for name in ["x-grpc-web", "x-user-agent", "grpc-timeout"] {
            allow_headers.push(HeaderName::from_static(name));
        }
        for name in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
            expose.push(HeaderName::from_static(name));
        }
    }
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST])
            .allow_headers(allow_headers)
            .expose_headers(expose)
            .max_age(Duration::from_secs(600)),
    )
}

/// Removes every `Access-Control-*` header from a response that does not allow its origin:
/// tower-http's layer still writes the allowed methods and headers for an origin it refuses,
/// and a refused origin should learn nothing.
pub(crate) fn only_for_allowed<B>(mut response: Response<B>) -> Response<B> {
    if !response.headers().contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN) {
        let names: Vec<HeaderName> = response
            .headers()
            .keys()
            .filter(|name| name.as_str().starts_with("access-control-"))
            .cloned()
            .collect();
        for name in names {
            response.headers_mut().remove(name);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration's check of an origin (idmint-engine, which has no HTTP types)
    /// takes only what a header value can hold, so every origin it accepts reaches the layer.
    #[test]
    fn every_origin_the_configuration_takes_is_a_header_value() {
        for origin in [
            "http://127.0.0.1:5173",
            "https://app.example.com",
            "https://x\t",
            "https://caf\u{e9}.example",
            "https://x\n",
            "https://x\u{7f}",
            "https://x\u{1}",
        ] {
            let config = idmint_engine::ServerConfig {
                cors_allow_origins: vec![origin.into()],
                ..Default::default()
            };
            assert_eq!(
                config.validated().is_ok(),
                HeaderValue::from_str(origin).is_ok(),
                "{origin:?}"
            );
        }
    }
}
