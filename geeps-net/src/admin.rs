//! The admin endpoint (feature `admin`): a gRPC service rank 0 serves next
//! to its keeper, answering with what that keeper knows — every rank's state
//! and clocks, the stall and copies each rank last reported, the bytes
//! moved — and relaying an operator's drain to every rank. gRPC reflection
//! is on, so `grpcurl -plaintext 127.0.0.1:PORT geeps.admin.v1.Admin/Status`
//! works without the schema. Loopback needs no credentials; beyond loopback
//! every request must carry the cluster token (`authorization: Bearer
//! TOKEN`). It must never block the keeper: it only reads its state.

use std::net::SocketAddr;
use std::sync::Arc;

use geeps_core::{Error, Result};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::keeper::KeeperService;
use crate::security::auth::token_matches;

#[cfg(test)]
#[path = "../tests/unit/admin_tests.rs"]
mod admin_tests;

#[allow(clippy::all, missing_docs, unreachable_pub)]
pub(crate) mod proto {
    tonic::include_proto!("geeps.admin.v1");
    pub(crate) const DESCRIPTOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/admin_descriptor.bin"));
}

use proto::admin_server::{Admin, AdminServer};
use proto::{CheckpointReply, CheckpointRequest, DrainReply, DrainRequest, RankStatus, StatusReply, StatusRequest};

struct Service {
    keeper: Arc<KeeperService>,
    world: usize,
    /// Required on every request when the endpoint listens beyond loopback.
    token: Option<String>,
}

impl Service {
    // tonic's handlers return `Status` by value; so does this check they call.
    #[allow(clippy::result_large_err)]
    fn check<T>(&self, request: &Request<T>) -> std::result::Result<(), Status> {
        let Some(token) = &self.token else { return Ok(()) };
        let given = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if token_matches(token, given) {
            Ok(())
        } else {
            Err(Status::unauthenticated("send the cluster token as `authorization: Bearer TOKEN`"))
        }
    }
}

#[tonic::async_trait]
impl Admin for Service {
    async fn status(&self, request: Request<StatusRequest>) -> std::result::Result<Response<StatusReply>, Status> {
        self.check(&request)?;
        let report = self.keeper.report();
        let ranks: Vec<RankStatus> = report
            .ranks
            .iter()
            .map(|r| {
                let mut s = RankStatus {
                    rank: r.rank as u32,
                    address: r.address.clone(),
                    state: r.state.to_string(),
                    clock: r.table_clocks.iter().copied().min().unwrap_or(0),
                    table_clocks: r.table_clocks.clone(),
                    bytes_received: r.bytes_received,
                    bytes_sent: r.bytes_sent,
                    ..Default::default()
                };
                if let Some((w, age)) = &r.status {
                    s.reported = true;
                    s.seconds_since_report = age.as_secs_f64();
                    s.wall_seconds = w.wall_seconds;
                    s.blocked_seconds = w.blocked_seconds;
                    s.stall_fraction = w.stall_fraction;
                    s.bytes_host_to_device = w.bytes_host_to_device;
                    s.bytes_device_to_host = w.bytes_device_to_host;
                    s.slow_path_calls = w.slow_path_calls;
                }
                s
            })
            .collect();
        let slowest = ranks.iter().filter(|r| r.state == "running").min_by_key(|r| (r.clock, r.rank));
        Ok(Response::new(StatusReply {
            world: self.world as u32,
            tables: report.tables,
            slowest_rank: slowest.map_or(-1, |r| r.rank as i32),
            slowest_clock: slowest.map_or(0, |r| r.clock),
            draining: report.draining,
            ranks,
        }))
    }

    async fn checkpoint(
        &self,
        request: Request<CheckpointRequest>,
    ) -> std::result::Result<Response<CheckpointReply>, Status> {
        self.check(&request)?;
        let (told, sequence) = self.keeper.request_checkpoint();
        tracing::warn!(ranks_told = told, request = sequence, "admin: checkpoint requested");
        Ok(Response::new(CheckpointReply { ranks_told: told as u32, sequence }))
    }

    async fn drain(&self, request: Request<DrainRequest>) -> std::result::Result<Response<DrainReply>, Status> {
        self.check(&request)?;
        let told = self.keeper.drain();
        tracing::warn!(ranks_told = told, "admin: drain requested");
        Ok(Response::new(DrainReply { ranks_told: told as u32 }))
    }
}

/// Binds `listen` and serves the endpoint until `stop` turns true; returns
/// the bound address. Beyond loopback, a non-empty token is required.
pub(crate) async fn start(
    listen: &str,
    keeper: Arc<KeeperService>,
    world: usize,
    token: &str,
    mut stop: watch::Receiver<bool>,
) -> Result<SocketAddr> {
    let bad = |reason: String| Error::InvalidConfig { field: "admin", reason };
    let listener = TcpListener::bind(listen).await.map_err(|e| bad(format!("cannot listen on {listen}: {e}")))?;
    let addr = listener.local_addr()?;
    let token = if addr.ip().is_loopback() {
        None
    } else if token.is_empty() {
        return Err(bad(format!(
            "the admin endpoint would listen on {addr}, beyond loopback, without a cluster token; set GEEPS_TOKEN"
        )));
    } else {
        Some(token.to_string())
    };
    // Both reflection versions: grpcurl asks for v1 and falls back to v1alpha.
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::DESCRIPTOR)
        .build_v1()
        .map_err(|e| bad(format!("gRPC reflection: {e}")))?;
    let reflection_alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::DESCRIPTOR)
        .build_v1alpha()
        .map_err(|e| bad(format!("gRPC reflection: {e}")))?;
    let service = AdminServer::new(Service { keeper, world, token });
    tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .add_service(service)
            .add_service(reflection)
            .add_service(reflection_alpha)
            .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(listener), async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "admin endpoint failed");
        }
    });
    tracing::info!(%addr, "admin endpoint listening");
    Ok(addr)
}
