//! A puller thread (one per partition): merges rows published by the keeper
//! into the parameter cache, advances the cached data age and wakes readers.
//! It never sends anything.

use std::sync::Arc;

use crossbeam_channel::Receiver;

use crate::engine::pull;
use crate::engine::shared::Shared;
use crate::engine::staging::Staging;
use crate::transport::Inbound;

pub(crate) enum PullMsg {
    Inbound(Inbound),
    Stop,
}

pub(crate) fn run(sh: Arc<Shared>, rx: Receiver<PullMsg>) {
    let mut staging = Staging::default();
    for msg in rx {
        match msg {
            PullMsg::Stop => return,
            PullMsg::Inbound(Inbound::Failed(e)) => sh.fail(e),
            PullMsg::Inbound(Inbound::Rows(p)) => {
                if let Err(e) = pull::apply_publish(&sh, &p, &mut staging) {
                    tracing::error!(table = p.table, partition = p.partition, error = %e, "bad publication");
                    sh.fail(e);
                }
            }
        }
    }
}
