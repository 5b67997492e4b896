//! Multinomial logistic regression on Fashion-MNIST, trained data-parallel
//! through geeps: the model and training loop shared by the `mlr` example and
//! the `tests/mlr.rs` integration test (included there with `#[path]`).
//!
//! The model is a 10 × 785 weight matrix (784 pixels + a bias per class),
//! flattened class-major into the rows of one parameter table. A second,
//! one-row parameter table ("progress") accumulates the training loss, the
//! number of examples and the number of correct predictions, so rank 0 can
//! report the whole cluster's training loss from what it reads, exactly as a
//! multi-machine job would.
//!
//! Each worker trains on its rank-strided slice of the training set. One
//! iteration (one clock) is: `read` the weights and progress, compute the
//! softmax cross-entropy gradient of a minibatch straight into the zeroed
//! `pre_update` buffer, `update`, `post_read`, `clock`. Each worker scales
//! its mean gradient by `-lr / workers`, so the updates of one clock add up
//! to one SGD step on the averaged gradient of `workers × batch` examples.

use std::error::Error as StdError;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use flate2::read::GzDecoder;
use geeps::device::{Device, DevicePtr, StreamId};
use geeps::{keys, Config, Geeps, InProcessCluster, RowKey, Slack, Stats, Transport};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// Errors from data loading, geeps, or a worker thread, with their context.
pub type BoxError = Box<dyn StdError + Send + Sync>;

pub const CLASSES: usize = 10;
pub const PIXELS: usize = 28 * 28;
/// Floats per class: the pixels' weights, then the bias.
const STRIDE: usize = PIXELS + 1;
const PARAMS: usize = CLASSES * STRIDE;
const ROW_WIDTH: usize = 128;
const WEIGHT_ROWS: usize = PARAMS.div_ceil(ROW_WIDTH);
/// Offset of the progress row in the read/update buffers (it follows the
/// weight rows, in key order). Its slots: loss sum, examples, correct.
const PROGRESS: usize = WEIGHT_ROWS * ROW_WIDTH;
/// Fixed, so that BSP runs are reproducible (shuffles differ only by rank).
const SEED: u64 = 2016;

/// What to train, and how.
#[derive(Debug, Clone)]
pub struct TrainConfig {
    /// In-process workers, one thread each.
    pub workers: usize,
    pub epochs: usize,
    /// Minibatch per worker per clock.
    pub batch: usize,
    /// SGD learning rate applied to the gradient averaged over all workers.
    pub lr: f32,
    /// Staleness bound of the weight reads: 0 is BSP.
    pub slack: u32,
    /// Folder with the four gzipped IDX files.
    pub data_dir: PathBuf,
    /// Use only the first this many training images.
    pub train_limit: Option<usize>,
    /// Rank 0 prints the plan and one line per epoch.
    pub verbose: bool,
    /// Opens each worker's device (`None`: the default host device). On a
    /// device whose memory is not host memory (a GPU), buffers are copied
    /// to the host for the CPU's arithmetic and back.
    pub device: Option<DeviceFactory>,
}

/// Opens one worker's device.
#[derive(Clone)]
pub struct DeviceFactory(pub Arc<dyn Fn() -> geeps::Result<Arc<dyn Device>> + Send + Sync>);

impl fmt::Debug for DeviceFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DeviceFactory")
    }
}

/// A worker's way to its buffers' contents: in place on the host device,
/// through the device's copies (on a stream of the worker's) elsewhere.
struct Contents(Option<(Arc<dyn Device>, StreamId)>);

impl Contents {
    fn new(device: Option<Arc<dyn Device>>) -> geeps::Result<Contents> {
        Ok(Contents(match device {
            Some(d) if !d.info().host_addressable => {
                let stream = d.create_stream()?;
                Some((d, stream))
            }
            _ => None,
        }))
    }

