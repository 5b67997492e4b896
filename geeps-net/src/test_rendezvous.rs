//! A loopback rendezvous for the multi-rank unit tests: serves `world` ranks
//! with `token` on a thread of its own and returns its address. Test-only;
//! it never outlives the test process's need for it (the thread ends when
//! the rendezvous completes or times out).

use std::time::Duration;

pub(crate) fn loopback_rendezvous(world: usize, token: &str) -> String {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap().to_string();
    std_listener.set_nonblocking(true).unwrap();
    let token = token.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            let _ = crate::rendezvous::serve(listener, world, token, Duration::from_secs(30)).await;
        })
    });
    addr
}
