//! HDF5 files as caffe-geeps uses them: numeric datasets of any shape
//! (read as f32; written as float, double or int), int
//! and string scalars (as Caffe's `H5LT` helpers write them), groups by
//! name. Every call into the library holds one process-wide lock (HDF5's
//! usual build is not thread-safe) and every id it opens is closed on
//! every path. It owns the handles; it must never return one.

use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, MutexGuard};

use super::sys::{self, api, Api, Hid, Hsize, H5F_ACC_RDONLY, H5F_ACC_TRUNC, H5P_DEFAULT, H5S_ALL};

fn lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock()
}

/// An id closed by `close` when dropped.
struct Owned<'a> {
    id: Hid,
    close: unsafe extern "C" fn(Hid) -> sys::Herr,
    _api: &'a Api,
}

impl Drop for Owned<'_> {
    fn drop(&mut self) {
        // SAFETY: `id` was opened by the matching call and is closed once.
        unsafe { (self.close)(self.id) };
    }
}

fn cname(name: &str) -> Result<CString, String> {
    CString::new(name).map_err(|_| format!("the name {name:?} holds a NUL byte"))
}

/// An open HDF5 file (read-only, or created afresh).
pub struct H5File {
    id: Hid,
    path: PathBuf,
    api: &'static Api,
    _lock: MutexGuard<'static, ()>,
}

impl Drop for H5File {
    fn drop(&mut self) {
        // SAFETY: opened by `create` or `open`, closed once.
        unsafe { (self.api.H5Fclose)(self.id) };
    }
}

impl H5File {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path) -> Result<H5File, String> {
        let api = api()?;
        let guard = lock();
        let c = cname(&path.to_string_lossy())?;
        let fapl = access_list(api);
        // SAFETY: a NUL-terminated path, the default creation list and an open access list.
        let id = unsafe { (api.H5Fcreate)(c.as_ptr(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id) };
        if id < 0 {
            return Err(format!("cannot create the HDF5 file {}", path.display()));
        }
        Ok(H5File { id, path: path.to_path_buf(), api, _lock: guard })
    }

    /// Opens `path` to read.
    pub fn open(path: &Path) -> Result<H5File, String> {
        let api = api()?;
        if !path.is_file() {
            return Err(format!("{} does not exist", path.display()));
        }
        let guard = lock();
        let c = cname(&path.to_string_lossy())?;
        let fapl = access_list(api);
        // SAFETY: a NUL-terminated path and an open access list.
        let id = unsafe { (api.H5Fopen)(c.as_ptr(), H5F_ACC_RDONLY, fapl.id) };
        if id < 0 {
            return Err(format!("{} is not an HDF5 file", path.display()));
        }
        Ok(H5File { id, path: path.to_path_buf(), api, _lock: guard })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn owned(&self, id: Hid, close: unsafe extern "C" fn(Hid) -> sys::Herr) -> Owned<'static> {
        Owned { id, close, _api: self.api }
    }

