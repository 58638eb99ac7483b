//! CORS for the origins of `cors_allow_origins`: the check of each configured origin (at
//! start), and the layers of the HTTP and gRPC APIs, which answer only allowed origins.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Method, Response, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// Checks one entry of `cors_allow_origins`: `*`, or an origin as a browser sends it
/// (`scheme://host` or `scheme://host:port`, no path, no trailing slash).
pub(crate) fn check_origin(origin: &str) -> Result<(), String> {
    if origin == "*" {
        return Ok(());
    }
    let bad = |why: &str| {
        Err(format!(
            "cors_allow_origins: `{}` is not an origin ({why}); write `*` or \
             scheme://host[:port], e.g. https://app.example.com",
            origin.chars().take(100).collect::<String>()
        ))
    };
    let Some((scheme, rest)) = origin.split_once("://") else {
        return bad("no scheme");
    };
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
        return bad("the scheme must be lowercase letters, like http or https");
    }
    if rest.is_empty() {
        return bad("no host");
    }
    if rest.contains(['/', '?', '#', '@', ' ']) {
        return bad("an origin has no path, query, user or spaces");
    }
    if HeaderValue::from_str(origin).is_err() {
        return bad("not a valid header value");
    }
    Ok(())
}

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

    #[test]
    fn origins_are_checked() {
        let check = |origin: &str, ok: bool| {
            assert_eq!(check_origin(origin).is_ok(), ok, "{origin:?}: {:?}", check_origin(origin))
        };
        check("*", true);
        check("http://127.0.0.1:5173", true);
        check("https://app.example.com", true);
        check("app.example.com", false);
        check("https://app.example.com/", false);
        check("https://app.example.com/path", false);
        check("https://", false);
        check("HTTPS://x", false);
        check("https://user@x", false);
        check("https://x\n", false);
        check("", false);
    }
}
