//! Caffe's LMDB databases (a directory with `data.mdb`, records in key
//! order, each value one serialised `Datum`), through the `heed` crate:
//! writing them in batches of transactions, and reading any record by its
//! position in key order, so each worker can take its own disjoint shard.
//! It owns the database handling and the LevelDB refusal; it must never
//! decode a record (the Data layer does).

use std::path::{Path, PathBuf};

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions};

use crate::error::{Error, Result};

/// Address space reserved for a database (Caffe reserves 1 TiB too); the
/// file grows only as records are written.
const MAP_SIZE: usize = 1 << 40;

/// Records per write transaction.
const BATCH: usize = 1000;

fn db_err(path: &Path, what: &str, e: heed::Error) -> Error {
    Error::file(path, format!("{what}: {e}"))
}

/// A new LMDB being filled, record by record, in the order given.
pub struct LmdbWriter {
    path: PathBuf,
    env: Env,
    db: Database<Bytes, Bytes>,
    pending: Vec<(Vec<u8>, Vec<u8>)>,
    written: usize,
}

impl LmdbWriter {
    /// Creates the database directory `path`, which must not exist yet.
    pub fn create(path: &Path) -> Result<LmdbWriter> {
        if path.exists() {
            return Err(Error::file(path, "already exists; remove it or choose another output"));
        }
        std::fs::create_dir_all(path).map_err(|e| Error::file(path, format!("cannot create: {e}")))?;
        // SAFETY: heed requires that the environment is not opened twice with
        // different flags in one process; the directory was just created.
        let env = unsafe { EnvOpenOptions::new().map_size(MAP_SIZE).max_dbs(1).open(path) }
            .map_err(|e| db_err(path, "cannot create an LMDB", e))?;
        let mut txn = env.write_txn().map_err(|e| db_err(path, "cannot write", e))?;
        let db = env.create_database(&mut txn, None).map_err(|e| db_err(path, "cannot create the database", e))?;
        txn.commit().map_err(|e| db_err(path, "cannot write", e))?;
        Ok(LmdbWriter { path: path.to_path_buf(), env, db, pending: Vec::new(), written: 0 })
    }

    /// Adds one record; records are committed in batches.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.pending.push((key.to_vec(), value.to_vec()));
        if self.pending.len() >= BATCH {
            self.commit()?;
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<()> {
        let mut txn = self.env.write_txn().map_err(|e| db_err(&self.path, "cannot write", e))?;
        for (k, v) in self.pending.drain(..) {
            self.db.put(&mut txn, &k, &v).map_err(|e| db_err(&self.path, "cannot write a record", e))?;
            self.written += 1;
        }
        txn.commit().map_err(|e| db_err(&self.path, "cannot commit", e))
    }

    /// Commits what is left and flushes the database to disk; returns the
    /// number of records.
    pub fn finish(mut self) -> Result<usize> {
        self.commit()?;
        self.env.force_sync().map_err(|e| db_err(&self.path, "cannot sync", e))?;
        // Closed now, so this process can open it again for reading.
        self.env.prepare_for_closing().wait();
        Ok(self.written)
    }
}

/// An LMDB opened for reading: its keys in order, values fetched on demand.
pub struct LmdbReader {
    path: PathBuf,
    env: Env,
    db: Database<Bytes, Bytes>,
    keys: Vec<Vec<u8>>,
}

impl std::fmt::Debug for LmdbReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LmdbReader").field("path", &self.path).field("records", &self.keys.len()).finish()
    }
}

/// Whether `path` looks like a LevelDB (Caffe's other backend).
fn is_leveldb(path: &Path) -> bool {
    path.join("CURRENT").is_file()
        && std::fs::read_dir(path)
            .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("MANIFEST-")))
            .unwrap_or(false)
}