    /// The floats at `ptr`; `host` gives them in place on the host device.
    fn read<'b>(
        &self,
        ptr: DevicePtr,
        len: usize,
        host: impl FnOnce() -> geeps::Result<&'b [f32]>,
    ) -> geeps::Result<std::borrow::Cow<'b, [f32]>> {
        let Some((d, s)) = &self.0 else { return Ok(std::borrow::Cow::Borrowed(host()?)) };
        let mut out = vec![0.0; len];
        // SAFETY: `ptr` is a buffer the worker holds, `len` floats long; the
        // copy completes before `out` is returned.
        unsafe { d.copy_d2h(*s, ptr, out.as_mut_ptr(), len)? };
        d.synchronize(*s)?;
        Ok(std::borrow::Cow::Owned(out))
    }

    /// Runs `f` on the (zeroed) floats of an update buffer at `ptr`, then
    /// writes them back; `host` gives them in place on the host device.
    fn write<'b>(
        &self,
        ptr: DevicePtr,
        len: usize,
        host: impl FnOnce() -> geeps::Result<&'b mut [f32]>,
        f: impl FnOnce(&mut [f32]),
    ) -> geeps::Result<()> {
        let Some((d, s)) = &self.0 else {
            f(host()?);
            return Ok(());
        };
        let mut data = vec![0.0; len];
        f(&mut data);
        // SAFETY: `ptr` is a buffer the worker holds, `len` floats long; the
        // copy completes before `data` is dropped.
        unsafe { d.copy_h2d(*s, data.as_ptr(), ptr, len)? };
        d.synchronize(*s)
    }
}

/// Rank 0's view at the end of an epoch.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochReport {
    pub epoch: usize,
    /// Mean cross-entropy over the epoch's minibatches, all workers.
    pub train_loss: f32,
    pub train_accuracy: f32,
    pub test_loss: f32,
    pub test_accuracy: f32,
    /// Since training started (after the virtual iteration).
    pub elapsed: Duration,
}

impl fmt::Display for EpochReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "epoch {:>3}  train loss {:.4}  train acc {:.2}%  test loss {:.4}  test acc {:.2}%  {:.2}s",
            self.epoch + 1,
            self.train_loss,
            self.train_accuracy * 100.0,
            self.test_loss,
            self.test_accuracy * 100.0,
            self.elapsed.as_secs_f64()
        )
    }
}

/// The outcome of a training run.
#[derive(Debug, Clone)]
pub struct TrainReport {
    pub epochs: Vec<EpochReport>,
    /// The last epoch's mean training loss.
    pub final_loss: f32,
    pub test_accuracy: f32,
    /// Each worker's geeps counters, by rank.
    pub stats: Vec<Stats>,
    /// Wall time of the whole run, data loading included.
    pub elapsed: Duration,
}

/// Images scaled to [0, 1], row-major, `PIXELS` floats each.
pub struct Dataset {
    images: Vec<f32>,
    labels: Vec<u8>,
}