    /// The group or file id that `path` (`a/b`, or "" for the root) names; creates missing groups when asked.
    fn location(&self, group: &str, create: bool) -> Result<Option<Owned<'static>>, String> {
        let mut at: Option<Owned<'static>> = None;
        for part in group.split('/').filter(|p| !p.is_empty()) {
            let parent = at.as_ref().map_or(self.id, |o| o.id);
            let c = cname(part)?;
            // SAFETY: `parent` is open; the name is NUL-terminated.
            let exists = unsafe { (self.api.H5Lexists)(parent, c.as_ptr(), H5P_DEFAULT) } > 0;
            let id = match (exists, create) {
                // SAFETY: as above.
                (true, _) => unsafe { (self.api.H5Gopen2)(parent, c.as_ptr(), H5P_DEFAULT) },
                // SAFETY: as above.
                (false, true) => unsafe {
                    (self.api.H5Gcreate2)(parent, c.as_ptr(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                },
                (false, false) => return Ok(None),
            };
            if id < 0 {
                return Err(format!("{}: cannot open group {group}", self.path.display()));
            }
            at = Some(self.owned(id, self.api.H5Gclose));
        }
        Ok(Some(at.unwrap_or(Owned { id: self.id, close: noop, _api: self.api })))
    }

    /// Creates `group` (and the groups above it) where missing.
    pub fn create_group(&self, group: &str) -> Result<(), String> {
        self.location(group, true).map(|_| ())
    }

    /// Whether `group/name` exists (a dataset or a group).
    pub fn exists(&self, group: &str, name: &str) -> Result<bool, String> {
        let Some(loc) = self.location(group, false)? else { return Ok(false) };
        let c = cname(name)?;
        // SAFETY: `loc` is open; the name is NUL-terminated.
        Ok(unsafe { (self.api.H5Lexists)(loc.id, c.as_ptr(), H5P_DEFAULT) } > 0)
    }

    fn create_dataset(&self, group: &str, name: &str, type_id: Hid, space: Hid) -> Result<Owned<'static>, String> {
        let space = self.owned(space, self.api.H5Sclose);
        if space.id < 0 {
            return Err(format!("{}: cannot describe {group}/{name}", self.path.display()));
        }
        let loc = self.location(group, true)?.ok_or("no location")?;
        let c = cname(name)?;
        // SAFETY: every id is open; default property lists.
        let id = unsafe {
            (self.api.H5Dcreate2)(loc.id, c.as_ptr(), type_id, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
        };
        if id < 0 {
            return Err(format!("{}: cannot create dataset {group}/{name}", self.path.display()));
        }
        Ok(self.owned(id, self.api.H5Dclose))
    }

    /// Writes `data` as a float dataset of `shape` (its product is `data.len()`).
    pub fn write_floats(&self, group: &str, name: &str, shape: &[usize], data: &[f32]) -> Result<(), String> {
        self.write_numbers(group, name, shape, data, self.api.H5T_NATIVE_FLOAT)
    }

    /// Writes `data` as a double dataset of `shape` (as numpy's float64 is stored).
    pub fn write_doubles(&self, group: &str, name: &str, shape: &[usize], data: &[f64]) -> Result<(), String> {
        self.write_numbers(group, name, shape, data, self.api.H5T_NATIVE_DOUBLE)
    }

    /// Writes `data` as an int dataset of `shape` (labels, as tools often store them).
    pub fn write_ints(&self, group: &str, name: &str, shape: &[usize], data: &[i32]) -> Result<(), String> {
        self.write_numbers(group, name, shape, data, self.api.H5T_NATIVE_INT)
    }

    /// `data` as a dataset of `shape` whose memory type `t` is `T`'s.
    fn write_numbers<T: Copy>(
        &self,
        group: &str,
        name: &str,
        shape: &[usize],
        data: &[T],
        t: Hid,
    ) -> Result<(), String> {
        if shape.iter().product::<usize>() != data.len() {
            return Err(format!("{group}/{name}: shape {shape:?} does not hold {} values", data.len()));
        }
        let dims: Vec<Hsize> = shape.iter().map(|&d| d as Hsize).collect();
        // SAFETY: `dims` holds `rank` sizes.
        let space = unsafe { (self.api.H5Screate_simple)(dims.len() as i32, dims.as_ptr(), std::ptr::null()) };
        let d = self.create_dataset(group, name, t, space)?;
        // SAFETY: `data` holds every element of the dataset's space, each of the type `t` describes.
        let rc = unsafe { (self.api.H5Dwrite)(d.id, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.as_ptr() as *const c_void) };
        if rc < 0 {
            return Err(format!("{}: cannot write {group}/{name}", self.path.display()));
        }
        Ok(())
    }

    /// An int as Caffe's `hdf5_save_int` writes it: a dataset of one element.
    pub fn write_int(&self, name: &str, value: i32) -> Result<(), String> {
        let dims = [1 as Hsize];
        // SAFETY: one dimension.
        let space = unsafe { (self.api.H5Screate_simple)(1, dims.as_ptr(), std::ptr::null()) };
        let d = self.create_dataset("", name, self.api.H5T_NATIVE_INT, space)?;
        let t = self.api.H5T_NATIVE_INT;
        // SAFETY: one int for a one-element dataset.
        let rc = unsafe {
            (self.api.H5Dwrite)(d.id, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value as *const i32 as *const c_void)
        };
        if rc < 0 {
            return Err(format!("{}: cannot write {name}", self.path.display()));
        }
        Ok(())
    }

    /// A string as Caffe's `hdf5_save_string` writes it: a scalar of a
    /// NUL-terminated fixed-length string type.
    pub fn write_string(&self, name: &str, value: &str) -> Result<(), String> {
        let c = cname(value)?;
        // SAFETY: copies a predefined type; closed by `Owned`.
        let t = self.owned(unsafe { (self.api.H5Tcopy)(self.api.H5T_C_S1) }, self.api.H5Tclose);
        // SAFETY: `t` is an open string type.
        if t.id < 0 || unsafe { (self.api.H5Tset_size)(t.id, value.len() + 1) } < 0 {
            return Err(format!("{}: cannot make a string type for {name}", self.path.display()));
        }
        // SAFETY: a scalar space.
        let space = unsafe { (self.api.H5Screate)(sys::H5S_SCALAR) };
        let d = self.create_dataset("", name, t.id, space)?;
        // SAFETY: `c` holds len + 1 bytes, the type's size.
        let rc = unsafe { (self.api.H5Dwrite)(d.id, t.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, c.as_ptr() as *const c_void) };
        if rc < 0 {
            return Err(format!("{}: cannot write {name}", self.path.display()));
        }
        Ok(())
    }

    fn open_dataset(&self, group: &str, name: &str) -> Result<Owned<'static>, String> {
        let missing = || {
            format!(
                "{} has no dataset {}{name}",
                self.path.display(),
                if group.is_empty() { String::new() } else { format!("{group}/") }
            )
        };
        let loc = self.location(group, false)?.ok_or_else(missing)?;
        let c = cname(name)?;
        // SAFETY: `loc` is open; the name is NUL-terminated.
        if unsafe { (self.api.H5Lexists)(loc.id, c.as_ptr(), H5P_DEFAULT) } <= 0 {
            return Err(missing());
        }
        // SAFETY: as above.
        let id = unsafe { (self.api.H5Dopen2)(loc.id, c.as_ptr(), H5P_DEFAULT) };
        if id < 0 {
            return Err(missing());
        }
        Ok(self.owned(id, self.api.H5Dclose))
    }

