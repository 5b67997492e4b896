/*
 * geeps: a GPU-specialized parameter server (the GeePS design, EuroSys 2016).
 * The C API of libgeeps. Generated from geeps-ffi by cbindgen: do not edit;
 * run scripts/gen-header.sh. Guide: docs/c-api.md.
 *
 * Every function returns a geeps_status (GEEPS_STATUS_OK is 0), except the
 * few documented to return a string. On failure,
 * geeps_last_error_message() says what went wrong and what to fix.
 */

#ifndef GEEPS_H
#define GEEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * Slack of a bulk-synchronous read: see every update of every earlier clock.
 */
#define GEEPS_SLACK_BSP 0

/**
 * Slack of an asynchronous read: never wait for fresher data.
 */
#define GEEPS_SLACK_UNBOUNDED UINT32_MAX

/**
 * The number of call kinds.
 */
#define GEEPS_CALL_KINDS 7

/**
 * What a call did. `GEEPS_STATUS_OK` is 0; every other value is a failure
 * whose message `geeps_last_error_message()` returns on the same thread.
 * A failed call changes nothing, unless its documentation says otherwise.
 */
typedef enum geeps_status {
  /**
   * Success.
   */
  GEEPS_STATUS_OK = 0,
  /**
   * A pointer argument that must not be NULL was NULL.
   */
  GEEPS_STATUS_NULL_POINTER = 1,
  /**
   * An argument is unusable: an object that was freed or never created,
   * a string that is not UTF-8, a size that overflows.
   */
  GEEPS_STATUS_INVALID_ARGUMENT = 2,
  /**
   * A configuration value geeps cannot use (the message names the field).
   */
  GEEPS_STATUS_INVALID_CONFIG = 3,
  /**
   * A table that this instance does not declare.
   */
  GEEPS_STATUS_UNKNOWN_TABLE = 4,
  /**
   * A row outside its table.
   */
  GEEPS_STATUS_UNKNOWN_ROW = 5,
  /**
   * The rows of one access are not usable together (empty, repeated,
   * or in a table of the wrong kind).
   */
  GEEPS_STATUS_INVALID_KEYS = 6,
  /**
   * A handle or buffer that is not valid here: unknown, of another
   * instance, of the wrong kind, not held, or already held.
   */
  GEEPS_STATUS_INVALID_HANDLE = 7,
  /**
   * A call made in the wrong phase of the instance's life (a real call
   * before `geeps_finish_virtual_iteration`, a virtual call after it).
   */
  GEEPS_STATUS_INVALID_STATE = 8,
  /**
   * The device memory budget cannot hold the recorded iteration; the
   * message names the bytes needed.
   */
  GEEPS_STATUS_BUDGET_TOO_SMALL = 9,
  /**
   * A device allocation failed.
   */
  GEEPS_STATUS_DEVICE_OUT_OF_MEMORY = 10,
  /**
   * The device backend failed.
   */
  GEEPS_STATUS_DEVICE = 11,
  /**
   * A blocking call waited past the configured deadline; the message
   * says what it waited for and which worker is behind.
   */
  GEEPS_STATUS_TIMEOUT = 12,
  /**
   * A peer was lost or could not be reached.
   */
  GEEPS_STATUS_PEER_LOST = 13,
  /**
   * Workers of one cluster disagree (row width, tables, protocol).
   */
  GEEPS_STATUS_MISMATCH = 14,
  /**
   * The instance is shut down (or failed): no call on it can succeed.
   */
  GEEPS_STATUS_SHUT_DOWN = 15,
  /**
   * An operating-system I/O failure.
   */
  GEEPS_STATUS_IO = 16,
  /**
   * geeps panicked; the instance may be unusable. Please report it.
   */
  GEEPS_STATUS_PANIC = 17,
  /**
   * An engine failure newer than this status list; the message says
   * what went wrong.
   */
  GEEPS_STATUS_OTHER = 18,
  /**
   * A checkpoint could not be written, or none usable was found to
   * restore (the message names the folder or file and why).
   */
  GEEPS_STATUS_CHECKPOINT = 19,
} geeps_status;

/**
 * The kinds of real call, indexing `geeps_stats.calls`.
 */
typedef enum geeps_call_kind {
  GEEPS_CALL_KIND_READ = 0,
  GEEPS_CALL_KIND_POST_READ = 1,
  GEEPS_CALL_KIND_PRE_UPDATE = 2,
  GEEPS_CALL_KIND_UPDATE = 3,
  GEEPS_CALL_KIND_LOCAL_ACCESS = 4,
  GEEPS_CALL_KIND_POST_LOCAL_ACCESS = 5,
  GEEPS_CALL_KIND_TABLE_CLOCK = 6,
} geeps_call_kind;

/**
 * A cluster of workers: in-process (`geeps_cluster_new`) or this process's
 * rank of a network cluster (`geeps_cluster_from_env`,
 * `geeps_cluster_connect`). Opaque; free with `geeps_cluster_free`.
 */
typedef struct geeps_cluster geeps_cluster;