impl Dataset {
    /// Loads `<prefix>-images-idx3-ubyte.gz` and `<prefix>-labels-idx1-ubyte.gz`.
    pub fn load(dir: &Path, prefix: &str, limit: Option<usize>) -> Result<Dataset, BoxError> {
        let (idims, pixels) = read_idx(&dir.join(format!("{prefix}-images-idx3-ubyte.gz")), 3)?;
        let (ldims, labels) = read_idx(&dir.join(format!("{prefix}-labels-idx1-ubyte.gz")), 1)?;
        if idims[1] * idims[2] != PIXELS {
            return Err(format!("{prefix} images are {}x{}, expected 28x28", idims[1], idims[2]).into());
        }
        if idims[0] != ldims[0] {
            return Err(format!("{prefix}: {} images but {} labels", idims[0], ldims[0]).into());
        }
        if let Some(bad) = labels.iter().find(|l| **l as usize >= CLASSES) {
            return Err(format!("{prefix}: label {bad} is not a class 0-9").into());
        }
        let n = limit.map_or(ldims[0], |l| l.min(ldims[0]));
        let images = pixels[..n * PIXELS].iter().map(|p| f32::from(*p) / 255.0).collect();
        Ok(Dataset { images, labels: labels[..n].to_vec() })
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    fn image(&self, i: usize) -> &[f32] {
        &self.images[i * PIXELS..(i + 1) * PIXELS]
    }
}

/// Reads a gzipped IDX file of unsigned bytes with `rank` dimensions.
fn read_idx(path: &Path, rank: usize) -> Result<(Vec<usize>, Vec<u8>), BoxError> {
    let context = |e: &dyn fmt::Display| format!("{}: {e}", path.display());
    let file = File::open(path).map_err(|e| context(&e))?;
    let mut bytes = Vec::new();
    GzDecoder::new(file).read_to_end(&mut bytes).map_err(|e| context(&e))?;
    let header = 4 + 4 * rank;
    if bytes.len() < header {
        return Err(context(&"too short for an IDX header").into());
    }
    // Magic: two zero bytes, 0x08 (unsigned byte), then the number of dimensions.
    if bytes[..4] != [0, 0, 0x08, rank as u8] {
        return Err(
            context(&format!("not an IDX file of u8 with {rank} dimension(s) (magic {:02x?})", &bytes[..4])).into()
        );
    }
    let dims: Vec<usize> =
        bytes[4..header].chunks_exact(4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize).collect();
    let len: usize = dims.iter().product();
    if bytes.len() - header != len {
        return Err(context(&format!(
            "dimensions {dims:?} need {len} bytes of data, the file has {}",
            bytes.len() - header
        ))
        .into());
    }
    bytes.drain(..header);
    Ok((dims, bytes))
}

/// Checks the config and loads the data; returns (train, test, clocks per epoch).
fn prepare(cfg: &TrainConfig) -> Result<(Arc<Dataset>, Arc<Dataset>, usize), BoxError> {
    if cfg.workers == 0 || cfg.epochs == 0 || cfg.batch == 0 {
        return Err("workers, epochs and batch must each be at least 1".into());
    }
    if !(cfg.lr.is_finite() && cfg.lr > 0.0) {
        return Err(format!("learning rate {} must be a positive number", cfg.lr).into());
    }
    let train_set = Arc::new(Dataset::load(&cfg.data_dir, "train", cfg.train_limit)?);
    let test_set = Arc::new(Dataset::load(&cfg.data_dir, "t10k", None)?);
    // Every worker must run the same number of clocks (BSP waits for all), so
    // each epoch is as many minibatches as the smallest slice holds.
    let iters = train_set.len() / cfg.workers / cfg.batch;
    if iters == 0 {
        return Err(format!(
            "{} training images cannot give {} workers a minibatch of {} each",
            train_set.len(),
            cfg.workers,
            cfg.batch
        )
        .into());
    }
    if cfg.verbose {
        println!(
            "mlr: {} train / {} test images, {} workers x batch {} = {} per step, {} steps per epoch, lr {}, slack {}",
            train_set.len(),
            test_set.len(),
            cfg.workers,
            cfg.batch,
            cfg.workers * cfg.batch,
            iters,
            cfg.lr,
            cfg.slack
        );
    }
    Ok((train_set, test_set, iters))
}

/// Trains as rank `rank` of `cfg.workers`, connected through `transport`
/// (one process per rank). Returns this rank's counters and, on rank 0, the
/// epoch reports.
pub fn train_rank(
    cfg: &TrainConfig,
    rank: usize,
    transport: Arc<dyn Transport>,
) -> Result<(Stats, Vec<EpochReport>), BoxError> {
    let (train_set, test_set, iters) = prepare(cfg)?;
    worker(rank, transport, cfg, iters, &train_set, &test_set)
}

/// Trains with `cfg.workers` in-process workers and reports rank 0's view.
pub fn train(cfg: &TrainConfig) -> Result<TrainReport, BoxError> {
    let start = Instant::now();
    let (train_set, test_set, iters) = prepare(cfg)?;
    let cluster = InProcessCluster::new(cfg.workers)?;
    let mut threads = Vec::with_capacity(cfg.workers);
    for rank in 0..cfg.workers {
        let transport = cluster.transport(rank)?;
        let (cfg, train_set, test_set) = (cfg.clone(), train_set.clone(), test_set.clone());
        let t = thread::Builder::new()
            .name(format!("mlr-worker-{rank}"))
            .spawn(move || worker(rank, transport, &cfg, iters, &train_set, &test_set))?;
        threads.push(t);
    }
    // Join all before returning, so one failure does not leave threads behind.
    let results: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
    let mut stats = Vec::with_capacity(cfg.workers);
    let mut epochs = Vec::new();
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(Ok((s, e))) => {
                stats.push(s);
                if rank == 0 {
                    epochs = e;
                }
            }
            Ok(Err(e)) => return Err(format!("worker {rank}: {e}").into()),
            Err(_) => return Err(format!("worker {rank} panicked").into()),
        }
    }
    let last = epochs.last().ok_or("rank 0 reported no epoch")?;
    Ok(TrainReport {
        final_loss: last.train_loss,
        test_accuracy: last.test_accuracy,
        epochs,
        stats,
        elapsed: start.elapsed(),
    })
}

