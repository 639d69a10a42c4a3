//! Registration credentials: the named tokens devices present to register.
//!
//! routerd always holds the `default` credential (`--registration-token`);
//! a credentials file adds more, one per site or batch of devices, so that
//! identities minted with one credential can be told from another's: a
//! router that holds two or more requires two credentials in every quorum
//! (`docs/decisions/0014-identities-cost-something.md`).
//!
//! File format, one credential a line: `NAME TOKEN`, `#` starts a comment,
//! blank lines are skipped. NAME is 1..=64 of `A-Z a-z 0-9 . _ -`; TOKEN is
//! 16..=256 printable ASCII characters without spaces.

use std::collections::BTreeMap;

use thiserror::Error;

use crate::ids;

/// The name of the credential given by `--registration-token`.
pub const DEFAULT_NAME: &str = "default";

/// Why a credentials file was refused (line numbers from 1).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CredentialsError {
    /// A line is not `NAME TOKEN`.
    #[error("line {0}: expected `NAME TOKEN`")]
    Shape(usize),
    /// A name outside 1..=64 of `A-Z a-z 0-9 . _ -`, or the reserved `default`.
    #[error("line {0}: a name is 1..=64 of A-Z a-z 0-9 . _ - and not `default`")]
    Name(usize),
    /// A token outside 16..=256 printable ASCII characters.
    #[error("line {0}: a token is 16..=256 printable ASCII characters")]
    Token(usize),
    /// A name given twice.
    #[error("line {0}: the name `{1}` is given twice")]
    DuplicateName(usize, String),
    /// A token given twice (two names for one secret tell nothing apart).
    #[error("line {0}: this token is already given")]
    DuplicateToken(usize),
}

/// Parses a credentials file's text into name → token. Errors:
/// [`CredentialsError`] for the first bad line (nothing is kept).
pub fn parse(text: &str) -> Result<BTreeMap<String, String>, CredentialsError> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(name), Some(token), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(CredentialsError::Shape(n));
        };
        if !is_valid_name(name) {
            return Err(CredentialsError::Name(n));
        }
        let token_ok =
            (16..=256).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_graphic());
        if !token_ok {
            return Err(CredentialsError::Token(n));
        }
        if out.contains_key(name) {
            return Err(CredentialsError::DuplicateName(n, name.to_string()));
        }
        if out.values().any(|t: &String| t == token) {
            return Err(CredentialsError::DuplicateToken(n));
        }
        out.insert(name.to_string(), token.to_string());
    }
    Ok(out)
}

/// Whether `name` may name a credential in a file: 1..=64 of
/// `A-Z a-z 0-9 . _ -`, and not `default`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name != DEFAULT_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The credential `presented` matches: `default` for `default_token`,
/// else the name in `more` whose token it is. Every token is compared in
/// constant time, all of them whatever matches, so the answer's timing
/// tells nothing of which.
pub fn matching<'a>(
    presented: &str,
    default_token: &str,
    more: &'a BTreeMap<String, String>,
) -> Option<&'a str> {
    let mut found = ids::same(presented, default_token).then_some(DEFAULT_NAME);
    for (name, token) in more {
        if ids::same(presented, token) && found.is_none() {
            found = Some(name.as_str());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_named_tokens_parses_with_comments_and_blanks() {
        let text = "# sites\nsite-a  aaaaaaaaaaaaaaaa\n\nsite.b bbbbbbbbbbbbbbbbbbbb # lab\n";
        let c = parse(text).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c["site-a"], "aaaaaaaaaaaaaaaa");
        assert_eq!(c["site.b"], "bbbbbbbbbbbbbbbbbbbb");
    }

    /// Every refusal, by line.
    #[test]
    fn bad_lines_are_refused_by_number() {
        let tok = "t".repeat(16);
        let cases: Vec<(String, CredentialsError)> = vec![
            ("lonely".into(), CredentialsError::Shape(1)),
            (format!("a {tok} extra"), CredentialsError::Shape(1)),
            (format!("default {tok}"), CredentialsError::Name(1)),
            (format!("a/b {tok}"), CredentialsError::Name(1)),
            (
                format!("{} {tok}", "n".repeat(65)),
                CredentialsError::Name(1),
            ),
            ("a short".into(), CredentialsError::Token(1)),
            (format!("a {}", "t".repeat(257)), CredentialsError::Token(1)),
            (format!("a {tok}é"), CredentialsError::Token(1)),
            (
                format!("a {tok}\na {tok}x"),
                CredentialsError::DuplicateName(2, "a".into()),
            ),
            (
                format!("a {tok}\nb {tok}"),
                CredentialsError::DuplicateToken(2),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(&text), Err(want), "{text:?}");
        }
    }

    #[test]
    fn a_presented_token_names_its_credential() {
        let more = parse("site-a aaaaaaaaaaaaaaaa\nsite-b bbbbbbbbbbbbbbbb").unwrap();
        let d = "dddddddddddddddd";
        assert_eq!(matching(d, d, &more), Some(DEFAULT_NAME));
        assert_eq!(matching("bbbbbbbbbbbbbbbb", d, &more), Some("site-b"));
        assert_eq!(matching("cccccccccccccccc", d, &more), None);
        assert_eq!(matching("", d, &more), None);
    }
}