/**
 * The configuration of one instance. Opaque; create with
 * `geeps_config_new`, change with the `geeps_config_set_*` setters, free
 * with `geeps_config_free`. `geeps_new` copies it, so one config can be
 * changed and reused for the next instance.
 */
typedef struct geeps_config geeps_config;

/**
 * One geeps instance: one worker of a data-parallel job. Opaque; create
 * with `geeps_new`, free with `geeps_free`.
 */
typedef struct geeps_instance geeps_instance;

/**
 * Network settings for `geeps_cluster_from_env_with` and
 * `geeps_cluster_connect_with`. Opaque; create with
 * `geeps_net_options_new`, free with `geeps_net_options_free`. The cluster
 * copies them, so one object can serve several clusters.
 */
typedef struct geeps_net_options geeps_net_options;

/**
 * A table of one instance, numbered from 0 in declaration order.
 */
typedef uint32_t geeps_table;

/**
 * A recorded call of one instance, as returned by the `geeps_virtual_*`
 * acquisitions. Never 0 for a valid handle.
 */
typedef uint64_t geeps_handle;

/**
 * A buffer handed out by an acquisition: `geeps_read`,
 * `geeps_pre_update`, `geeps_local_access` (by recorded handle) and their
 * keyed forms. Its memory is valid until its release.
 */
typedef struct geeps_buffer {
  /**
   * Names the buffer: in the getters (`geeps_buffer_data_age`) and, for
   * a keyed call's buffer, in its release (`geeps_post_read_buffer`,
   * ...); a buffer acquired by handle is released by its handle. Never
   * 0, never reused by an instance.
   */
  uint64_t id;
  /**
   * `floats` floats in the instance's device memory: `rows` rows of the
   * row width, in the order of the access's rows. On the host device (the
   * default) a host pointer. On a CUDA device
   * (`geeps_config_set_cuda_device`) a CUDA device pointer: never
   * dereference it on the host; pass it to your kernels or `cudaMemcpy`,
   * or copy with `geeps_buffer_copy_to_host` /
   * `geeps_buffer_copy_from_host`.
   */
  float *data;
  /**
   * Rows × row width.
   */
  size_t floats;
  /**
   * Rows in the buffer.
   */
  size_t rows;
} geeps_buffer;

/**
 * Count and blocked time of one kind of call.
 */
typedef struct geeps_call_stats {
  uint64_t count;
  double blocked_seconds;
} geeps_call_stats;

/**
 * A snapshot of an instance's counters since `geeps_finish_virtual_iteration`
 * (or `geeps_stats_reset`). Set `struct_size = sizeof(geeps_stats)` before
 * the call.
 */
typedef struct geeps_stats {
  /**
   * In: the caller's `sizeof(geeps_stats)`. Out: the bytes written.
   */
  size_t struct_size;
  double wall_seconds;
  /**
   * Time the application spent blocked inside geeps calls.
   */
  double blocked_seconds;
  /**
   * `blocked_seconds / wall_seconds`: the application's stall fraction.
   */
  double stall_fraction;
  uint64_t bytes_host_to_device;
  uint64_t bytes_device_to_host;
  /**
   * Calls not served from the recorded sequence's prefetch.
   */
  uint64_t slow_path_calls;
  /**
   * Acquisitions served from a prefetched buffer.
   */
  uint64_t prefetch_hits;
  /**
   * Times the prefetcher restarted because the calls left recorded order.
   */
  uint64_t resyncs;
  /**
   * Indexed by `geeps_call_kind`.
   */
  struct geeps_call_stats calls[GEEPS_CALL_KINDS];
} geeps_stats;

/**
 * The placement plan made by `geeps_finish_virtual_iteration`. Set
 * `struct_size = sizeof(geeps_plan)` before the call.
 */
typedef struct geeps_plan {
  /**
   * In: the caller's `sizeof(geeps_plan)`. Out: the bytes written.
   */
  size_t struct_size;
  /**
   * The device memory budget, bytes.
   */
  size_t budget;
  /**
   * The largest total size of access buffers held at once, bytes.
   */
  size_t peak_bytes;
  /**
   * Position in the recorded sequence where the peak occurs; -1 if none.
   */
  int64_t peak_position;
  /**
   * The most the access buffer pool may allocate, bytes: what the budget
   * leaves after the data placed on the device. The pool allocates on
   * demand, so it uses less when the iteration needs less: see
   * `pool_allocated_bytes`.
   */
  size_t pool_bytes;
  /**
   * False when the budget fits only one peak (no prefetch overlap).
   */
  bool double_buffered;
  size_t local_device_bytes;
  size_t local_host_bytes;
  size_t param_device_bytes;
  size_t param_host_bytes;
  /**
   * Bytes of device memory the access buffer pool has really allocated
   * at the time of the call: 0 right after
   * `geeps_finish_virtual_iteration`, then what the iteration holds at
   * once (prefetches included), at most `pool_bytes`.
   */
  size_t pool_allocated_bytes;
  /**
   * Local accesses of the recorded iteration served in place, in the
   * table's own device memory (no buffer, no copy).
   */
  size_t local_in_place;
  /**
   * Local accesses served through a pool buffer (copied in, and back
   * when saved): those whose keys are not one range of one table's rows.
   */
  size_t local_buffered;
} geeps_plan;