/// One worker's training loop. Rank 0 also evaluates and reports.
fn worker(
    rank: usize,
    transport: Arc<dyn Transport>,
    cfg: &TrainConfig,
    iters: usize,
    train_set: &Dataset,
    test_set: &Dataset,
) -> Result<(Stats, Vec<EpochReport>), BoxError> {
    let mut builder = Geeps::builder(Config::default().with_row_width(ROW_WIDTH).with_device_memory(16 << 20));
    let weights = builder.parameter_table("weights", WEIGHT_ROWS as u32);
    let progress = builder.parameter_table("progress", 1);
    builder.transport(transport);
    let device = cfg.device.as_ref().map(|open| (open.0)()).transpose()?;
    if let Some(d) = &device {
        builder.device(d.clone());
    }
    let contents = Contents::new(device)?;
    let ps = builder.build()?;

    // One read and one update cover both tables, so the progress counters
    // travel with the weights at no extra call.
    let mut rows = keys(weights, 0..WEIGHT_ROWS as u32);
    rows.push(RowKey::new(progress, 0));
    let read = ps.virtual_read(&rows, Slack::Bounded(cfg.slack))?;
    let pre_update = ps.virtual_pre_update(&rows)?;
    ps.virtual_update(pre_update)?;
    ps.virtual_post_read(read)?;
    ps.virtual_clock()?;
    ps.finish_virtual_iteration()?;
    if cfg.verbose && rank == 0 {
        print!("geeps plan (rank 0): {}", ps.plan()?);
    }

    let mut slice: Vec<usize> = (rank..train_set.len()).step_by(cfg.workers).collect();
    let mut rng = StdRng::seed_from_u64(SEED + rank as u64);
    let scale = -cfg.lr / (cfg.workers * cfg.batch) as f32;
    let mut reporter = Reporter { start: Instant::now(), seen: [0.0; 3], epochs: Vec::new(), verbose: cfg.verbose };
    let total = cfg.epochs * iters;
    for clock in 0..total {
        if clock % iters == 0 {
            slice.shuffle(&mut rng);
        }
        let buf = ps.read(read)?;
        let current = contents.read(buf.device_ptr(), buf.len(), || buf.as_slice())?;
        if rank == 0 && clock > 0 && clock % iters == 0 {
            // Under BSP this read holds exactly the updates of every clock so
            // far, so it closes the epoch; with slack it may lack the last few.
            reporter.epoch_done(clock / iters - 1, &current, test_set);
        }
        let first = (clock % iters) * cfg.batch;
        let batch = &slice[first..first + cfg.batch];
        let mut delta = ps.pre_update(pre_update)?;
        // pre_update buffers come zeroed, as the gradient needs.
        contents.write(
            delta.device_ptr(),
            delta.len(),
            || delta.as_mut_slice(),
            |out| {
                let (loss, correct) =
                    accumulate_gradient(&current[..PARAMS], train_set, batch, scale, &mut out[..PARAMS]);
                out[PROGRESS..PROGRESS + 3].copy_from_slice(&[loss, batch.len() as f32, correct as f32]);
            },
        )?;
        delta.update()?;
        buf.post()?;
        ps.clock()?;
    }
    if rank == 0 {
        // The recorded read sits next in the sequence, so under BSP this final
        // read is still prefetched. With slack it could miss up to `slack`
        // clocks of the others, so wait for everything (an unrecorded read).
        let buf = if cfg.slack == 0 { ps.read(read)? } else { ps.read_keys(&rows, Slack::BSP)? };
        reporter.epoch_done(cfg.epochs - 1, &contents.read(buf.device_ptr(), buf.len(), || buf.as_slice())?, test_set);
    }
    let stats = ps.stats();
    ps.shutdown()?;
    Ok((stats, reporter.epochs))
}

