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
 * An in-process cluster: N workers in one process sharing keeper shards.
 * Opaque; create with `geeps_cluster_new`, free with `geeps_cluster_free`.
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
 * A table of one instance, numbered from 0 in declaration order.
 */
typedef uint32_t geeps_table;

/**
 * A recorded call of one instance, as returned by the `geeps_virtual_*`
 * acquisitions. Never 0 for a valid handle.
 */
typedef uint64_t geeps_handle;

/**
 * A buffer from a keyed call.
 */
typedef struct geeps_buffer {
  /**
   * Names the buffer in its release (`geeps_post_read_buffer`, ...);
   * never 0, never reused by an instance.
   */
  uint64_t id;
  /**
   * `floats` floats in device memory (host memory on the host device).
   */
  float *data;
  /**
   * Rows × row width.
   */
  size_t floats;
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
 * (or `geeps_reset_stats`). Set `struct_size = sizeof(geeps_stats)` before
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
   * Bytes of the access buffer pool.
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
 * after 30 s, a cluster of one worker.
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
 * (default 30000 ms).
 */
enum geeps_status geeps_config_set_wait_deadline_ms(struct geeps_config *config, uint64_t ms);

/**
 * Makes instances created from this config worker `rank` of the in-process
 * `cluster` (`0 <= rank < workers`). Each rank may be joined by one
 * instance, once. The config keeps the cluster alive.
 */
enum geeps_status geeps_config_set_cluster(struct geeps_config *config,
                                           const struct geeps_cluster *cluster,
                                           size_t rank);

/**
 * Creates an in-process cluster of `workers` workers, with one keeper shard
 * per worker. Give each worker's config the cluster and its rank with
 * `geeps_config_set_cluster`.
 */
enum geeps_status geeps_cluster_new(size_t workers, struct geeps_cluster **out);

/**
 * Frees a cluster handle. Configs and instances that use the cluster keep
 * it alive until they are freed. Freeing NULL does nothing.
 */
enum geeps_status geeps_cluster_free(struct geeps_cluster *cluster);

/**
 * Creates an instance (one worker) from `config`, which is copied. Declare
 * its tables next; it joins its cluster at its first virtual call (or at
 * `geeps_finish_virtual_iteration`), and that call reports a mismatch with
 * the other workers.
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
 * Records a `pre_update` of `rows[0..n]` of parameter table `table`.
 * `*out` gets the handle for `geeps_pre_update`.
 */
enum geeps_status geeps_virtual_pre_update(struct geeps_instance *ps,
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
 * Records a `table_clock` of parameter table `table`.
 */
enum geeps_status geeps_virtual_table_clock(struct geeps_instance *ps, geeps_table table);

/**
 * Records a `table_clock` of every parameter table, in declaration order.
 */
enum geeps_status geeps_virtual_clock(struct geeps_instance *ps);

/**
 * `read` of the rows recorded by `geeps_virtual_read` as `h`: blocks until
 * they are fresh enough for the recorded slack, then `*buf` points to them
 * (`rows × row_width` floats in device memory, which is host memory on the
 * host device). Valid until `geeps_post_read(ps, h)`. On failure `*buf` is
 * NULL.
 */
enum geeps_status geeps_read(struct geeps_instance *ps, geeps_handle h, float **buf);

/**
 * `post_read`: gives back the buffer of the read `h`.
 */
enum geeps_status geeps_post_read(struct geeps_instance *ps, geeps_handle h);

/**
 * `pre_update` of the rows recorded by `geeps_virtual_pre_update` as `h`:
 * `*buf` points to a zeroed buffer shaped like the rows. Write deltas into
 * it, then call `geeps_update(ps, h)` (or `geeps_discard_update`).
 */
enum geeps_status geeps_pre_update(struct geeps_instance *ps, geeps_handle h, float **buf);

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
 * as `h`: `*buf` points to them (uninitialised if recorded with
 * `fetch = false`). Valid until `geeps_post_local_access(ps, h)`.
 */
enum geeps_status geeps_local_access(struct geeps_instance *ps, geeps_handle h, float **buf);

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
enum geeps_status geeps_stats(const struct geeps_instance *ps, struct geeps_stats *out);

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
enum geeps_status geeps_reset_stats(struct geeps_instance *ps);

/**
 * Fills `*out` with the placement plan (after
 * `geeps_finish_virtual_iteration`, before shutdown).
 */
enum geeps_status geeps_plan(const struct geeps_instance *ps, struct geeps_plan *out);

/**
 * The placement plan as text, one line per table after a summary line,
 * written like `geeps_stats_string`.
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