    /// The dimensions of `group/name`.
    pub fn shape(&self, group: &str, name: &str) -> Result<Vec<usize>, String> {
        let d = self.open_dataset(group, name)?;
        self.shape_of(&d, group, name)
    }

    fn shape_of(&self, d: &Owned<'_>, group: &str, name: &str) -> Result<Vec<usize>, String> {
        // SAFETY: `d` is an open dataset.
        let space = self.owned(unsafe { (self.api.H5Dget_space)(d.id) }, self.api.H5Sclose);
        // SAFETY: `space` is open (or negative, which the library refuses).
        let rank = unsafe { (self.api.H5Sget_simple_extent_ndims)(space.id) };
        if space.id < 0 || rank < 0 {
            return Err(format!("{}: cannot read the shape of {group}/{name}", self.path.display()));
        }
        let mut dims = vec![0 as Hsize; rank as usize];
        // SAFETY: `dims` holds `rank` entries.
        unsafe { (self.api.H5Sget_simple_extent_dims)(space.id, dims.as_mut_ptr(), std::ptr::null_mut()) };
        Ok(dims.into_iter().map(|d| d as usize).collect())
    }

    /// A numeric dataset's shape and values, converted to f32 by the library.
    pub fn read_floats(&self, group: &str, name: &str) -> Result<(Vec<usize>, Vec<f32>), String> {
        let d = self.open_dataset(group, name)?;
        let shape = self.shape_of(&d, group, name)?;
        let mut out = vec![0f32; shape.iter().product()];
        let t = self.api.H5T_NATIVE_FLOAT;
        // SAFETY: `out` holds every element of the dataset.
        let rc = unsafe { (self.api.H5Dread)(d.id, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.as_mut_ptr() as *mut c_void) };
        if rc < 0 {
            return Err(format!("{}: {group}/{name} cannot be read as numbers", self.path.display()));
        }
        Ok((shape, out))
    }

