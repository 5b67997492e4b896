//! The sync scenario's in-run baseline: a ring all-reduce over raw TCP
//! between N processes on loopback, as gloo and MPI do it. Each rank sends
//! to the next and receives from the previous: N-1 reduce-scatter steps of
//! `bytes / N` (received chunks added in), then N-1 all-gather steps, so a
//! rank sends `2(N-1)/N × bytes` per clock. It owns the sockets of one rank;
//! it never touches geeps beyond its rendezvous.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::ops::Range;
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};
use crate::ranks::RankEnv;
use crate::socket_bytes;
use crate::sync_job::{self, ClockTimes, SyncJob};

pub const ROLE: &str = "ring-allreduce";

fn io(what: &'static str) -> impl Fn(std::io::Error) -> BenchError {
    move |e| BenchError::msg(format!("ring all-reduce: {what}: {e}"))
}

/// Chunk `i` of `n` floats split `world` ways.
fn chunk(i: usize, world: usize, n: usize) -> Range<usize> {
    i * n / world..(i + 1) * n / world
}

/// Sends `out` to the next rank while receiving `into.len()` floats from the
/// previous one: both at once, or a chunk larger than the socket buffers
/// would deadlock the ring.
fn exchange(next: &mut TcpStream, prev: &mut TcpStream, out: &[f32], into: &mut [f32]) -> Result<()> {
    std::thread::scope(|s| {
        let sender = s.spawn(|| next.write_all(bytemuck::cast_slice(out)));
        let got = prev.read_exact(bytemuck::cast_slice_mut(into)).map_err(io("receive"));
        sender.join().map_err(|_| BenchError::msg("ring all-reduce: sender panicked"))?.map_err(io("send"))?;
        got
    })
}

/// One all-reduce (sum) of `data` around the ring.
fn all_reduce(
    rank: usize,
    world: usize,
    next: &mut TcpStream,
    prev: &mut TcpStream,
    data: &mut [f32],
    scratch: &mut [f32],
) -> Result<()> {
    let n = data.len();
    let at = |step: usize, back: usize| (rank + world * 2 - step - back) % world;
    for step in 0..world - 1 {
        let (send, recv) = (chunk(at(step, 0), world, n), chunk(at(step, 1), world, n));
        let into = &mut scratch[..recv.len()];
        exchange(next, prev, &data[send], into)?;
        data[recv].iter_mut().zip(into.iter()).for_each(|(d, x)| *d += *x);
    }
    for step in 0..world - 1 {
        // Send the chunk completed last step, receive the one before it.
        let (send, recv) = (chunk((at(step, 0) + 1) % world, world, n), chunk(at(step, 0), world, n));
        let into = &mut scratch[..recv.len()];
        exchange(next, prev, &data[send], into)?;
        data[recv].copy_from_slice(into);
    }
    Ok(())
}

fn connect(env: &RankEnv) -> Result<(TcpStream, TcpStream)> {
    let (rank, world) = (env.rank, env.world);
    let listener = TcpListener::bind((env.listen_host()?.as_str(), 0)).map_err(io("bind"))?;
    let me = listener.local_addr().map_err(io("bind"))?.to_string();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let roster = rt.block_on(geeps::net::rendezvous::register(
        &env.server,
        rank,
        world,
        &env.token,
        &me,
        Duration::from_secs(60),
    ))?;
    let next_addr = &roster[(rank + 1) % world];
    let next = std::thread::scope(|s| {
        let accept = s.spawn(|| listener.accept().map(|(p, _)| p));
        let next = TcpStream::connect(next_addr).map_err(io("connect"));
        let prev = accept.join().map_err(|_| BenchError::msg("ring all-reduce: accept panicked"))?;
        Ok::<_, BenchError>((next?, prev.map_err(io("accept"))?))
    })?;
    crate::ranks::tune_socket(&next.0).map_err(io("socket options"))?;
    crate::ranks::tune_socket(&next.1).map_err(io("socket options"))?;
    Ok(next)
}

pub fn rank_main(env: &RankEnv) -> Result<ClockTimes> {
    let job: SyncJob = env.job()?;
    let (rank, world) = (env.rank, env.world);
    if world < 2 {
        return Err(BenchError::msg("ring all-reduce needs at least 2 ranks"));
    }
    let (mut next, mut prev) = connect(env)?;
    let mut data = vec![0f32; job.floats()];
    let mut scratch = vec![0f32; job.floats().div_ceil(world) + 1];
    let mut seconds = Vec::with_capacity(job.clocks);
    let mut counter = socket_bytes::Counter::default();
    for clock in 0..=job.clocks {
        counter.at_clock(clock, job.clocks);
        // The deltas are the application's (untimed), as in the engine's run.
        data.fill((rank + 1) as f32);
        let start = Instant::now();
        all_reduce(rank, world, &mut next, &mut prev, &mut data, &mut scratch)?;
        if clock > 0 {
            seconds.push(start.elapsed().as_secs_f64());
        }
        sync_job::check("ring all-reduce", &data, sync_job::reduced(world))?;
    }
    Ok(ClockTimes { seconds, received_bytes_per_clock: counter.per_clock() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_table_once() {
        for world in 1..6 {
            for n in [0, 1, 7, 100] {
                let covered: usize = (0..world).map(|i| chunk(i, world, n).len()).sum();
                assert_eq!(covered, n);
                assert_eq!(chunk(world - 1, world, n).end, n);
            }
        }
    }
}