/**
 * A handle value that no call ever returns.
 */
#define GEEPS_INVALID_HANDLE 0

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * The library's version, `MAJOR.MINOR.PATCH`, as a static NUL-terminated
 * string. It does not return a status.
 */
const char *geeps_version(void);

/**
 * The name of a status code (`"GEEPS_STATUS_TIMEOUT"`), as a static
 * NUL-terminated string; `"GEEPS_STATUS_UNKNOWN"` for a value that is not
 * one. It does not return a status.
 */
const char *geeps_status_name(int32_t status);

/**
 * The message of the last failed call on this thread, as a NUL-terminated
 * string owned by the library: valid until the next failed call on this
 * thread; `""` if no call has failed here. Successful calls leave it as it
 * is. It does not return a status.
 */
const char *geeps_last_error_message(void);

/**
 * Creates a configuration with the defaults: rows of 128 floats, 1 GiB of
 * device memory, read-my-writes on, waits logged after 5 s and failed
 * after 120 s (long enough for a slow first iteration), a cluster of one
 * worker.
 */
enum geeps_status geeps_config_new(struct geeps_config **out);

/**
 * Frees a configuration. Instances created from it are not affected.
 * Freeing NULL does nothing.
 */
enum geeps_status geeps_config_free(struct geeps_config *config);

/**
 * Floats per row (1 to 1048576; default 128). Every worker of a cluster
 * must use the same width.
 */
enum geeps_status geeps_config_set_row_width(struct geeps_config *config, size_t floats);

/**
 * The device memory budget in bytes: parameter cache and local data kept
 * on the device, and the access buffer pool (default 1 GiB).
 */
enum geeps_status geeps_config_set_device_memory(struct geeps_config *config, size_t bytes);

/**
 * Whether a worker sees its own updates as soon as `geeps_update` returns
 * (default true).
 */
enum geeps_status geeps_config_set_read_my_writes(struct geeps_config *config, bool on);

/**
 * A blocking wait longer than this logs what it waits for and which worker
 * is behind (default 5000 ms; see `geeps_log_init`).
 */
enum geeps_status geeps_config_set_slow_wait_log_ms(struct geeps_config *config, uint64_t ms);

/**
 * A blocking wait longer than this fails with `GEEPS_STATUS_TIMEOUT`
 * (default 120000 ms: a first iteration may be slow, with kernels being
 * compiled, caches cold and other ranks still starting). It applies to
 * every blocking call of instances created from this config.
 */
enum geeps_status geeps_config_set_wait_deadline_ms(struct geeps_config *config, uint64_t ms);

/**
 * Puts instances created from this config on CUDA GPU `ordinal` (after
 * `CUDA_VISIBLE_DEVICES` remapping): parameter cache, local data and the
 * access buffer pool live in its memory, within the device memory budget
 * (`geeps_config_set_device_memory`) and the GPU's free memory less a
 * reserve for the application. `geeps_new` opens the GPU and fails with
 * `GEEPS_STATUS_DEVICE`, saying what is missing, when there is no usable
 * driver or no such GPU; it never falls back to the host.
 *
 * The `data` of every buffer of such an instance is then a CUDA device
 * pointer (a `CUdeviceptr` as `float *`), not host memory: never
 * dereference it on the host. Pass it to your kernels or `cudaMemcpy`, or
 * copy with `geeps_buffer_copy_to_host` / `geeps_buffer_copy_from_host`.
 * `geeps_host_addressable` tells which kind an instance hands out.
 */
enum geeps_status geeps_config_set_cuda_device(struct geeps_config *config, size_t ordinal);

/**
 * Puts instances created from this config on the host device (the
 * default): buffers are host memory. Undoes `geeps_config_set_cuda_device`.
 */
enum geeps_status geeps_config_set_host_device(struct geeps_config *config);

/**
 * Makes instances created from this config worker `rank` of `cluster`.
 * In-process: `0 <= rank < workers`. Network: `rank` must be this
 * process's own rank, the value of `geeps_cluster_rank` (else
 * `GEEPS_STATUS_INVALID_CONFIG`). Each rank may be joined by one instance,
 * once. The config keeps the cluster alive.
 */
enum geeps_status geeps_config_set_cluster(struct geeps_config *config,
                                           const struct geeps_cluster *cluster,
                                           size_t rank);

/**
 * Whether CUDA GPU `ordinal` is usable by geeps, without opening it: the
 * driver library loads and is recent enough, and the GPU exists and is
 * recent enough. On success it writes a description ("CUDA device 0 of 1:
 * NAME (compute capability 8.0, 81050 MiB), driver CUDA 12.4") like
 * `snprintf` (`buf` may be NULL when `cap` is 0; `*len` gets the full
 * length). Otherwise `GEEPS_STATUS_DEVICE`, and the message says what is
 * missing; nothing is written to `buf`.
 */
enum geeps_status geeps_cuda_probe(size_t ordinal, char *buf, size_t cap, size_t *len);

