//! The thin unsafe edge to the HDF5 C library, loaded at run time (as the
//! CUDA driver is): the library's entry points and its predefined type ids,
//! found with `dlopen`/`dlsym` on the first use, so caffe-geeps builds and
//! runs without HDF5 and only the HDF5 features need it. It owns the
//! symbols and their C signatures (HDF5 1.10 and later: `hid_t` is 64-bit);
//! it must never hold a pointer the library returned past the call that
//! returned it.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

pub type Hid = i64;
pub type Herr = c_int;
pub type Htri = c_int;
pub type Hsize = u64;

pub const H5P_DEFAULT: Hid = 0;
pub const H5S_ALL: Hid = 0;
pub const H5E_DEFAULT: Hid = 0;
pub const H5F_ACC_RDONLY: c_uint = 0x0000;
pub const H5F_ACC_TRUNC: c_uint = 0x0002;
/// `H5S_SCALAR` of `H5S_class_t`.
pub const H5S_SCALAR: c_int = 0;
/// `H5T_STRING` of `H5T_class_t`.
pub const H5T_STRING: c_int = 3;

/// Library file names tried in order: the development link, then the
/// runtime names of Debian's and other distributions' packages.
const NAMES: [&str; 6] =
    ["libhdf5.so", "libhdf5_serial.so", "libhdf5.so.310", "libhdf5.so.103", "libhdf5_serial.so.103", "libhdf5.so.200"];

macro_rules! api {
    ($($name:ident : fn($($arg:ty),*) -> $ret:ty;)*) => {
        /// The entry points geeps uses.
        #[allow(non_snake_case)]
        pub struct Api {
            _lib: libloading::Library,
            $(pub $name: unsafe extern "C" fn($($arg),*) -> $ret,)*
            pub H5T_NATIVE_FLOAT: Hid,
            pub H5T_NATIVE_DOUBLE: Hid,
            pub H5T_NATIVE_INT: Hid,
            pub H5T_C_S1: Hid,
            pub H5P_CLS_FILE_ACCESS: Hid,
            /// HDF5 1.10.7 and later; `None` before.
            pub H5Pset_file_locking: Option<unsafe extern "C" fn(Hid, bool, bool) -> Herr>,
        }

        #[allow(non_snake_case)]
        fn load(lib: libloading::Library) -> Result<Api, String> {
            // SAFETY: each symbol is HDF5's function of that name, with the
            // signature `H5*public.h` gives it.
            unsafe {
                $(let $name = *lib
                    .get::<unsafe extern "C" fn($($arg),*) -> $ret>(concat!(stringify!($name), "\0").as_bytes())
                    .map_err(|e| format!("{}: {e}", stringify!($name)))?;)*
                Ok(Api { _lib: lib, $($name,)* H5T_NATIVE_FLOAT: -1, H5T_NATIVE_DOUBLE: -1, H5T_NATIVE_INT: -1, H5T_C_S1: -1,
                    H5P_CLS_FILE_ACCESS: -1, H5Pset_file_locking: None })
            }
        }
    };
}

/// Initialises the library and reads its predefined type ids (set by `H5open`).
#[allow(non_snake_case)]
fn init(mut api: Api) -> Result<Api, String> {
    // SAFETY: `H5open` has no preconditions; the globals are `hid_t`s the
    // library defines and sets in it.
    unsafe {
        if (api.H5open)() < 0 {
            return Err("H5open failed".into());
        }
        // Errors come back as values; the library prints nothing itself.
        (api.H5Eset_auto2)(H5E_DEFAULT, std::ptr::null_mut(), std::ptr::null_mut());
        let global = |name: &str| -> Result<Hid, String> {
            let sym = api._lib.get::<*const Hid>(format!("{name}\0").as_bytes()).map_err(|e| format!("{name}: {e}"))?;
            Ok(**sym)
        };
        let (f, i, s) = (global("H5T_NATIVE_FLOAT_g")?, global("H5T_NATIVE_INT_g")?, global("H5T_C_S1_g")?);
        api.H5T_NATIVE_DOUBLE = global("H5T_NATIVE_DOUBLE_g")?;
        api.H5P_CLS_FILE_ACCESS = global("H5P_CLS_FILE_ACCESS_ID_g")?;
        api.H5Pset_file_locking =
            api._lib.get::<unsafe extern "C" fn(Hid, bool, bool) -> Herr>(b"H5Pset_file_locking\0").ok().map(|f| *f);
        api.H5T_NATIVE_FLOAT = f;
        api.H5T_NATIVE_INT = i;
        api.H5T_C_S1 = s;
    }
    Ok(api)
}

api! {
    H5open: fn() -> Herr;
    H5Eset_auto2: fn(Hid, *mut c_void, *mut c_void) -> Herr;
    H5Fcreate: fn(*const c_char, c_uint, Hid, Hid) -> Hid;
    H5Fopen: fn(*const c_char, c_uint, Hid) -> Hid;
    H5Fclose: fn(Hid) -> Herr;
    H5Gcreate2: fn(Hid, *const c_char, Hid, Hid, Hid) -> Hid;
    H5Gopen2: fn(Hid, *const c_char, Hid) -> Hid;
    H5Gclose: fn(Hid) -> Herr;
    H5Lexists: fn(Hid, *const c_char, Hid) -> Htri;
    H5Screate: fn(c_int) -> Hid;
    H5Screate_simple: fn(c_int, *const Hsize, *const Hsize) -> Hid;
    H5Sget_simple_extent_ndims: fn(Hid) -> c_int;
    H5Sget_simple_extent_dims: fn(Hid, *mut Hsize, *mut Hsize) -> c_int;
    H5Sclose: fn(Hid) -> Herr;
    H5Dcreate2: fn(Hid, *const c_char, Hid, Hid, Hid, Hid, Hid) -> Hid;
    H5Dopen2: fn(Hid, *const c_char, Hid) -> Hid;
    H5Dget_space: fn(Hid) -> Hid;
    H5Dget_type: fn(Hid) -> Hid;
    H5Dread: fn(Hid, Hid, Hid, Hid, Hid, *mut c_void) -> Herr;
    H5Dwrite: fn(Hid, Hid, Hid, Hid, Hid, *const c_void) -> Herr;
    H5Dclose: fn(Hid) -> Herr;
    H5Tcopy: fn(Hid) -> Hid;
    H5Tset_size: fn(Hid, usize) -> Herr;
    H5Tget_size: fn(Hid) -> usize;
    H5Tget_class: fn(Hid) -> c_int;
    H5Tclose: fn(Hid) -> Herr;
    H5Pcreate: fn(Hid) -> Hid;
    H5Pclose: fn(Hid) -> Herr;
}

/// The library, loaded once; an error that says how to install it.
pub fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(|| {
        let mut tried = Vec::new();
        for name in NAMES {
            // SAFETY: loading HDF5 runs its initialisers, which have no preconditions.
            match unsafe { libloading::Library::new(name) } {
                Ok(lib) => return load(lib).and_then(init).map_err(|e| format!("the HDF5 library {name}: {e}")),
                Err(e) => tried.push(format!("{name}: {e}")),
            }
        }
        Err(format!(
            "the HDF5 library is not installed (install it: `apt-get install libhdf5-dev` on Debian or Ubuntu, \
             `dnf install hdf5` on Fedora; tried {})",
            tried.join("; ")
        ))
    })
    .as_ref()
    .map_err(Clone::clone)
}
