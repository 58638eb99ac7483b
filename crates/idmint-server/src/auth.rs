//! Bearer tokens: the one check of a namespace's token, shared by the HTTP API (the
//! `Authorization` header) and the gRPC API (the `authorization` metadata).

use std::sync::Arc;

use idmint_engine::Namespace;

use crate::{Error, Server};

/// The namespace `name`, after checking its bearer token against `authorization` (the value
/// of the `Authorization` header or metadata, if any and readable as text): a namespace
/// without a token takes every request; one with a token needs `Bearer <token>`, compared in
/// constant time.
pub(crate) fn authorized<'a>(
    server: &'a Server,
    name: &str,
    authorization: Option<&str>,
) -> Result<&'a Arc<Namespace>, Error> {
    let namespace = server.namespace(name)?;
    if let Some(expected) = namespace.token() {
        let given = authorization
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| Error::Unauthorized(namespace.name.clone()))?;
        if !constant_time_eq(given.as_bytes(), expected.as_bytes()) {
            return Err(Error::Forbidden(namespace.name.clone()));
        }
    }
    Ok(namespace)
}

/// Compares two byte strings in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0xff);
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        let check = |a: &[u8], b: &[u8], equal: bool| {
            assert_eq!(constant_time_eq(a, b), equal, "{a:?} {b:?}");
        };
        check(b"secret", b"secret", true);
        check(b"secret", b"secreT", false);
        check(b"secret", b"secret2", false);
        check(b"", b"x", false);
        check(b"", b"", true);
    }
}
