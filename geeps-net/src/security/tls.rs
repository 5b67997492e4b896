//! Optional TLS for keeper connections (cargo feature `tls`, rustls with
//! the `ring` provider): every rank presents its certificate and checks its
//! peer's against the cluster's CA, both ways (mutual TLS); a worker checks
//! the keeper's certificate names the host it dialled. Loads the files once
//! per cluster and says which file is wrong and why. Must never fall back
//! to plain TCP when TLS was asked for.

use std::path::{Path, PathBuf};

use geeps_core::{Error, Result};

#[cfg(all(test, feature = "tls"))]
#[path = "../../tests/unit/tls_tests.rs"]
mod tls_tests;

/// The files a rank needs for TLS, all PEM: its certificate chain, its
/// private key, and the CA certificates that sign every rank's certificate.
/// `GEEPS_TLS_CERT`, `GEEPS_TLS_KEY` and `GEEPS_TLS_CA` set them.
///
/// A keeper's certificate must name (as a subject alternative name) the
/// host the others dial it by: the host part of its address, a DNS name or
/// an IP address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// This rank's certificate chain (leaf first).
    pub cert: PathBuf,
    /// This rank's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA certificate(s) every rank's certificate chains to.
    pub ca: PathBuf,
}

impl TlsFiles {
    /// The three files.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>, ca: impl Into<PathBuf>) -> Self {
        TlsFiles { cert: cert.into(), key: key.into(), ca: ca.into() }
    }
}

fn bad(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::InvalidConfig { field: "tls", reason: format!("{}: {why}", path.display()) }
}

/// Loaded TLS settings: what accepts and what connects.
#[cfg(feature = "tls")]
pub(crate) struct Tls {
    acceptor: tokio_rustls::TlsAcceptor,
    connector: tokio_rustls::TlsConnector,
}

#[cfg(feature = "tls")]
mod enabled {
    use std::sync::Arc;

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::net::TcpStream;

    use super::*;
    use crate::conn::peer_stream::{self, ReadSide, WriteSide};

    fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| bad(path, format!("cannot read PEM certificates: {e}")))?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| bad(path, format!("not a PEM certificate file: {e}")))?;
        if certs.is_empty() {
            return Err(bad(path, "holds no certificate (expected -----BEGIN CERTIFICATE-----)"));
        }
        Ok(certs)
    }

    impl Tls {
        pub(crate) fn load(files: &TlsFiles) -> Result<Tls> {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let chain = certificates(&files.cert)?;
            let key = PrivateKeyDer::from_pem_file(&files.key)
                .map_err(|e| bad(&files.key, format!("no usable private key (PKCS#8, PKCS#1 or SEC1 PEM): {e}")))?;
            let mut roots = rustls::RootCertStore::empty();
            for ca in certificates(&files.ca)? {
                roots.add(ca).map_err(|e| bad(&files.ca, format!("not a usable CA certificate: {e}")))?;
            }
            let roots = Arc::new(roots);
            let versions = |e: rustls::Error| Error::InvalidConfig { field: "tls", reason: e.to_string() };
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                .build()
                .map_err(|e| bad(&files.ca, format!("cannot verify clients with these CAs: {e}")))?;
            let server = rustls::ServerConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(versions)?
                .with_client_cert_verifier(verifier)
                .with_single_cert(chain.clone(), key.clone_key())
                .map_err(|e| {
                    bad(&files.key, format!("does not match the certificate {}: {e}", files.cert.display()))
                })?;
            let client = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(versions)?
                .with_root_certificates(roots)
                .with_client_auth_cert(chain, key)
                .map_err(|e| {
                    bad(&files.key, format!("does not match the certificate {}: {e}", files.cert.display()))
                })?;
            Ok(Tls {
                acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
                connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
            })
        }

        /// The server side of a connection a keeper accepted.
        pub(crate) async fn accept(&self, stream: TcpStream) -> std::io::Result<(ReadSide, WriteSide)> {
            let tls = self.acceptor.accept(stream).await?;
            Ok(peer_stream::tls(tokio_rustls::TlsStream::Server(tls)))
        }

        /// The client side, checking the keeper's certificate names `address`'s host.
        pub(crate) async fn connect(&self, stream: TcpStream, address: &str) -> std::io::Result<(ReadSide, WriteSide)> {
            let host = host_of(address);
            let name = ServerName::try_from(host.to_string()).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("`{host}` is not a host name: {e}"))
            })?;
            let tls = self.connector.connect(name, stream).await?;
            Ok(peer_stream::tls(tokio_rustls::TlsStream::Client(tls)))
        }
    }

    /// The host of `host:port` or `[v6]:port`.
    fn host_of(address: &str) -> &str {
        let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
        host.trim_start_matches('[').trim_end_matches(']')
    }

    #[cfg(test)]
    mod tests {
        use super::host_of;

        #[test]
        fn hosts_are_taken_from_addresses() {
            assert_eq!(host_of("10.0.0.1:7000"), "10.0.0.1");
            assert_eq!(host_of("node-3.cluster:7000"), "node-3.cluster");
            assert_eq!(host_of("[::1]:7000"), "::1");
        }
    }
}

/// The loaded settings, or why they cannot be used.
#[cfg(feature = "tls")]
pub(crate) fn load(files: Option<&TlsFiles>) -> Result<Option<std::sync::Arc<Tls>>> {
    files.map(|f| Tls::load(f).map(std::sync::Arc::new)).transpose()
}

/// Without the `tls` feature there is nothing to load; asking for TLS is an error.
#[cfg(not(feature = "tls"))]
pub(crate) fn load(files: Option<&TlsFiles>) -> Result<Option<std::sync::Arc<Tls>>> {
    match files {
        None => Ok(None),
        Some(f) => Err(bad(
            &f.cert,
            "TLS was asked for, but geeps-net was built without its `tls` feature; enable geeps' `tls` feature",
        )),
    }
}

/// Stands in for the loaded settings when the feature is off: it has no
/// values, so the TLS branches of the callers can never run.
#[cfg(not(feature = "tls"))]
pub(crate) enum Tls {}

#[cfg(not(feature = "tls"))]
impl Tls {
    pub(crate) async fn accept(
        &self,
        _: tokio::net::TcpStream,
    ) -> std::io::Result<(crate::conn::peer_stream::ReadSide, crate::conn::peer_stream::WriteSide)> {
        match *self {}
    }

    pub(crate) async fn connect(
        &self,
        _: tokio::net::TcpStream,
        _: &str,
    ) -> std::io::Result<(crate::conn::peer_stream::ReadSide, crate::conn::peer_stream::WriteSide)> {
        match *self {}
    }
}
