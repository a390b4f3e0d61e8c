//! Bearer credentials: read from files only, kept as SHA-256 digests, compared in constant time.
//!
//! A token file holds one token (surrounding whitespace ignored), at least
//! [`MIN_TOKEN_BYTES`] bytes. The server keeps only the token's SHA-256 digest and compares the
//! digest of what a caller presents with [`subtle::ConstantTimeEq`], so neither the comparison's
//! time nor a memory dump gives the token away. Tokens are never logged.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The shortest token a token file may hold, in bytes.
pub const MIN_TOKEN_BYTES: usize = 16;

/// The largest token file read, in bytes.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// Why a token file was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The file could not be read.
    #[error("cannot read token file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is larger than a token file can be.
    #[error("token file {path} is larger than {MAX_TOKEN_FILE_BYTES} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The token is shorter than [`MIN_TOKEN_BYTES`] or not text.
    #[error("token file {path} must hold one token of at least {MIN_TOKEN_BYTES} bytes of text")]
    Weak {
        /// The file.
        path: PathBuf,
    },
}

/// The SHA-256 digest of a token.
pub type TokenDigest = [u8; 32];

/// The digest of `token`.
pub fn digest(token: &[u8]) -> TokenDigest {
    Sha256::digest(token).into()
}

/// Reads a token file.
///
/// # Errors
/// The file cannot be read, is too large, or holds too short a token.
pub fn read_token_file(path: &Path) -> Result<TokenDigest, CredentialError> {
    let read = |source| CredentialError::Read {
        path: path.to_owned(),
        source,
    };
    let size = std::fs::metadata(path).map_err(read)?.len();
    if size > MAX_TOKEN_FILE_BYTES {
        return Err(CredentialError::TooLarge {
            path: path.to_owned(),
        });
    }
    let bytes = std::fs::read(path).map_err(read)?;
    let token = std::str::from_utf8(&bytes)
        .map(str::trim)
        .ok()
        .filter(|t| t.len() >= MIN_TOKEN_BYTES && !t.contains(char::is_whitespace))
        .ok_or_else(|| CredentialError::Weak {
            path: path.to_owned(),
        })?;
    Ok(digest(token.as_bytes()))
}

/// A token read from a file, re-readable (the operator token on SIGHUP).
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    digest: ArcSwapOption<TokenDigest>,
}

impl TokenFile {
    /// Reads `path`.
    ///
    /// # Errors
    /// As [`read_token_file`].
    pub fn open(path: &Path) -> Result<Self, CredentialError> {
        let digest = read_token_file(path)?;
        Ok(TokenFile {
            path: path.to_owned(),
            digest: ArcSwapOption::new(Some(Arc::new(digest))),
        })
    }

    /// Reads the file again; on an error keeps the token it had.
    ///
    /// # Errors
    /// As [`read_token_file`].
    pub fn reread(&self) -> Result<(), CredentialError> {
        let digest = read_token_file(&self.path)?;
        self.digest.store(Some(Arc::new(digest)));
        Ok(())
    }

    /// True when `presented` is the token, compared in constant time.
    pub fn accepts(&self, presented: &[u8]) -> bool {
        let guard = self.digest.load();
        guard
            .as_deref()
            .is_some_and(|expected| bool::from(expected.ct_eq(&digest(presented))))
    }
}

/// The token of an `Authorization: Bearer TOKEN` header, if there is exactly one such header.
pub fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let mut values = headers.get_all(axum::http::header::AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    bearer_token(value.as_bytes())
}

/// The token of one `Bearer TOKEN` credential (the scheme in any case, the token trimmed), if
/// it is one.
pub fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let scheme = value.get(..7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = value.get(7..)?.trim_ascii();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("capgate-credential-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_token_file_accepts_its_token_only() {
        let tokens = TokenFile::open(&file("ok", "s3cret-token-0123456789\n")).unwrap();
        assert!(tokens.accepts(b"s3cret-token-0123456789"));
        assert!(!tokens.accepts(b"s3cret-token-012345678"));
        assert!(!tokens.accepts(b""));
    }

    #[test]
    fn short_or_spaced_tokens_are_refused() {
        assert!(matches!(
            TokenFile::open(&file("short", "abc")),
            Err(CredentialError::Weak { .. })
        ));
        assert!(matches!(
            TokenFile::open(&file("spaced", "0123456789 0123456789")),
            Err(CredentialError::Weak { .. })
        ));
    }

    #[test]
    fn a_failed_reread_keeps_the_token() {
        let path = file("reread", "first-token-0123456789");
        let tokens = TokenFile::open(&path).unwrap();
        std::fs::write(&path, "x").unwrap();
        assert!(tokens.reread().is_err());
        assert!(tokens.accepts(b"first-token-0123456789"));
        std::fs::write(&path, "second-token-0123456789").unwrap();
        tokens.reread().unwrap();
        assert!(!tokens.accepts(b"first-token-0123456789"));
        assert!(tokens.accepts(b"second-token-0123456789"));
    }

    #[test]
    fn bearer_reads_one_header_in_any_case() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert("authorization", "bEaReR abc".parse().unwrap());
        assert_eq!(bearer(&headers), Some(&b"abc"[..]));
        headers.append("authorization", "Bearer def".parse().unwrap());
        assert_eq!(bearer(&headers), None, "two headers are ambiguous");
        let mut basic = HeaderMap::new();
        basic.insert("authorization", "Basic abc".parse().unwrap());
        assert_eq!(bearer(&basic), None);
    }
}