/// Turns rank 0's reads at epoch boundaries into epoch reports.
struct Reporter {
    start: Instant,
    /// Progress counters (loss sum, examples, correct) at the last report.
    seen: [f32; 3],
    epochs: Vec<EpochReport>,
    verbose: bool,
}

impl Reporter {
    fn epoch_done(&mut self, epoch: usize, current: &[f32], test_set: &Dataset) {
        let now = [current[PROGRESS], current[PROGRESS + 1], current[PROGRESS + 2]];
        // NaN (0/0) if no batch arrived, which only a slack of a whole epoch allows.
        let examples = now[1] - self.seen[1];
        let (test_loss, test_accuracy) = evaluate(&current[..PARAMS], test_set);
        let report = EpochReport {
            epoch,
            train_loss: (now[0] - self.seen[0]) / examples,
            train_accuracy: (now[2] - self.seen[2]) / examples,
            test_loss,
            test_accuracy,
            elapsed: self.start.elapsed(),
        };
        self.seen = now;
        if self.verbose {
            println!("{report}");
        }
        self.epochs.push(report);
    }
}

/// Class scores of one image.
fn logits(w: &[f32], x: &[f32]) -> [f32; CLASSES] {
    let mut z = [0.0; CLASSES];
    for (k, zk) in z.iter_mut().enumerate() {
        let wk = &w[k * STRIDE..(k + 1) * STRIDE];
        *zk = dot(&wk[..PIXELS], x) + wk[PIXELS];
    }
    z
}

/// Softmax of `z` in place; returns the cross-entropy of class `y` and the
/// predicted class.
fn softmax_loss(z: &mut [f32; CLASSES], y: usize) -> (f32, usize) {
    let (argmax, max) =
        z.iter().copied().enumerate().fold((0, f32::NEG_INFINITY), |a, b| if b.1 > a.1 { b } else { a });
    let mut sum = 0.0;
    for v in z.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in z.iter_mut() {
        *v /= sum;
    }
    // -log softmax, computed from the shifted logits to stay finite.
    let loss = -z[y].max(f32::MIN_POSITIVE).ln();
    (loss, argmax)
}

/// Adds `scale ×` the summed cross-entropy gradient of `batch` to `delta`;
/// returns the batch's summed loss and its number of correct predictions.
fn accumulate_gradient(w: &[f32], data: &Dataset, batch: &[usize], scale: f32, delta: &mut [f32]) -> (f32, usize) {
    let (mut loss_sum, mut correct) = (0.0, 0);
    for &i in batch {
        let x = data.image(i);
        let y = data.labels[i] as usize;
        let mut p = logits(w, x);
        let (loss, predicted) = softmax_loss(&mut p, y);
        loss_sum += loss;
        correct += usize::from(predicted == y);
        // d loss / d z_k = p_k - [k == y]; d z_k / d w_k = (x, 1).
        for (k, pk) in p.iter().enumerate() {
            let g = scale * (pk - f32::from(u8::from(k == y)));
            let dk = &mut delta[k * STRIDE..(k + 1) * STRIDE];
            axpy(g, x, &mut dk[..PIXELS]);
            dk[PIXELS] += g;
        }
    }
    (loss_sum, correct)
}

/// Mean cross-entropy and accuracy of the weights `w` on `data`.
fn evaluate(w: &[f32], data: &Dataset) -> (f32, f32) {
    let (mut loss_sum, mut correct) = (0.0f64, 0usize);
    for i in 0..data.len() {
        let y = data.labels[i] as usize;
        let mut z = logits(w, data.image(i));
        let (loss, predicted) = softmax_loss(&mut z, y);
        loss_sum += f64::from(loss);
        correct += usize::from(predicted == y);
    }
    let n = data.len().max(1) as f64;
    ((loss_sum / n) as f32, (correct as f64 / n) as f32)
}

/// Dot product with eight independent sums, which the compiler vectorises
/// (a single running sum must stay sequential under IEEE rules).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for ((s, xj), yj) in acc.iter_mut().zip(x).zip(y) {
            *s += xj * yj;
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `y += a * x`.
fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}
