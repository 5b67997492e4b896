//! `caffe-geeps train --gpu 0,1,...` on one machine: one worker process per
//! GPU, started by re-running this very command under `geeps-launch -n K`
//! (which hosts the rendezvous, forwards signals and restarts). Each rank
//! then takes the GPU at its rank in the list. It owns finding geeps-launch;
//! it must never start ranks itself.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use crate::error::Error;

/// geeps-launch beside this executable, else on PATH.
fn geeps_launch() -> Option<PathBuf> {
    let beside = std::env::current_exe().ok().map(|e| e.with_file_name("geeps-launch")).filter(|p| p.is_file());
    beside.or_else(|| {
        std::env::var_os("PATH")
            .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("geeps-launch")).find(|p| p.is_file()))
    })
}

/// Replaces this process with `geeps-launch -n gpus -- <this command>`;
/// returns only the error that kept it from doing so.
pub fn one_process_per_gpu(gpus: usize) -> Error {
    let Some(launcher) = geeps_launch() else {
        return Error::config(format!(
            "--gpu lists {gpus} GPUs: caffe-geeps runs one process per GPU through geeps-launch, which is neither \
             beside caffe-geeps nor on PATH; install it (cargo install --path geeps-launch), or pass --workers \
             {gpus} to run the workers as threads of this process"
        ));
    };
    let me = match std::env::current_exe() {
        Ok(me) => me,
        Err(e) => return Error::config(format!("cannot find this program to start one process per GPU: {e}")),
    };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    tracing::info!("one worker process per GPU: {} -n {gpus} -- {} ...", launcher.display(), me.display());
    let err = Command::new(&launcher).arg("-n").arg(gpus.to_string()).arg("--").arg(me).args(args).exec();
    Error::config(format!("starting {}: {err}", launcher.display()))
}
