//! Mutual TLS on keeper connections: a cluster whose ranks present
//! certificates of one CA trains with the right sums; a peer speaking plain
//! TCP, or one whose certificate another CA signed, is refused (the latter
//! with an error saying what to fix); unusable files are named.

use std::path::{Path, PathBuf};
use std::time::Duration;

use geeps_core::{keys, Config, Error, Geeps, Slack};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use tokio::io::AsyncWriteExt;

use crate::wire::frame::{read_frame, write_frame};
use crate::wire::{Body, Header, Hello, PROTOCOL_VERSION};
use crate::{ClusterSpec, NetCluster, NetOptions, TlsFiles};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("geeps-tls-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A CA, and `ranks` certificates it signs for 127.0.0.1, as PEM files under `dir`.
fn pki(dir: &Path, tag: &str, ranks: usize) -> Vec<TlsFiles> {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let ca_path = dir.join(format!("{tag}-ca.pem"));
    std::fs::write(&ca_path, ca_cert.pem()).unwrap();
    (0..ranks)
        .map(|r| {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
                .unwrap()
                .signed_by(&key, &ca_cert, &ca_key)
                .unwrap();
            let (c, k) = (dir.join(format!("{tag}-{r}.pem")), dir.join(format!("{tag}-{r}.key")));
            std::fs::write(&c, cert.pem()).unwrap();
            std::fs::write(&k, key.serialize_pem()).unwrap();
            TlsFiles::new(c, k, ca_path.clone())
        })
        .collect()
}

fn free_port() -> String {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap().to_string()
}

fn options(files: &TlsFiles) -> NetOptions {
    NetOptions::default()
        .with_token("t")
        .with_tls(files.clone())
        .with_connect_timeout(Duration::from_secs(20))
        .with_shutdown_timeout(Duration::from_secs(10))
}

/// Each rank adds 1 to every row for `clocks` BSP clocks; returns what it last read.
fn train(rank: usize, addresses: Vec<String>, opts: NetOptions, clocks: usize) -> Result<Vec<f32>, Error> {
    let others = addresses.len() as u64 - 1;
    let mut cluster = NetCluster::start(ClusterSpec::fixed(rank, addresses, opts))?;
    let mut b = Geeps::builder(Config::default().with_row_width(4).with_wait_deadline(Duration::from_secs(30)));
    let w = b.parameter_table("w", 6);
    b.transport(cluster.transport());
    let ps = b.build()?;
    ps.finish_virtual_iteration()?;
    let mut last = Vec::new();
    for _ in 0..clocks {
        let mut delta = ps.pre_update_keys(&keys(w, 0..6))?;
        delta.as_mut_slice()?.fill(1.0);
        delta.update()?;
        ps.clock()?;
    }
    let read = ps.read_keys(&keys(w, 0..6), Slack::BSP)?;
    last.extend_from_slice(read.as_slice()?);
    drop(read);
    ps.shutdown()?;
    // TLS stays on TCP even between ranks on one host (shared memory is on by default).
    assert_eq!((cluster.keeper_socket_batches(), cluster.keeper_shm_batches()), (clocks as u64 * others, 0));
    cluster.shutdown()?;
    Ok(last)
}

#[test]
fn a_tls_cluster_trains_with_the_right_sums() {
    let dir = scratch("train");
    let files = pki(&dir, "ok", 3);
    let addresses: Vec<String> = (0..3).map(|_| free_port()).collect();
    let ranks: Vec<_> = (0..3)
        .map(|r| {
            let (a, o) = (addresses.clone(), options(&files[r]));
            std::thread::spawn(move || train(r, a, o, 5))
        })
        .collect();
    for (r, t) in ranks.into_iter().enumerate() {
        let rows = t.join().unwrap().unwrap_or_else(|e| panic!("rank {r}: {e}"));
        assert!(rows.iter().all(|&v| v == 15.0), "rank {r} read {rows:?}, expected 3 ranks x 5 clocks");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_peer_speaking_plain_tcp_is_refused() {
    let dir = scratch("plain");
    let files = pki(&dir, "ok", 2);
    let addresses = vec![free_port(), free_port()];
    let _keeper = NetCluster::start(ClusterSpec::fixed(0, addresses.clone(), options(&files[0]))).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut s = tokio::net::TcpStream::connect(&addresses[0]).await.unwrap();
        let hello = Hello { protocol: PROTOCOL_VERSION, token: "t".into(), rank: 1, world: 2, ..Default::default() };
        write_frame(&mut s, Header::new(Body::Hello(hello)), None).await.unwrap();
        let _ = s.flush().await;
        let (mut rd, _wr) = s.into_split();
        // No welcome (nor any frame): the keeper drops a peer that does not start TLS.
        let answer = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut rd, 1 << 20)).await;
        match answer {
            Ok(Ok((h, _))) => panic!("a plain-TCP peer got an answer: {:?}", h.body),
            Ok(Err(_)) => {}
            Err(_) => panic!("the keeper neither answered nor closed within 10 s"),
        }
    });
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_rank_whose_certificate_another_ca_signed_is_refused_with_the_reason() {
    let dir = scratch("foreign");
    let ours = pki(&dir, "ours", 2);
    let theirs = pki(&dir, "theirs", 2);
    let addresses = vec![free_port(), free_port()];
    // Each keeper serves until both workers have tried to join: a rank that
    // failed first must not take its keeper away before the other rank's
    // worker reaches it (that one would see a refused connection instead).
    let both_tried = std::sync::Arc::new(std::sync::Barrier::new(2));
    let ranks: Vec<_> = [ours[0].clone(), theirs[1].clone()]
        .into_iter()
        .enumerate()
        .map(|(r, f)| {
            let o =
                options(&f).with_connect_timeout(Duration::from_secs(10)).with_shutdown_timeout(Duration::from_secs(1));
            let (a, both_tried) = (addresses.clone(), both_tried.clone());
            std::thread::spawn(move || -> Result<(), Error> {
                let cluster = NetCluster::start(ClusterSpec::fixed(r, a, o))?;
                let mut b = Geeps::builder(Config::default().with_row_width(4));
                b.parameter_table("w", 6);
                b.transport(cluster.transport());
                let built = b.build().map(drop);
                both_tried.wait();
                drop(cluster);
                built
            })
        })
        .collect();
    for (r, t) in ranks.into_iter().enumerate() {
        let err = t.join().unwrap().expect_err("mixed CAs cannot form a cluster");
        let text = err.to_string();
        assert!(text.contains("TLS handshake") && text.contains("same CA"), "rank {r}: {text}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn unusable_tls_files_are_named() {
    let dir = scratch("files");
    let files = pki(&dir, "ok", 2);
    let start = |f: TlsFiles| NetCluster::start(ClusterSpec::fixed(0, vec![free_port()], options(&f))).err().unwrap();
    let missing = TlsFiles::new(dir.join("nope.pem"), files[0].key.clone(), files[0].ca.clone());
    let e = start(missing).to_string();
    assert!(e.contains("nope.pem"), "{e}");
    // The key of another certificate.
    let mismatched = TlsFiles::new(files[0].cert.clone(), files[1].key.clone(), files[0].ca.clone());
    let e = start(mismatched).to_string();
    assert!(e.contains("does not match the certificate"), "{e}");
    // A CA file that is a key.
    let not_ca = TlsFiles::new(files[0].cert.clone(), files[0].key.clone(), files[0].key.clone());
    let e = start(not_ca).to_string();
    assert!(e.contains("certificate"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}