impl LmdbReader {
    /// Opens an existing LMDB directory read-only.
    pub fn open(path: &Path) -> Result<LmdbReader> {
        if is_leveldb(path) {
            return Err(Error::file(path, leveldb_message()));
        }
        if !path.join("data.mdb").is_file() {
            return Err(Error::file(
                path,
                "is not an LMDB (a directory with data.mdb); make one with caffe-geeps convert-mnist or \
                 convert-imageset",
            ));
        }
        // SAFETY: opened read-only; nothing in this process writes it.
        let env = unsafe {
            EnvOpenOptions::new().map_size(MAP_SIZE).max_dbs(1).flags(EnvFlags::READ_ONLY | EnvFlags::NO_TLS).open(path)
        }
        .map_err(|e| db_err(path, "cannot open the LMDB", e))?;
        let txn = env.read_txn().map_err(|e| db_err(path, "cannot read", e))?;
        let db: Database<Bytes, Bytes> = env
            .open_database(&txn, None)
            .map_err(|e| db_err(path, "cannot open the database", e))?
            .ok_or_else(|| Error::file(path, "holds no database"))?;
        let mut keys = Vec::new();
        for item in db.iter(&txn).map_err(|e| db_err(path, "cannot read", e))? {
            let (k, _) = item.map_err(|e| db_err(path, "cannot read a record", e))?;
            keys.push(k.to_vec());
        }
        drop(txn);
        if keys.is_empty() {
            return Err(Error::file(path, "holds no record"));
        }
        Ok(LmdbReader { path: path.to_path_buf(), env, db, keys })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records, in key order.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key of record `index`.
    pub fn key(&self, index: usize) -> &[u8] {
        &self.keys[index]
    }

    /// Calls `f(k, value)` for the records at `indices` (k counts from 0),
    /// all read in one transaction.
    pub fn with_values(&self, indices: &[usize], mut f: impl FnMut(usize, &[u8]) -> Result<()>) -> Result<()> {
        let txn = self.env.read_txn().map_err(|e| db_err(&self.path, "cannot read", e))?;
        for (k, &i) in indices.iter().enumerate() {
            let value = self
                .db
                .get(&txn, &self.keys[i])
                .map_err(|e| db_err(&self.path, "cannot read a record", e))?
                .ok_or_else(|| Error::file(&self.path, format!("record {i} vanished while reading")))?;
            f(k, value)?;
        }
        Ok(())
    }
}

/// What to tell a user whose data is a LevelDB.
pub fn leveldb_message() -> String {
    "backend: LEVELDB is not supported; convert the data to an LMDB (caffe-geeps convert-mnist or \
     convert-imageset from the original images, or Caffe's convert_imageset -backend lmdb) and set \
     `backend: LMDB`"
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Cursor;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("geeps-lmdb-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn records_round_trip_in_key_order_and_shard_disjointly() {
        let dir = scratch("round-trip");
        let mut w = LmdbWriter::create(&dir).unwrap();
        // Written out of order: read back in key order, as Caffe reads.
        for i in (0..2500u32).rev() {
            w.put(format!("{i:08}").as_bytes(), &i.to_le_bytes()).unwrap();
        }
        assert_eq!(w.finish().unwrap(), 2500);
        assert!(LmdbWriter::create(&dir).err().unwrap().to_string().contains("already exists"));
        let r = LmdbReader::open(&dir).unwrap();
        assert_eq!(r.len(), 2500);
        assert_eq!(r.key(7), b"00000007");
        let mut seen = vec![0u32; 2500];
        for rank in 0..3 {
            let mut cursor = Cursor::new(r.len(), rank, 3).unwrap();
            let shard = cursor.take(cursor.len());
            r.with_values(&shard, |k, v| {
                let i = u32::from_le_bytes(v.try_into().unwrap());
                assert_eq!(i as usize, shard[k]);
                assert_eq!(i as usize % 3, rank);
                seen[i as usize] += 1;
                Ok(())
            })
            .unwrap();
        }
        assert!(seen.iter().all(|&n| n == 1), "the shards cover every record once");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn leveldb_and_missing_databases_are_named() {
        let dir = scratch("leveldb");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("CURRENT"), "MANIFEST-000002\n").unwrap();
        std::fs::write(dir.join("MANIFEST-000002"), "").unwrap();
        let err = LmdbReader::open(&dir).unwrap_err().to_string();
        assert!(err.contains("LEVELDB") && err.contains("convert"), "{err}");
        let err = LmdbReader::open(&dir.join("nothing")).unwrap_err().to_string();
        assert!(err.contains("is not an LMDB"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