    /// A one-element int dataset (`hdf5_load_int`).
    pub fn read_int(&self, name: &str) -> Result<i32, String> {
        let d = self.open_dataset("", name)?;
        let shape = self.shape_of(&d, "", name)?;
        if shape.iter().product::<usize>() != 1 {
            return Err(format!("{}: {name} holds {shape:?} values, not one", self.path.display()));
        }
        let mut v = 0i32;
        let t = self.api.H5T_NATIVE_INT;
        // SAFETY: one element into one int.
        let rc =
            unsafe { (self.api.H5Dread)(d.id, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &mut v as *mut i32 as *mut c_void) };
        if rc < 0 {
            return Err(format!("{}: {name} is not an int", self.path.display()));
        }
        Ok(v)
    }

    /// A fixed-length string scalar (`hdf5_load_string`).
    pub fn read_string(&self, name: &str) -> Result<String, String> {
        let d = self.open_dataset("", name)?;
        // SAFETY: `d` is open.
        let t = self.owned(unsafe { (self.api.H5Dget_type)(d.id) }, self.api.H5Tclose);
        // SAFETY: `t` is open.
        if t.id < 0 || unsafe { (self.api.H5Tget_class)(t.id) } != sys::H5T_STRING {
            return Err(format!("{}: {name} is not a string", self.path.display()));
        }
        // SAFETY: as above.
        let size = unsafe { (self.api.H5Tget_size)(t.id) };
        let mut buf = vec![0u8; size + 1];
        // SAFETY: `buf` holds the type's size.
        let rc =
            unsafe { (self.api.H5Dread)(d.id, t.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.as_mut_ptr() as *mut c_void) };
        if rc < 0 {
            return Err(format!("{}: cannot read {name}", self.path.display()));
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8(buf[..end].to_vec()).map_err(|_| format!("{}: {name} is not UTF-8", self.path.display()))
    }
}

/// The file access list every file is opened with: HDF5's file locking
/// off where the library can turn it off (1.10.7 and later). Its locks
/// (`flock`) belong to the open file, which a child process started while
/// the file is open shares, so a file written here could not be read
/// again until that child ended; caffe-geeps writes each file once,
/// atomically, and never reads one while writing it. Without such a list
/// the default is used.
fn access_list(api: &'static Api) -> Owned<'static> {
    // SAFETY: the class id is the library's own; a failed create returns a negative id, not used.
    let id = unsafe { (api.H5Pcreate)(api.H5P_CLS_FILE_ACCESS) };
    let unlocked = match api.H5Pset_file_locking {
        // SAFETY: `id` is an open file access list.
        Some(set) if id >= 0 => (unsafe { set(id, false, true) }) >= 0,
        _ => false,
    };
    if unlocked {
        return Owned { id, close: api.H5Pclose, _api: api };
    }
    if id >= 0 {
        // SAFETY: opened just above, closed once.
        unsafe { (api.H5Pclose)(id) };
    }
    Owned { id: H5P_DEFAULT, close: noop, _api: api }
}

/// The file's own id is closed with the file.
unsafe extern "C" fn noop(_: Hid) -> sys::Herr {
    0
}
