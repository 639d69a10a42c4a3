//! TLS to PostgreSQL: libpq's `sslmode` and `sslrootcert` keys of a
//! connection string, and the rustls client configuration each mode needs.
//!
//! `tokio-postgres` parses neither `verify-ca`/`verify-full` nor
//! `sslrootcert`, so [`split_tls`] takes both keys out of the string before
//! it is parsed, and [`connector`] builds the verifier. The modes keep
//! libpq's meaning (PostgreSQL manual, "SSL Support" §34.19):
//!
//! | `sslmode` | encrypted | server certificate checked |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (the default) | when the server offers TLS | no |
//! | `require` | always | no (with a CA file: its chain, as `verify-ca`) |
//! | `verify-ca` | always | chain to the CA file |
//! | `verify-full` | always | chain to the CA file and the host name |
//!
//! `verify-ca` and `verify-full` need a CA file (`sslrootcert=PATH` or
//! [`super::PgOptions::ca_file`]); there is no implicit system store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls::{Error as TlsError, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::StoreError;

/// libpq's `sslmode` values (`allow` is not offered: it falls back to
/// plain text only after a refusal, which no deployment wants).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain text only.
    Disable,
    /// TLS when the server offers it, unverified; plain text otherwise.
    Prefer,
    /// TLS always; the certificate is not checked unless a CA file is given.
    Require,
    /// TLS always; the chain must lead to the CA file.
    VerifyCa,
    /// TLS always; the chain must lead to the CA file and name the host.
    VerifyFull,
}

impl SslMode {
    /// Parses libpq's spelling.
    ///
    /// Errors: [`StoreError::Backend`] naming the accepted values.
    pub fn parse(s: &str) -> Result<SslMode, StoreError> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => {
                return Err(StoreError::Backend(
                    "postgres: sslmode must be disable, prefer, require, verify-ca or verify-full"
                        .into(),
                ))
            }
        })
    }

    /// `tokio-postgres`'s mode for the negotiation (the verification is ours).
    pub(super) fn negotiation(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Pg;
        match self {
            SslMode::Disable => Pg::Disable,
            SslMode::Prefer => Pg::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Pg::Require,
        }
    }
}

/// The TLS keys taken out of a connection string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TlsKeys {
    /// `sslmode`, when the string set it.
    pub mode: Option<SslMode>,
    /// `sslrootcert`, when the string set it.
    pub root_cert: Option<PathBuf>,
}