/**
 * Creates an in-process cluster of `workers` workers, with one keeper shard
 * per worker. Give each worker's config the cluster and its rank with
 * `geeps_config_set_cluster`.
 */
enum geeps_status geeps_cluster_new(size_t workers, struct geeps_cluster **out);

/**
 * This process's rank in a network cluster (`0 <= rank < world`): the rank
 * to give `geeps_config_set_cluster`. An in-process cluster has one rank
 * per worker and none of its own: `GEEPS_STATUS_INVALID_ARGUMENT`.
 */
enum geeps_status geeps_cluster_rank(const struct geeps_cluster *cluster, size_t *out);

/**
 * The number of workers in the cluster: the world size of a network
 * cluster, the `workers` of an in-process one.
 */
enum geeps_status geeps_cluster_world(const struct geeps_cluster *cluster, size_t *out);

/**
 * Shuts the cluster down and reports how that went. Every instance of this
 * process that joined it must be shut down first (`geeps_shutdown` or
 * `geeps_free`), else `GEEPS_STATUS_INVALID_STATE` and nothing happens.
 * A network cluster then waits until every worker of the cluster has left
 * this rank's keeper (up to the shutdown timeout, else
 * `GEEPS_STATUS_TIMEOUT` naming them) and stops the keeper. Afterwards no
 * instance can join the cluster (`GEEPS_STATUS_SHUT_DOWN`). Idempotent.
 * Optional: the last release of a cluster shuts it down as well, but can
 * only log a failure.
 */
enum geeps_status geeps_cluster_shutdown(struct geeps_cluster *cluster);

/**
 * Frees a cluster handle. Configs and instances that use the cluster keep
 * it alive until they are freed; the last of these releases shuts a network
 * cluster down (see `geeps_cluster_shutdown`), after the instances, so that
 * call may wait for the other processes' workers to leave. Freeing NULL
 * does nothing.
 */
enum geeps_status geeps_cluster_free(struct geeps_cluster *cluster);

/**
 * Creates network options with the defaults: no token, peers lost after
 * 30000 ms of silence, connecting retried for 60000 ms, shutdown waiting
 * up to 60000 ms for the other workers.
 */
enum geeps_status geeps_net_options_new(struct geeps_net_options **out);

/**
 * Frees network options; clusters created with them are not affected.
 * Freeing NULL does nothing.
 */
enum geeps_status geeps_net_options_free(struct geeps_net_options *options);

/**
 * The cluster's shared secret (UTF-8): a peer with another token is refused
 * when it joins. Under `geeps_cluster_from_env*`, `GEEPS_TOKEN` (set by
 * geeps-launch) overrides it.
 */
enum geeps_status geeps_net_options_set_token(struct geeps_net_options *options, const char *token);

/**
 * How long to keep retrying to reach a rendezvous or a keeper that has not
 * started yet, in ms (default 60000); then `GEEPS_STATUS_PEER_LOST`.
 */
enum geeps_status geeps_net_options_set_connect_timeout_ms(struct geeps_net_options *options,
                                                           uint64_t ms);

/**
 * A peer silent for this long is lost, in ms (default 30000). Idle
 * connections send a heartbeat every second, so it must exceed 1000.
 */
enum geeps_status geeps_net_options_set_peer_timeout_ms(struct geeps_net_options *options,
                                                        uint64_t ms);

/**
 * How long shutting a network cluster down waits for the other workers to
 * leave this rank's keeper, in ms (default 60000); then
 * `GEEPS_STATUS_TIMEOUT` naming them.
 */
enum geeps_status geeps_net_options_set_shutdown_timeout_ms(struct geeps_net_options *options,
                                                            uint64_t ms);

/**
 * Joins the network cluster described by the environment, as this
 * process's rank: a hosts file (`GEEPS_HOSTFILE`), `GEEPS_RANK`,
 * `GEEPS_WORLD_SIZE` with `GEEPS_HOSTS` or `GEEPS_RENDEZVOUS` (as
 * geeps-launch sets them), Slurm, Open MPI / PMI or torchrun variables.
 * `GEEPS_TOKEN` and `GEEPS_LISTEN` are honoured. Starts this rank's keeper
 * and, with a rendezvous, waits until every rank has registered (up to the
 * connect timeout). Give the instance's config this cluster and
 * `geeps_cluster_rank`'s value with `geeps_config_set_cluster`.
 * `GEEPS_STATUS_INVALID_CONFIG` says what is missing or inconsistent.
 */
enum geeps_status geeps_cluster_from_env(struct geeps_cluster **out);

/**
 * `geeps_cluster_from_env` with network options (NULL: the defaults).
 */
enum geeps_status geeps_cluster_from_env_with(const struct geeps_net_options *options,
                                              struct geeps_cluster **out);

/**
 * Joins a network cluster of `world` ranks as rank `rank`, where
 * `addresses[r]` (`"host:port"`, UTF-8) is the address of rank `r`'s
 * keeper. This rank's keeper listens on `addresses[rank]`; the others are
 * reached when the instance joins (retried up to the connect timeout).
 * Every rank must be given the same list. World 0, a rank not below
 * `world` or an address this process cannot listen on:
 * `GEEPS_STATUS_INVALID_CONFIG`.
 */
