//! Whether the keeper address a rank advertises at the rendezvous can be
//! reached by the ranks it must serve: a rank that came to the rendezvous
//! over the network but advertises a loopback address would be accepted
//! and then leave every other host connecting to itself. It owns that rule
//! and the words of the refusal; it never binds, connects or resolves a
//! name.

use std::net::SocketAddr;

/// Why `advertised` cannot serve a cluster whose rendezvous this rank
/// reached at `reached` (the rendezvous's own end of the connection), or
/// `None` when it can as far as the addresses tell: a loopback address is
/// refused when the rendezvous was reached over anything but loopback.
pub(crate) fn unreachable_advert(rank: usize, advertised: &str, reached: SocketAddr) -> Option<String> {
    if reached.ip().is_loopback() || !is_loopback(advertised) {
        return None;
    }
    Some(format!(
        "rank {rank} advertises keeper address {advertised}, a loopback address, but reached the rendezvous at \
         {reached} over the network: ranks on other hosts would connect to themselves. Set GEEPS_LISTEN \
         (ClusterSpec::listen) on rank {rank} to an address of its host that the other hosts reach, or leave it \
         unset so the keeper listens on the interface that routes to the rendezvous"
    ))
}

/// A `host:port` whose host is a loopback address or `localhost`.
pub(crate) fn is_loopback(address: &str) -> bool {
    if let Ok(a) = address.parse::<SocketAddr>() {
        return a.ip().is_loopback();
    }
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(a: &str) -> SocketAddr {
        a.parse().unwrap()
    }

    #[test]
    fn a_loopback_keeper_behind_a_network_rendezvous_is_refused_naming_it_and_the_setting() {
        let why = unreachable_advert(2, "127.0.0.1:40123", at("10.77.0.1:29500")).expect("refused");
        assert!(why.contains("rank 2 advertises keeper address 127.0.0.1:40123, a loopback address"), "{why}");
        assert!(why.contains("10.77.0.1:29500"), "{why}");
        assert!(why.contains("GEEPS_LISTEN"), "{why}");
        for advertised in ["127.0.0.2:1", "[::1]:7000", "localhost:7000", "LOCALHOST.:1", "node.localhost:9"] {
            assert!(unreachable_advert(0, advertised, at("10.77.0.1:29500")).is_some(), "{advertised}");
        }
        assert!(unreachable_advert(0, "127.0.0.1:1", at("[fd00::1]:29500")).is_some());
    }

    #[test]
    fn loopback_on_one_machine_and_real_addresses_anywhere_are_accepted() {
        // Every rank on one machine: a loopback rendezvous, loopback keepers.
        assert_eq!(unreachable_advert(1, "127.0.0.1:40123", at("127.0.0.1:29500")), None);
        assert_eq!(unreachable_advert(1, "[::1]:40123", at("[::1]:29500")), None);
        // A keeper on a real address, whichever way the rendezvous was reached.
        assert_eq!(unreachable_advert(1, "10.77.0.2:40123", at("10.77.0.1:29500")), None);
        assert_eq!(unreachable_advert(1, "10.77.0.2:40123", at("127.0.0.1:29500")), None);
        assert_eq!(unreachable_advert(1, "node02:29600", at("10.0.0.1:29500")), None);
        assert_eq!(unreachable_advert(1, "0.0.0.0:29600", at("10.0.0.1:29500")), None);
    }
}