/// Splits `sslmode` and `sslrootcert` out of a `postgres://` URL's query or
/// a `key=value` string, returning the rest for `tokio-postgres` to parse.
///
/// Errors: [`StoreError::Backend`] for an unknown `sslmode` or a value
/// that is not valid percent-encoded UTF-8. No error repeats the string
/// (it may hold a password).
pub(super) fn split_tls(conn: &str) -> Result<(String, TlsKeys), StoreError> {
    let mut keys = TlsKeys {
        mode: None,
        root_cert: None,
    };
    let mut take = |k: &str, v: &str| -> Result<bool, StoreError> {
        match k {
            "sslmode" => keys.mode = Some(SslMode::parse(v)?),
            "sslrootcert" => keys.root_cert = Some(PathBuf::from(v)),
            _ => return Ok(false),
        }
        Ok(true)
    };
    if conn.starts_with("postgres://") || conn.starts_with("postgresql://") {
        let Some((base, query)) = conn.split_once('?') else {
            return Ok((conn.to_string(), keys));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if !take(k, &percent_decode(v)?)? {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return Ok((rest, keys));
    }
    let mut kept = Vec::new();
    for word in conn.split_whitespace() {
        let taken = match word.split_once('=') {
            Some((k, v)) => take(k.trim(), v.trim_matches('\''))?,
            None => false,
        };
        if !taken {
            kept.push(word);
        }
    }
    Ok((kept.join(" "), keys))
}

fn percent_decode(v: &str) -> Result<String, StoreError> {
    let bad = || StoreError::Backend("postgres: a connection string value is badly encoded".into());
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// Reads every PEM certificate of `path` into a root store.
///
/// Errors: [`StoreError::Backend`] naming the file when it cannot be read,
/// holds a malformed certificate or none at all.
fn roots(path: &Path) -> Result<RootCertStore, StoreError> {
    let err =
        |why: String| StoreError::Backend(format!("postgres: CA file {}: {why}", path.display()));
    let mut store = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path).map_err(|e| err(e.to_string()))?;
    for cert in certs {
        let cert = cert.map_err(|e| err(e.to_string()))?;
        store.add(cert).map_err(|e| err(e.to_string()))?;
    }
    if store.is_empty() {
        return Err(err("no certificate in it".into()));
    }
    Ok(store)
}

/// The connector for `mode` with the CA file `ca` (the option's, else the
/// string's `sslrootcert`).
///
/// Errors: [`StoreError::Backend`] when `verify-ca` or `verify-full` has no
/// CA file, or the CA file is unusable.
pub(super) fn connector(mode: SslMode, ca: Option<&Path>) -> Result<MakeRustlsConnect, StoreError> {
    // ring, not aws-lc-rs: it builds in seconds from C and assembly with no
    // cmake, where aws-lc-sys adds minutes to a cold build on a small CI
    // runner. rustls marks it deprecated for lacking post-quantum key
    // exchange (ML-KEM); the classical X25519 and P-256 exchanges it offers
    // are what PostgreSQL servers negotiate today.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Backend(format!("postgres: TLS setup: {e}")))?;
    let verified = |check_name: bool, ca: &Path| -> Result<ClientConfig, StoreError> {
        let webpki =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots(ca)?), provider.clone())
                .build()
                .map_err(|e| StoreError::Backend(format!("postgres: TLS setup: {e}")))?;
        let verifier: Arc<dyn ServerCertVerifier> = if check_name {
            webpki
        } else {
            Arc::new(Lenient {
                chain: Some(webpki),
                provider: provider.clone(),
            })
        };
        Ok(builder
            .clone()
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth())
    };
    let config = match (mode, ca) {
        (SslMode::VerifyFull, Some(ca)) => verified(true, ca)?,
        (SslMode::VerifyCa | SslMode::Require, Some(ca)) => verified(false, ca)?,
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
            return Err(StoreError::Backend(
                "postgres: sslmode verify-ca and verify-full need a CA file (sslrootcert=PATH in the URL, or --store-ca-file)".into(),
            ))
        }
        (SslMode::Disable | SslMode::Prefer | SslMode::Require, _) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Lenient {
                chain: None,
                provider: provider.clone(),
            }))
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The verifier of `verify-ca` (`chain` set: the chain must lead to a root
/// of the CA file; the name is not checked) and of `prefer` and `require`
/// without a CA file (`chain` unset: any certificate is taken, as libpq
/// does). Either way the handshake's signatures are checked against the
/// certificate, so the session is encrypted to the holder of its key.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        let algs = &self.provider.signature_verification_algorithms;
        verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        let algs = &self.provider.signature_verification_algorithms;
        verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_keys_leave_a_url_and_the_rest_is_kept_in_order() {
        let (rest, keys) = split_tls(
            "postgres://u:pw@localhost:5432/db?application_name=r&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca%20x.crt&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://u:pw@localhost:5432/db?application_name=r&connect_timeout=3"
        );
        assert_eq!(keys.mode, Some(SslMode::VerifyFull));
        assert_eq!(keys.root_cert, Some(PathBuf::from("/tmp/ca x.crt")));
        let (rest, keys) = split_tls("postgresql://h/db?sslmode=disable").unwrap();
        assert_eq!(rest, "postgresql://h/db");
        assert_eq!(keys.mode, Some(SslMode::Disable));
        let (rest, keys) = split_tls("postgres://h/db").unwrap();
        assert_eq!((rest.as_str(), keys.mode), ("postgres://h/db", None));
    }

    #[test]
    fn the_tls_keys_leave_a_key_value_string() {
        let (rest, keys) =
            split_tls("host=localhost sslmode=require user=u sslrootcert=/ca.pem dbname=d")
                .unwrap();
        assert_eq!(rest, "host=localhost user=u dbname=d");
        assert_eq!(keys.mode, Some(SslMode::Require));
        assert_eq!(keys.root_cert, Some(PathBuf::from("/ca.pem")));
    }

    #[test]
    fn every_mode_parses_and_a_bad_one_is_refused_without_repeating_the_string() {
        for (s, m) in [
            ("disable", SslMode::Disable),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ] {
            assert_eq!(SslMode::parse(s).unwrap(), m);
        }
        for bad in [
            "postgres://u:s3cret-pw@h/db?sslmode=allow",
            "postgres://u:s3cret-pw@h/db?sslmode=%ZZ",
            "postgres://u:s3cret-pw@h/db?sslrootcert=%FF",
        ] {
            let e = split_tls(bad).unwrap_err().to_string();
            assert!(!e.contains("s3cret"), "{e}");
            assert!(e.starts_with("store backend error: postgres:"), "{e}");
        }
    }

    #[test]
    fn verification_needs_a_usable_ca_file() {
        for mode in [SslMode::VerifyCa, SslMode::VerifyFull] {
            let e = connector(mode, None).err().unwrap().to_string();
            assert!(e.contains("need a CA file"), "{e}");
        }
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.pem");
        let e = connector(SslMode::VerifyFull, Some(&missing))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("none.pem"), "{e}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = connector(SslMode::VerifyFull, Some(&empty))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no certificate"), "{e}");
        for mode in [SslMode::Disable, SslMode::Prefer, SslMode::Require] {
            assert!(connector(mode, None).is_ok());
        }
    }
}