enum geeps_status geeps_cluster_connect(size_t rank,
                                        const char *const *addresses,
                                        size_t world,
                                        struct geeps_cluster **out);

/**
 * `geeps_cluster_connect` with network options (NULL: the defaults).
 */
enum geeps_status geeps_cluster_connect_with(size_t rank,
                                             const char *const *addresses,
                                             size_t world,
                                             const struct geeps_net_options *options,
                                             struct geeps_cluster **out);

/**
 * Creates an instance (one worker) from `config`, which is copied. Declare
 * its tables next; it joins its cluster at its first virtual call (or at
 * `geeps_finish_virtual_iteration`), and that call reports a mismatch with
 * the other workers. A config on a CUDA device
 * (`geeps_config_set_cuda_device`) opens the GPU here: without a usable
 * driver or GPU this fails with `GEEPS_STATUS_DEVICE` and the message says
 * what is missing.
 */
enum geeps_status geeps_new(const struct geeps_config *config, struct geeps_instance **out);

/**
 * Shuts the instance down if it is not already, and frees it. Buffers it
 * handed out are invalid afterwards. Freeing NULL does nothing; freeing a
 * freed instance returns `GEEPS_STATUS_INVALID_ARGUMENT`.
 */
enum geeps_status geeps_free(struct geeps_instance *ps);

/**
 * Stops the background threads and leaves the cluster, so the other
 * workers no longer wait for this one. Idempotent. Every later call on the
 * instance but `geeps_free` and the stats returns `GEEPS_STATUS_SHUT_DOWN`;
 * buffers still held stay readable until `geeps_free`.
 */
enum geeps_status geeps_shutdown(struct geeps_instance *ps);

/**
 * Declares a parameter table (shared by all workers; updates are added)
 * of `rows` rows of the row width. `*out` gets its id, numbered from 0 in
 * declaration order across both kinds. Every worker must declare the same
 * tables in the same order.
 */
enum geeps_status geeps_parameter_table(struct geeps_instance *ps,
                                        const char *name,
                                        uint32_t rows,
                                        geeps_table *out);

/**
 * Declares a local table (this worker's private rows: inputs, activations,
 * momentum) of `rows` rows. `*out` gets its id.
 */
enum geeps_status geeps_local_table(struct geeps_instance *ps,
                                    const char *name,
                                    uint32_t rows,
                                    geeps_table *out);

/**
 * Ends the virtual iteration: plans device memory, builds the indexes and
 * starts the background threads. Call it once, after the virtual calls
 * (with none at all if you do not record), before any real call. On
 * failure (for example `GEEPS_STATUS_BUDGET_TOO_SMALL`) the recording is
 * kept and the call may be retried.
 */
enum geeps_status geeps_finish_virtual_iteration(struct geeps_instance *ps);

/**
 * This instance's rank in its cluster (0 for a cluster of one).
 */
enum geeps_status geeps_rank(const struct geeps_instance *ps, size_t *out);

/**
 * The number of workers in this instance's cluster.
 */
enum geeps_status geeps_num_workers(const struct geeps_instance *ps, size_t *out);

/**
 * Floats per row: every buffer holds `rows × row_width` floats, row after
 * row in the order of the access's rows.
 */
enum geeps_status geeps_row_width(const struct geeps_instance *ps, size_t *out);

/**
 * Changes this instance's wait deadline: a blocking call (an acquisition
 * waiting for fresh rows or pool space) that starts from now on fails with
 * `GEEPS_STATUS_TIMEOUT` after `ms` milliseconds. Calls already waiting
 * keep theirs. Use it for a long first iteration and a shorter steady
 * state; the initial value is the config's
 * (`geeps_config_set_wait_deadline_ms`, 120000 by default). 0 is
 * `GEEPS_STATUS_INVALID_CONFIG` and changes nothing; after
 * `geeps_shutdown`, `GEEPS_STATUS_SHUT_DOWN`.
 */
enum geeps_status geeps_set_wait_deadline_ms(struct geeps_instance *ps, uint64_t ms);

/**
 * This instance's wait deadline in milliseconds (see
 * `geeps_set_wait_deadline_ms`); also after `geeps_shutdown`.
 */
enum geeps_status geeps_wait_deadline_ms(const struct geeps_instance *ps, uint64_t *out);

/**
 * Whether the `data` of this instance's buffers is host memory: true on
 * the host device (the default), false on a CUDA device, where it is a
 * device pointer to pass to kernels, `cudaMemcpy` or
 * `geeps_buffer_copy_to_host` / `geeps_buffer_copy_from_host`, and never
 * to dereference on the host.
 */
enum geeps_status geeps_host_addressable(const struct geeps_instance *ps, bool *out);

/**
 * Records a `read` of `rows[0..n]` of parameter table `table`, at most
 * `slack` clocks stale (`GEEPS_SLACK_BSP`, a bound, or
 * `GEEPS_SLACK_UNBOUNDED`). `*out` gets the handle for `geeps_read`.
 */
