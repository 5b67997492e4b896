//! What is set on every keeper connection's socket, at both ends: no Nagle
//! delay, and the congestion control `NetOptions::tcp_congestion` names.
//! It checks a name against the kernel once, at start; it never changes
//! the system's default.

use tokio::net::TcpStream;

/// The longest name the kernel takes (`TCP_CA_NAME_MAX` less its NUL).
const MAX_NAME: usize = 15;

/// Sets the connection's options. The congestion control was checked at
/// start ([`check_congestion`]); a socket that refuses it anyway keeps the
/// system's, with a warning.
pub(crate) fn tune(stream: &TcpStream, congestion: Option<&str>) {
    let _ = stream.set_nodelay(true);
    if let Some(name) = congestion {
        if let Err(e) = set_congestion(stream, name) {
            tracing::warn!(congestion = %name, "a keeper connection keeps the system's congestion control: {e}");
        }
    }
}

#[cfg(target_os = "linux")]
fn set_congestion(stream: &TcpStream, name: &str) -> std::io::Result<()> {
    socket2::SockRef::from(stream).set_tcp_congestion(name.as_bytes())
}

#[cfg(not(target_os = "linux"))]
fn set_congestion(_: &TcpStream, _: &str) -> std::io::Result<()> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "a congestion control per socket is a Linux setting"))
}

/// The congestion control a socket uses (for tests).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn congestion_of(socket: socket2::SockRef<'_>) -> std::io::Result<String> {
    let name = socket.tcp_congestion()?;
    Ok(String::from_utf8_lossy(&name).trim_end_matches('\0').to_string())
}

/// Whether this kernel lets this process give its sockets congestion
/// control `name`; the error says what to set instead.
pub(crate) fn check_congestion(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "`{name}` is not a congestion control's name (1 to {MAX_NAME} printable characters, as in \
             /proc/sys/net/ipv4/tcp_available_congestion_control)"
        ));
    }
    probe(name)
}

#[cfg(target_os = "linux")]
fn probe(name: &str) -> Result<(), String> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)
        .or_else(|_| Socket::new(Domain::IPV6, Type::STREAM, None))
        .map_err(|e| format!("no TCP socket to try congestion control `{name}` on: {e}"))?;
    let listed = |file: &str| {
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/{file}"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|e| format!("unknown ({file}: {e})"))
    };
    match socket.set_tcp_congestion(name.as_bytes()) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Err(format!(
            "this kernel has no congestion control `{name}`; it has {} (tcp_available_congestion_control; \
             `modprobe tcp_{name}` may add it), or leave GEEPS_TCP_CONGESTION (NetOptions::tcp_congestion) unset for the system's",
            listed("tcp_available_congestion_control")
        )),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(format!(
            "congestion control `{name}` is not allowed to this process; it may use {} \
             (net.ipv4.tcp_allowed_congestion_control), or leave GEEPS_TCP_CONGESTION (NetOptions::tcp_congestion) unset for the system's",
            listed("tcp_allowed_congestion_control")
        )),
        Err(e) => Err(format!("congestion control `{name}`: {e}")),
    }
}

#[cfg(not(target_os = "linux"))]
fn probe(name: &str) -> Result<(), String> {
    Err(format!(
        "congestion control `{name}`: a congestion control per socket is a Linux setting; leave it unset on this system"
    ))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A connected pair on loopback, both ends tuned with `congestion`.
    async fn pair(congestion: Option<&str>) -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        tune(&client, congestion);
        tune(&server, congestion);
        (client, server)
    }

    #[tokio::test]
    async fn both_ends_get_the_named_congestion_control_and_unset_keeps_the_systems() {
        // reno is built into every Linux kernel and allowed to every process.
        assert_eq!(check_congestion("reno"), Ok(()));
        let (client, server) = pair(Some("reno")).await;
        assert_eq!(congestion_of((&client).into()).unwrap(), "reno");
        assert_eq!(congestion_of((&server).into()).unwrap(), "reno");
        assert!(client.nodelay().unwrap() && server.nodelay().unwrap());

        let system = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
        let (client, _server) = pair(None).await;
        assert_eq!(congestion_of((&client).into()).unwrap(), system.trim());
    }

    #[test]
    fn a_name_the_kernel_lacks_is_refused_with_what_it_has() {
        let e = check_congestion("warp9").unwrap_err();
        assert!(e.contains("no congestion control `warp9`") && e.contains("reno"), "{e}");
    }

    #[test]
    fn a_malformed_name_is_refused_before_the_kernel_is_asked() {
        for bad in ["", "cubic cubic", "a_name_far_too_long", "cu\0bic"] {
            let e = check_congestion(bad).unwrap_err();
            assert!(e.contains("is not a congestion control's name"), "{bad:?}: {e}");
        }
    }
}
