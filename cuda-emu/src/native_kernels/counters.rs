//! Launches run natively so far in this process, by kernel name: what lets a
//! test show a launch really took the native path. Must never count a
//! launch the interpreter ran.

use std::collections::BTreeMap;
use std::sync::Mutex;

static LAUNCHES: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// How many launches of each kernel ran natively in this process.
pub fn launches() -> BTreeMap<String, u64> {
    LAUNCHES.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Counts one native launch of `name`.
pub(crate) fn count(name: &str) {
    *LAUNCHES.lock().unwrap_or_else(|p| p.into_inner()).entry(name.to_string()).or_default() += 1;
}
