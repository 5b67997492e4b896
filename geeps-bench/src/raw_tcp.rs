//! The network baseline: N processes in a full TCP mesh on loopback. Per
//! round every rank sends `bytes / N` to every rank (itself included) and
//! receives as much from each, then waits for all of it (a barrier, like a
//! BSP clock): `2 × bytes` per rank per round, the traffic of a clock
//! exchange of a `bytes` table. It owns the sockets of one rank; it never
//! touches geeps beyond its rendezvous.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::error::{BenchError, Result};
use crate::ranks::RankEnv;

pub const ROLE: &str = "raw-tcp";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExchangeJob {
    /// Bytes of the table exchanged per clock.
    pub bytes: usize,
    /// Timed rounds (after one untimed).
    pub rounds: usize,
}

/// A rank's bytes/s, in + out.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rate {
    pub bytes_per_second: f64,
}

fn io(e: std::io::Error) -> BenchError {
    BenchError::msg(format!("raw TCP: {e}"))
}

pub fn rank_main(env: &RankEnv) -> Result<Rate> {
    let job: ExchangeJob = env.job()?;
    let (rank, world) = (env.rank, env.world);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind((env.listen_host()?.as_str(), 0)).await.map_err(io)?;
        let me = listener.local_addr().map_err(io)?.to_string();
        let roster =
            geeps::net::rendezvous::register(&env.server, rank, world, &env.token, &me, Duration::from_secs(60))
                .await?;
        let accept = tokio::spawn(async move {
            let mut incoming = Vec::with_capacity(world);
            for _ in 0..world {
                let (s, _) = listener.accept().await?;
                s.set_nodelay(true)?;
                incoming.push(s);
            }
            Ok::<_, std::io::Error>(incoming)
        });
        let mut writers = Vec::with_capacity(world);
        for addr in &roster {
            let s = TcpStream::connect(addr).await.map_err(io)?;
            s.set_nodelay(true).map_err(io)?;
            writers.push(s);
        }
        let mut readers = accept.await.map_err(|e| BenchError::msg(format!("accept task: {e}")))?.map_err(io)?;
        let chunk = Arc::new(vec![1u8; job.bytes / world]);
        let mut start = Instant::now();
        for round in 0..=job.rounds {
            if round == 1 {
                start = Instant::now();
            }
            let mut tasks = Vec::with_capacity(2 * world);
            for mut w in writers.drain(..) {
                let c = chunk.clone();
                tasks.push(tokio::spawn(async move { w.write_all(&c).await.map(|_| (Some(w), None)) }));
            }
            for mut r in readers.drain(..) {
                let n = chunk.len();
                tasks.push(tokio::spawn(async move {
                    let mut buf = vec![0u8; n];
                    r.read_exact(&mut buf).await.map(|_| (None, Some(r)))
                }));
            }
            for t in tasks {
                match t.await.map_err(|e| BenchError::msg(format!("socket task: {e}")))?.map_err(io)? {
                    (Some(w), _) => writers.push(w),
                    (_, Some(r)) => readers.push(r),
                    _ => {}
                }
            }
        }
        let moved = 2 * chunk.len() * world * job.rounds;
        Ok(Rate { bytes_per_second: moved as f64 / start.elapsed().as_secs_f64() })
    })
}