enum geeps_status geeps_virtual_read(struct geeps_instance *ps,
                                     geeps_table table,
                                     const uint32_t *rows,
                                     size_t n,
                                     uint32_t slack,
                                     geeps_handle *out);

/**
 * Records the `post_read` of the read `read`.
 */
enum geeps_status geeps_virtual_post_read(struct geeps_instance *ps, geeps_handle read);

/**
 * Records a `pre_update` of `rows[0..n]` of parameter table `table`; its
 * buffer comes zeroed. `*out` gets the handle for `geeps_pre_update`.
 */
enum geeps_status geeps_virtual_pre_update(struct geeps_instance *ps,
                                           geeps_table table,
                                           const uint32_t *rows,
                                           size_t n,
                                           geeps_handle *out);

/**
 * Records a `pre_update` of `rows[0..n]` of parameter table `table` whose
 * buffer the application overwrites whole before `geeps_update`: it comes
 * with unspecified contents instead of zeros (no pass zeroing it). Any
 * value left unwritten is sent as a delta. `*out` gets the handle for
 * `geeps_pre_update`.
 */
enum geeps_status geeps_virtual_pre_update_overwrite(struct geeps_instance *ps,
                                                     geeps_table table,
                                                     const uint32_t *rows,
                                                     size_t n,
                                                     geeps_handle *out);

/**
 * Records the `update` of the pre-update `pre_update`.
 */
enum geeps_status geeps_virtual_update(struct geeps_instance *ps, geeps_handle pre_update);

/**
 * Records a `local_access` of `rows[0..n]` of local table `table`;
 * `fetch = false` hands out the buffer without loading the rows (for data
 * that is overwritten every mini-batch). `*out` gets the handle for
 * `geeps_local_access`.
 */
enum geeps_status geeps_virtual_local_access(struct geeps_instance *ps,
                                             geeps_table table,
                                             const uint32_t *rows,
                                             size_t n,
                                             bool fetch,
                                             geeps_handle *out);

/**
 * Records the `post_local_access` of `access`; `save = false` does not
 * store the buffer back.
 */
enum geeps_status geeps_virtual_post_local_access(struct geeps_instance *ps,
                                                  geeps_handle access,
                                                  bool save);

/**
 * Records a `post_local_access` of `access` that declares its rows'
 * contents dead until written again: `geeps_post_local_access` on that
 * handle then saves nothing, not even what the previous access of the rows
 * posted with `save = true` and handed over with the buffer.
 */
enum geeps_status geeps_virtual_discard_local_access(struct geeps_instance *ps,
                                                     geeps_handle access);

/**
 * Records a `table_clock` of parameter table `table`.
 */
enum geeps_status geeps_virtual_table_clock(struct geeps_instance *ps, geeps_table table);

/**
 * Records a `table_clock` of every parameter table, in declaration order.
 */
enum geeps_status geeps_virtual_clock(struct geeps_instance *ps);

/**
 * The data age of a read buffer held by C: the clock its rows were read
 * at (the lowest over its tables). Every worker's updates of the clocks
 * below it are in the buffer; with slack `s`, a read at clock `c` has an
 * age of at least `c - s`. `id` is the buffer's `id`, whether it was
 * acquired by handle or by keys. A buffer not held (released, or of
 * another instance): `GEEPS_STATUS_INVALID_HANDLE`; a pre-update or local
 * buffer, or a read of no rows: `GEEPS_STATUS_INVALID_ARGUMENT`.
 */
enum geeps_status geeps_buffer_data_age(const struct geeps_instance *ps,
                                        uint64_t id,
                                        uint64_t *out);

/**
 * Copies the first `floats` floats of a held buffer to host memory at
 * `dst` (`floats` writable floats), through the instance's device, and
 * returns once they are there: `cudaMemcpy` for programs that do not link
 * the CUDA runtime, and a plain copy on the host device. `buffer` is the
 * `geeps_buffer` an acquisition filled, still held. `floats` above
 * `buffer->floats`, or a `buffer->data` that is not the buffer's:
 * `GEEPS_STATUS_INVALID_ARGUMENT`; a buffer not held:
 * `GEEPS_STATUS_INVALID_HANDLE`. Works after `geeps_shutdown` for buffers
 * still held.
 */
enum geeps_status geeps_buffer_copy_to_host(const struct geeps_instance *ps,
                                            const struct geeps_buffer *buffer,
                                            float *dst,
                                            size_t floats);

/**
 * Copies `floats` floats from host memory at `src` into the start of a
 * held pre-update or local buffer, through the instance's device, and
 * returns once the copy is done (so `src` may be reused at once, and a
 * following `geeps_update` or post sees the values). Read buffers are
 * read-only (`GEEPS_STATUS_INVALID_ARGUMENT`); otherwise as
 * `geeps_buffer_copy_to_host`.
 */
enum geeps_status geeps_buffer_copy_from_host(const struct geeps_instance *ps,
                                              const struct geeps_buffer *buffer,
                                              const float *src,
                                              size_t floats);

/**
 * `read` of the rows recorded by `geeps_virtual_read` as `h`: blocks until
 * they are fresh enough for the recorded slack, then `*out` describes them
 * (`rows × row_width` floats in device memory, which is host memory on the
 * host device). Valid until `geeps_post_read(ps, h)`. On failure `*out` is
 * zeroed.
 */
enum geeps_status geeps_read(struct geeps_instance *ps, geeps_handle h, struct geeps_buffer *out);

/**
 * `post_read`: gives back the buffer of the read `h`.
 */
enum geeps_status geeps_post_read(struct geeps_instance *ps, geeps_handle h);

/**
 * `pre_update` of the rows recorded by `geeps_virtual_pre_update` as `h`:
 * `*out` describes a zeroed buffer shaped like the rows. Write deltas into
 * it, then call `geeps_update(ps, h)` (or `geeps_discard_update`). On
 * failure `*out` is zeroed.
 */
enum geeps_status geeps_pre_update(struct geeps_instance *ps,
                                   geeps_handle h,
                                   struct geeps_buffer *out);

/**
 * `update`: adds the deltas of the pre-update `h` to the parameters (seen
 * by this worker at once, sent to the others at its next table clock) and
 * gives the buffer back.
 */
enum geeps_status geeps_update(struct geeps_instance *ps, geeps_handle h);

/**
 * Gives back the buffer of the pre-update `h` without applying it.
 */
enum geeps_status geeps_discard_update(struct geeps_instance *ps, geeps_handle h);

/**
 * `local_access` of the local rows recorded by `geeps_virtual_local_access`
 * as `h`: `*out` describes them (uninitialised if recorded with
 * `fetch = false`). Valid until `geeps_post_local_access(ps, h)`. On
 * failure `*out` is zeroed.
 */
enum geeps_status geeps_local_access(struct geeps_instance *ps,
                                     geeps_handle h,
                                     struct geeps_buffer *out);

/**
 * `post_local_access`: stores the buffer of the local access `h` back
 * (unless it was recorded with `save = false`) and gives it back.
 */
enum geeps_status geeps_post_local_access(struct geeps_instance *ps, geeps_handle h);

/**
 * Ends this worker's clock on parameter table `table`: its updates of the
 * clock go to the other workers.
 */
enum geeps_status geeps_table_clock(struct geeps_instance *ps, geeps_table table);

/**
 * Ends this worker's clock on every parameter table, in declaration order.
 */
enum geeps_status geeps_clock(struct geeps_instance *ps);

/**
 * This worker's clock of parameter table `table`: how many times it has
 * called `geeps_table_clock` on it (0 before the first; `geeps_clock`
 * counts for every parameter table). A read with slack `s` made at clock
 * `c` sees every worker's updates of the clocks below `c - s`. From the
 * first virtual call on (before it: `GEEPS_STATUS_INVALID_STATE`), also
 * after shutdown.
 */
enum geeps_status geeps_current_table_clock(const struct geeps_instance *ps,
                                            geeps_table table,
                                            uint64_t *out);

/**
 * Whether an operator asked the cluster to drain (the admin endpoint's
 * Drain, served by rank 0 with `GEEPS_ADMIN`): stop at the next clock
 * boundary, after saving what must survive. Always false in process. From
 * the first virtual call on (before it: `GEEPS_STATUS_INVALID_STATE`).
 */
enum geeps_status geeps_drain_requested(const struct geeps_instance *ps, bool *out);

/**
 * How many checkpoints an operator has asked for so far (the admin
 * endpoint's Checkpoint, served by rank 0 with `GEEPS_ADMIN`, relayed to
 * every rank): when it grows, save one with `geeps_checkpoint` at a clock
 * boundary the workers agree on. Always 0 in process. From the first
 * virtual call on (before it: `GEEPS_STATUS_INVALID_STATE`).
 */
enum geeps_status geeps_checkpoint_requests(const struct geeps_instance *ps, uint64_t *out);

/**
 * This worker's clock: the lowest clock of its parameter tables (they are
 * all equal when it only calls `geeps_clock`); 0 without parameter
 * tables. See `geeps_current_table_clock`.
 */
enum geeps_status geeps_current_clock(const struct geeps_instance *ps, uint64_t *out);

/**
 * Saves every parameter table as of this clock into the folder `dir`,
 * with `state_len` bytes of this worker's own state (momentum, data
 * position; NULL when 0). Every worker calls it at the same clock
 * boundary, after clocking every parameter table the same number of
 * times; `dir` must be writable by every rank. On rank 0 it returns once
 * the checkpoint is complete and published atomically, and sets
 * `*written` (may be NULL) to true; elsewhere once this worker's state is
 * written, with `*written` false. Exact under BSP. The two newest
 * checkpoints are kept. Failures: `GEEPS_STATUS_CHECKPOINT` (not at a
 * clock boundary, a folder that cannot be written, a rank that never
 * wrote its state), or the status of a read that failed.
 */
enum geeps_status geeps_checkpoint(struct geeps_instance *ps,
                                   const char *dir,
                                   const uint8_t *state,
                                   size_t state_len,
                                   bool *written);

/**
 * Loads the newest complete checkpoint in `dir` into this fresh instance
 * (after `geeps_finish_virtual_iteration`, before any update, clock or held
 * buffer); every worker calls it. The checkpoint may come from a cluster
 * of another size. It ends one clock on every parameter table and returns
 * when the saved rows are visible to reads at any slack. `*clock` gets the
 * clock the checkpoint was taken at (resume the application's count
 * there) and `*workers` the number of workers that saved it; both may be
 * NULL. Each saved worker's state is then available from
 * `geeps_restored_state`. Fails with `GEEPS_STATUS_CHECKPOINT` when the
 * folder holds no usable checkpoint or its tables differ from the declared
 * ones (the message says which); a damaged newest checkpoint falls back to
 * the one before.
 */
enum geeps_status geeps_restore(struct geeps_instance *ps,
                                const char *dir,
                                uint64_t *clock,
                                size_t *workers);

/**
 * Copies the state that worker `rank` saved (of the restored checkpoint)
 * into `buf[0..cap]`; `*len` gets its full length, so a call with `cap` 0
 * (and `buf` NULL) asks for the size. `GEEPS_STATUS_INVALID_STATE` before
 * a `geeps_restore`; `GEEPS_STATUS_INVALID_ARGUMENT` for a rank the
 * checkpoint does not have or a `cap` smaller than the state (nothing is
 * copied then).
 */
enum geeps_status geeps_restored_state(struct geeps_instance *ps,
                                       size_t rank,
                                       uint8_t *buf,
                                       size_t cap,
                                       size_t *len);

/**
 * `read` of `rows[0..n]` of parameter table `table` with staleness bound
 * `slack`, without a recorded handle. Release with `geeps_post_read_buffer`.
 * On failure `*out` is zeroed.
 */
enum geeps_status geeps_read_keys(struct geeps_instance *ps,
                                  geeps_table table,
                                  const uint32_t *rows,
                                  size_t n,
                                  uint32_t slack,
                                  struct geeps_buffer *out);

/**
 * `pre_update` of `rows[0..n]` of parameter table `table`, without a
 * recorded handle: a zeroed buffer. Release with `geeps_update_buffer` or
 * `geeps_discard_buffer`.
 */
enum geeps_status geeps_pre_update_keys(struct geeps_instance *ps,
                                        geeps_table table,
                                        const uint32_t *rows,
                                        size_t n,
                                        struct geeps_buffer *out);

/**
 * `local_access` of `rows[0..n]` of local table `table`, without a recorded
 * handle (`fetch = false`: not loaded). Release with
 * `geeps_post_local_access_buffer`.
 */
enum geeps_status geeps_local_access_keys(struct geeps_instance *ps,
                                          geeps_table table,
                                          const uint32_t *rows,
                                          size_t n,
                                          bool fetch,
                                          struct geeps_buffer *out);

/**
 * `post_read` of a keyed read's buffer.
 */
enum geeps_status geeps_post_read_buffer(struct geeps_instance *ps, uint64_t id);

/**
 * `update` of a keyed pre-update's buffer: applies its deltas.
 */
enum geeps_status geeps_update_buffer(struct geeps_instance *ps, uint64_t id);

/**
 * Gives back a keyed pre-update's buffer without applying it.
 */
enum geeps_status geeps_discard_buffer(struct geeps_instance *ps, uint64_t id);

/**
 * `post_local_access` of a keyed local access's buffer; `save = false`
 * does not store it back.
 */
enum geeps_status geeps_post_local_access_buffer(struct geeps_instance *ps, uint64_t id, bool save);

/**
 * Fills `*out` with the instance's counters (also after shutdown).
 */
enum geeps_status geeps_stats_get(const struct geeps_instance *ps, struct geeps_stats *out);

/**
 * The counters as one line of text, written like `snprintf`: at most
 * `cap` bytes with the NUL, and `*len` gets the full length without it.
 * `buf` may be NULL when `cap` is 0, to ask for the length.
 */
enum geeps_status geeps_stats_string(const struct geeps_instance *ps,
                                     char *buf,
                                     size_t cap,
                                     size_t *len);

/**
 * Zeroes the counters and restarts the stall-fraction clock.
 */
enum geeps_status geeps_stats_reset(struct geeps_instance *ps);

/**
 * Fills `*out` with the placement plan (after
 * `geeps_finish_virtual_iteration`, before shutdown) and the pool's
 * allocation at the time of the call.
 */
enum geeps_status geeps_plan_get(const struct geeps_instance *ps, struct geeps_plan *out);

/**
 * The placement plan as text, one line per table after a summary line
 * (which ends with the bytes the pool has allocated), written like
 * `geeps_stats_string`.
 */
enum geeps_status geeps_plan_string(const struct geeps_instance *ps,
                                    char *buf,
                                    size_t cap,
                                    size_t *len);

/**
 * Sends geeps's log to stderr. `filter` selects what, in `RUST_LOG` syntax
 * (`"warn"`, `"info"`, `"geeps_core=debug"`); NULL uses the `GEEPS_LOG`
 * environment variable, or `"warn"` when it is not set. Once per process:
 * a second call returns `GEEPS_STATUS_INVALID_STATE`.
 */
enum geeps_status geeps_log_init(const char *filter);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* GEEPS_H */
