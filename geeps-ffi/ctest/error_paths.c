/*
 * The error paths of the geeps C API, driven from C: NULL pointers, unknown
 * and foreign handles, double posts, wrong-kind posts, calls out of order,
 * calls after shutdown, freed objects, bad values, cluster mismatches, a
 * timeout (after a per-instance deadline change), the wait deadline and
 * buffer copy helpers, a CUDA device that is not there, and network clusters (bad addresses, world 0, ranks out of
 * range, a broken environment, shutdown order) on loopback. After each
 * failure the instance must still train correctly. Built and run under
 * AddressSanitizer by .ci/ffi.sh; prints "N passed, N failed" and exits
 * non-zero on any failure.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, sockets */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "geeps.h"

static int passed, failed;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (cond) {                                                              \
            passed++;                                                            \
        } else {                                                                 \
            failed++;                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, \
                    __LINE__, #cond, geeps_last_error_message());                \
        }                                                                        \
    } while (0)

/* The call returns `want`, and a failure leaves a message that says why. */
#define EXPECT(want, call)                                                       \
    do {                                                                         \
        geeps_status got_ = (call);                                              \
        if (got_ == (want) &&                                                    \
            ((want) == GEEPS_STATUS_OK || geeps_last_error_message()[0] != '\0')) { \
            passed++;                                                            \
        } else {                                                                 \
            failed++;                                                            \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (last error: %s)\n", \
                    __FILE__, __LINE__, #call, geeps_status_name(got_),          \
                    geeps_status_name(want), geeps_last_error_message());        \
        }                                                                        \
    } while (0)

#define OK(call) EXPECT(GEEPS_STATUS_OK, call)

/* The last error message mentions `text`. */
#define MESSAGE_HAS(text) CHECK(strstr(geeps_last_error_message(), (text)) != NULL)

enum { WIDTH = 4, ROWS = 8, LOCAL_ROWS = 2 };

static const uint32_t ALL[ROWS] = {0, 1, 2, 3, 4, 5, 6, 7};

/* One instance with a parameter table `w` and a local table `m`, and one
 * recorded iteration: read w, local_access m, pre_update w, update,
 * post_local_access, post_read, clock. */
typedef struct {
    geeps_instance *ps;
    geeps_table w, m;
    geeps_handle read, local, grad;
} worker;

static geeps_config *small_config(void) {
    geeps_config *cfg = NULL;
    OK(geeps_config_new(&cfg));
    OK(geeps_config_set_row_width(cfg, WIDTH));
    OK(geeps_config_set_device_memory(cfg, 1 << 20));
    OK(geeps_config_set_wait_deadline_ms(cfg, 2000));
    return cfg;
}

static void declare(worker *k, const geeps_config *cfg) {
    OK(geeps_new(cfg, &k->ps));
    OK(geeps_parameter_table(k->ps, "w", ROWS, &k->w));
    OK(geeps_local_table(k->ps, "m", LOCAL_ROWS, &k->m));
    CHECK(k->w == 0 && k->m == 1);
}

static void record(worker *k) {
    OK(geeps_virtual_read(k->ps, k->w, ALL, ROWS, GEEPS_SLACK_BSP, &k->read));
    OK(geeps_virtual_local_access(k->ps, k->m, ALL, LOCAL_ROWS, true, &k->local));
    OK(geeps_virtual_pre_update(k->ps, k->w, ALL, ROWS, &k->grad));
    OK(geeps_virtual_update(k->ps, k->grad));
    OK(geeps_virtual_post_local_access(k->ps, k->local, true));
    OK(geeps_virtual_post_read(k->ps, k->read));
    OK(geeps_virtual_table_clock(k->ps, k->w));
    CHECK(k->read != GEEPS_INVALID_HANDLE && k->grad != k->read);
}

/* One real iteration in recorded order: checks the parameters read equal
 * `expect` (BSP, one worker), adds 1 to each, counts in the local rows. */
static void iterate(worker *k, float expect) {
    geeps_buffer pb, lb, db;
    OK(geeps_read(k->ps, k->read, &pb));
    OK(geeps_local_access(k->ps, k->local, &lb));
    OK(geeps_pre_update(k->ps, k->grad, &db));
    float *params = pb.data, *local = lb.data, *delta = db.data;
    if (params == NULL || local == NULL || delta == NULL) {
        failed++;
        return;
    }
    CHECK(pb.rows == ROWS && pb.floats == ROWS * WIDTH && lb.rows == LOCAL_ROWS && db.rows == ROWS);
    CHECK(pb.id != 0 && pb.id != lb.id && pb.id != db.id);
    int fresh = 1;
    for (int i = 0; i < ROWS * WIDTH; i++) {
        fresh &= params[i] == expect && delta[i] == 0.0f;
        delta[i] = 1.0f;
    }
    CHECK(fresh);
    local[0] += 1.0f;
    OK(geeps_update(k->ps, k->grad));
    OK(geeps_post_local_access(k->ps, k->local));
    OK(geeps_post_read(k->ps, k->read));
    OK(geeps_table_clock(k->ps, k->w));
}

static void null_pointers_and_freed_objects(void) {
    geeps_config *cfg = small_config();
    geeps_instance *ps = NULL;
    geeps_table t;
    geeps_handle h;
    /* must be zeroed on failure */
    geeps_buffer buf = {.id = 7, .data = (float *)&t, .floats = 1, .rows = 1};
    size_t n;

    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_config_new(NULL));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_new(NULL, &ps));
    CHECK(ps == NULL);
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_new(cfg, NULL));
    MESSAGE_HAS("`out` is NULL");
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_config_set_row_width(NULL, 4));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_read(NULL, 1, &buf));
    CHECK(buf.data == NULL && buf.id == 0 && buf.floats == 0 && buf.rows == 0);
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_read((geeps_instance *)&n, 1, NULL));
    uint64_t clock = 0;
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_current_clock(NULL, &clock));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_buffer_data_age(NULL, 1, &clock));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_cluster_new(2, NULL));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_rank(NULL, &n));

    OK(geeps_new(cfg, &ps));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_parameter_table(ps, NULL, 4, &t));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_parameter_table(ps, "w", 4, NULL));
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_parameter_table(ps, "\xff\xfe", 4, &t));
    MESSAGE_HAS("UTF-8");
    OK(geeps_parameter_table(ps, "w", ROWS, &t));
    /* Clocks are known once the instance has joined (its first virtual call). */
    EXPECT(GEEPS_STATUS_INVALID_STATE, geeps_current_clock(ps, &clock));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_current_clock(ps, NULL));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_current_table_clock(ps, t, NULL));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_buffer_data_age(ps, 1, NULL));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_virtual_read(ps, t, NULL, 3, 0, &h));
    MESSAGE_HAS("`rows` is NULL");
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_virtual_read(ps, t, ALL, ROWS, 0, NULL));
    EXPECT(GEEPS_STATUS_INVALID_KEYS, geeps_virtual_read(ps, t, NULL, 0, 0, &h));
    OK(geeps_rank(ps, &n));
    CHECK(n == 0);
    OK(geeps_num_workers(ps, &n));
    CHECK(n == 1);
    OK(geeps_row_width(ps, &n));
    CHECK(n == WIDTH);

    /* Freed objects are refused, not used. */
    OK(geeps_free(ps));
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_free(ps));
    MESSAGE_HAS("not a live geeps_instance");
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_finish_virtual_iteration(ps));
    OK(geeps_config_free(cfg));
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_config_free(cfg));
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_new(cfg, &ps));
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_read((geeps_instance *)&n, 1, &buf));
    OK(geeps_free(NULL));
    OK(geeps_config_free(NULL));
    OK(geeps_cluster_free(NULL));
}

static void bad_values(void) {
    geeps_config *cfg = small_config();
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_config_set_row_width(cfg, 0));
    MESSAGE_HAS("row_width");
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_config_set_device_memory(cfg, 0));
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_config_set_wait_deadline_ms(cfg, 0));
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_config_set_slow_wait_log_ms(cfg, 0));
    OK(geeps_config_set_read_my_writes(cfg, true));

    worker k = {0};
    OK(geeps_new(cfg, &k.ps));
    geeps_table t;
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_parameter_table(k.ps, "empty", 0, &t));
    OK(geeps_parameter_table(k.ps, "w", ROWS, &k.w));
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_local_table(k.ps, "w", 2, &t));
    MESSAGE_HAS("declared twice");
    OK(geeps_local_table(k.ps, "m", LOCAL_ROWS, &k.m));

    geeps_handle h;
    uint32_t twice[2] = {1, 1}, outside[1] = {ROWS};
    EXPECT(GEEPS_STATUS_UNKNOWN_TABLE, geeps_virtual_read(k.ps, 9, ALL, 1, 0, &h));
    EXPECT(GEEPS_STATUS_UNKNOWN_ROW, geeps_virtual_read(k.ps, k.w, outside, 1, 0, &h));
    EXPECT(GEEPS_STATUS_INVALID_KEYS, geeps_virtual_read(k.ps, k.w, twice, 2, 0, &h));
    EXPECT(GEEPS_STATUS_INVALID_KEYS, geeps_virtual_read(k.ps, k.m, ALL, 1, 0, &h));
    EXPECT(GEEPS_STATUS_INVALID_KEYS, geeps_virtual_local_access(k.ps, k.w, ALL, 1, true, &h));
    EXPECT(GEEPS_STATUS_INVALID_KEYS, geeps_virtual_table_clock(k.ps, k.m));
    EXPECT(GEEPS_STATUS_UNKNOWN_TABLE, geeps_virtual_table_clock(k.ps, 9));

    /* None of that was recorded: the instance trains. */
    record(&k);
    OK(geeps_finish_virtual_iteration(k.ps));
    iterate(&k, 0.0f);
    EXPECT(GEEPS_STATUS_UNKNOWN_TABLE, geeps_table_clock(k.ps, 9));
    geeps_buffer b;
    EXPECT(GEEPS_STATUS_UNKNOWN_ROW, geeps_read_keys(k.ps, k.w, outside, 1, 0, &b));
    CHECK(b.id == 0 && b.data == NULL);
    iterate(&k, 1.0f);
    OK(geeps_free(k.ps));

    /* A budget below one peak: refused, and the recording is kept. */
    OK(geeps_config_set_device_memory(cfg, 64));
    declare(&k, cfg);
    record(&k);
    EXPECT(GEEPS_STATUS_BUDGET_TOO_SMALL, geeps_finish_virtual_iteration(k.ps));
    MESSAGE_HAS("raise `device_memory`");
    OK(geeps_free(k.ps));
    OK(geeps_config_free(cfg));
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_cluster_new(0, &(geeps_cluster *){NULL}));
}

static void handles_and_posts(void) {
    geeps_config *cfg = small_config();
    worker k = {0}, other = {0};
    declare(&k, cfg);
    declare(&other, cfg);
    record(&k);
    record(&other);
    geeps_buffer buf;
    char named[64];

    /* Out of order: real calls before the end of the virtual iteration. */
    EXPECT(GEEPS_STATUS_INVALID_STATE, geeps_read(k.ps, k.read, &buf));
    MESSAGE_HAS("finish_virtual_iteration");
    EXPECT(GEEPS_STATUS_INVALID_STATE, geeps_table_clock(k.ps, k.w));
    geeps_stats stats = {.struct_size = sizeof stats};
    geeps_plan plan = {.struct_size = sizeof plan};
    EXPECT(GEEPS_STATUS_INVALID_STATE, geeps_plan_get(k.ps, &plan));
    /* Recording mistakes. */
    /* Messages name the handle as the caller passed it. */
    snprintf(named, sizeof named, "handle %#llx", (unsigned long long)k.read);
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_virtual_post_read(k.ps, k.read));
    MESSAGE_HAS("already released");
    MESSAGE_HAS(named);
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_virtual_update(k.ps, k.read));
    MESSAGE_HAS("geeps_virtual_update: ");
    MESSAGE_HAS(named);
    MESSAGE_HAS("recorded by geeps_virtual_read; this call needs one from geeps_virtual_pre_update");
    snprintf(named, sizeof named, "handle %#llx was not returned", (unsigned long long)other.read);
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_virtual_post_read(k.ps, other.read));
    MESSAGE_HAS(named);
    MESSAGE_HAS("recorded by another instance");
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_virtual_post_read(k.ps, GEEPS_INVALID_HANDLE));
    MESSAGE_HAS("handle 0 is GEEPS_INVALID_HANDLE");
    /* Clocks: joined, none yet. */
    uint64_t clock = 99;
    OK(geeps_current_clock(k.ps, &clock));
    CHECK(clock == 0);
    /* In process nobody can ask for a drain. */
    bool drain = true;
    OK(geeps_drain_requested(k.ps, &drain));
    CHECK(!drain);
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_drain_requested(k.ps, NULL));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_drain_requested(NULL, &drain));
    EXPECT(GEEPS_STATUS_INVALID_KEYS, geeps_current_table_clock(k.ps, k.m, &clock));
    MESSAGE_HAS("local table");
    EXPECT(GEEPS_STATUS_UNKNOWN_TABLE, geeps_current_table_clock(k.ps, 9, &clock));
    geeps_table late;
    EXPECT(GEEPS_STATUS_INVALID_STATE, geeps_parameter_table(k.ps, "late", 4, &late));
    MESSAGE_HAS("declared too late");

    OK(geeps_finish_virtual_iteration(k.ps));
    OK(geeps_finish_virtual_iteration(other.ps));
    EXPECT(GEEPS_STATUS_INVALID_STATE, geeps_finish_virtual_iteration(k.ps));
    geeps_handle h;
    EXPECT(GEEPS_STATUS_INVALID_STATE, geeps_virtual_read(k.ps, k.w, ALL, 1, 0, &h));
    iterate(&k, 0.0f);
    OK(geeps_current_clock(k.ps, &clock));
    CHECK(clock == 1);
    OK(geeps_current_table_clock(k.ps, k.w, &clock));
    CHECK(clock == 1);

    /* Unknown, foreign and wrong-kind handles. */
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_read(k.ps, GEEPS_INVALID_HANDLE, &buf));
    CHECK(buf.data == NULL && buf.id == 0);
    MESSAGE_HAS("geeps_read: handle 0 is GEEPS_INVALID_HANDLE");
    snprintf(named, sizeof named, "handle %#llx was not returned", (unsigned long long)(k.read + 1000));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_read(k.ps, k.read + 1000, &buf));
    MESSAGE_HAS(named);
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_read(k.ps, other.read, &buf));
    MESSAGE_HAS("recorded by another instance");
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_pre_update(k.ps, k.read, &buf));
    MESSAGE_HAS("recorded by geeps_virtual_read; this call needs one from geeps_virtual_pre_update");
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_local_access(k.ps, k.grad, &buf));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_post_read(k.ps, k.read));
    MESSAGE_HAS("holds no buffer");
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_update(k.ps, 12345));
    MESSAGE_HAS("handle 0x3039 was not returned");

    /* Double acquisition, wrong-kind posts, double posts. */
    geeps_buffer pb, db, lb0;
    OK(geeps_read(k.ps, k.read, &pb));
    float *params = pb.data, *delta = NULL, *local = NULL;
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_read(k.ps, k.read, &buf));
    MESSAGE_HAS("already holds a read buffer");
    /* Its data age: read at clock 1 (BSP), so it holds the clock-0 updates. */
    uint64_t age = 99;
    OK(geeps_buffer_data_age(k.ps, pb.id, &age));
    CHECK(age == 1);
    /* A buffer acquired by handle is released by its handle, not its id. */
    snprintf(named, sizeof named, "acquired with handle %#llx", (unsigned long long)k.read);
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_post_read_buffer(k.ps, pb.id));
    MESSAGE_HAS(named);
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_update(k.ps, k.read));
    MESSAGE_HAS("release it with post_read");
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_post_local_access(k.ps, k.read));
    OK(geeps_local_access(k.ps, k.local, &lb0));
    OK(geeps_pre_update(k.ps, k.grad, &db));
    local = lb0.data;
    delta = db.data;
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_buffer_data_age(k.ps, db.id, &age));
    MESSAGE_HAS("is a pre_update buffer; only read buffers have a data age");
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_buffer_data_age(k.ps, lb0.id, &age));
    CHECK(params != NULL && params[0] == 1.0f && local != NULL && local[0] == 1.0f);
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_post_read(k.ps, k.grad));
    delta[0] = 1.0f;
    for (int i = 1; i < ROWS * WIDTH; i++) delta[i] = 1.0f;
    local[0] += 1.0f;
    OK(geeps_update(k.ps, k.grad));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_update(k.ps, k.grad));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_discard_update(k.ps, k.grad));
    OK(geeps_post_local_access(k.ps, k.local));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_post_local_access(k.ps, k.local));
    OK(geeps_post_read(k.ps, k.read));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_post_read(k.ps, k.read));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_buffer_data_age(k.ps, pb.id, &age));
    MESSAGE_HAS("is not held by this instance");
    OK(geeps_table_clock(k.ps, k.w));
    iterate(&k, 2.0f);

    /* Out of recorded order works (slow path) and is counted. */
    OK(geeps_pre_update(k.ps, k.grad, &db));
    OK(geeps_discard_update(k.ps, k.grad));
    OK(geeps_read(k.ps, k.read, &pb));
    params = pb.data;
    CHECK(params != NULL && params[WIDTH] == 3.0f);
    OK(geeps_post_read(k.ps, k.read));
    OK(geeps_stats_get(k.ps, &stats));
    CHECK(stats.struct_size == sizeof stats && stats.resyncs > 0);
    CHECK(stats.calls[GEEPS_CALL_KIND_READ].count >= 3);
    OK(geeps_clock(k.ps));
    iterate(&k, 3.0f);

    /* Keyed calls: released by id, and only the right way, once. */
    geeps_buffer rb, ub, lb;
    uint32_t two[2] = {6, 7};
    OK(geeps_read_keys(k.ps, k.w, two, 2, GEEPS_SLACK_UNBOUNDED, &rb));
    CHECK(rb.id != 0 && rb.floats == 2 * WIDTH && rb.rows == 2 && rb.data != NULL && rb.data[0] == 4.0f);
    OK(geeps_buffer_data_age(k.ps, rb.id, &age));
    CHECK(age >= 4 && age <= 5); /* UNBOUNDED: what the cache holds, at least the last BSP read's */
    OK(geeps_pre_update_keys(k.ps, k.w, two, 2, &ub));
    OK(geeps_local_access_keys(k.ps, k.m, ALL, 1, true, &lb));
    CHECK(lb.data != NULL && lb.data[0] == 4.0f);
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_update_buffer(k.ps, rb.id));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_post_read(k.ps, rb.id));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_post_read_buffer(k.ps, 999999));
    OK(geeps_post_read_buffer(k.ps, rb.id));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_post_read_buffer(k.ps, rb.id));
    OK(geeps_discard_buffer(k.ps, ub.id));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_update_buffer(k.ps, ub.id));
    OK(geeps_post_local_access_buffer(k.ps, lb.id, false));
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_post_local_access_buffer(k.ps, lb.id, false));
    iterate(&k, 4.0f);

    /* Stats and plan, as structs (any struct_size) and as strings. */
    OK(geeps_plan_get(k.ps, &plan));
    CHECK(plan.struct_size == sizeof plan && plan.peak_bytes > 0 && plan.budget == 1 << 20);
    CHECK(plan.local_in_place == 1 && plan.local_buffered == 0); /* all of `m`, one range */
    /* The pool may use what the budget leaves; it has allocated far less
     * than the budget (on the host device a read of consecutive rows is
     * served from the published rows, outside the pool). */
    CHECK(plan.pool_bytes <= plan.budget);
    CHECK(plan.pool_allocated_bytes <= plan.pool_bytes && plan.pool_allocated_bytes < plan.budget / 4);
    struct { size_t struct_size; size_t budget; } old_plan = {sizeof old_plan, 0};
    OK(geeps_plan_get(k.ps, (geeps_plan *)&old_plan));
    CHECK(old_plan.struct_size == sizeof old_plan && old_plan.budget == 1 << 20);
    geeps_plan zero = {0};
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_plan_get(k.ps, &zero));
    MESSAGE_HAS("struct_size");
    char text[16];
    size_t len = 0, full = 0;
    OK(geeps_plan_string(k.ps, NULL, 0, &full));
    CHECK(full > sizeof text);
    OK(geeps_plan_string(k.ps, text, sizeof text, &len));
    CHECK(len == full && strlen(text) == sizeof text - 1 && strncmp(text, "budget", 6) == 0);
    char whole[1024];
    OK(geeps_plan_string(k.ps, whole, sizeof whole, &len));
    CHECK(len < sizeof whole && strstr(whole, "; pool allocated ") != NULL);
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_stats_string(k.ps, NULL, 8, &len));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_stats_string(k.ps, text, sizeof text, NULL));
    OK(geeps_stats_reset(k.ps));

    /* Calls after shutdown; a buffer still held stays readable until free. */
    OK(geeps_read(k.ps, k.read, &pb));
    params = pb.data;
    OK(geeps_shutdown(k.ps));
    OK(geeps_shutdown(k.ps));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_post_read(k.ps, k.read));
    CHECK(params != NULL && params[0] == 5.0f);
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_pre_update(k.ps, k.grad, &buf));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_local_access(k.ps, k.local, &buf));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_read_keys(k.ps, k.w, ALL, 1, 0, &rb));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_table_clock(k.ps, k.w));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_clock(k.ps));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_virtual_read(k.ps, k.w, ALL, 1, 0, &h));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_finish_virtual_iteration(k.ps));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_plan_get(k.ps, &plan));
    OK(geeps_stats_get(k.ps, &stats));
    OK(geeps_current_clock(k.ps, &clock));
    CHECK(clock == 6);
    OK(geeps_free(k.ps));

    /* Shut down before it ever joined. */
    worker early = {0};
    declare(&early, cfg);
    OK(geeps_shutdown(early.ps));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_parameter_table(early.ps, "x", 1, &late));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_virtual_clock(early.ps));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_read(early.ps, 1, &buf));
    OK(geeps_free(early.ps));

    iterate(&other, 0.0f);
    OK(geeps_free(other.ps));
    OK(geeps_config_free(cfg));
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The per-instance wait deadline, the buffer copy helpers on the host
 * device (a plain copy), and a CUDA device that cannot be opened. */
static void deadlines_copies_and_devices(void) {
    geeps_config *cfg = small_config();
    worker k = {0};
    uint64_t ms = 0;
    declare(&k, cfg);
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_set_wait_deadline_ms(NULL, 10));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_wait_deadline_ms(NULL, &ms));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_wait_deadline_ms(k.ps, NULL));
    /* Before joining: the config's, and a change applies to the engine. */
    OK(geeps_wait_deadline_ms(k.ps, &ms));
    CHECK(ms == 2000);
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_set_wait_deadline_ms(k.ps, 0));
    MESSAGE_HAS("wait_deadline");
    OK(geeps_set_wait_deadline_ms(k.ps, 3000));
    record(&k);
    OK(geeps_wait_deadline_ms(k.ps, &ms));
    CHECK(ms == 3000);
    OK(geeps_finish_virtual_iteration(k.ps));
    /* After joining: the engine's. */
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_set_wait_deadline_ms(k.ps, 0));
    OK(geeps_wait_deadline_ms(k.ps, &ms));
    CHECK(ms == 3000);
    OK(geeps_set_wait_deadline_ms(k.ps, 2500));
    OK(geeps_wait_deadline_ms(k.ps, &ms));
    CHECK(ms == 2500);

    bool on_host = false;
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_host_addressable(k.ps, NULL));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_host_addressable(NULL, &on_host));
    OK(geeps_host_addressable(k.ps, &on_host));
    CHECK(on_host);

    iterate(&k, 0.0f);
    geeps_buffer pb, db, lb;
    float host[ROWS * WIDTH + 1];
    OK(geeps_read(k.ps, k.read, &pb));
    OK(geeps_local_access(k.ps, k.local, &lb));
    OK(geeps_pre_update(k.ps, k.grad, &db));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_buffer_copy_to_host(NULL, &pb, host, 1));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_buffer_copy_to_host(k.ps, NULL, host, 1));
    MESSAGE_HAS("`buffer` is NULL");
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_buffer_copy_to_host(k.ps, &pb, NULL, 1));
    MESSAGE_HAS("`dst` is NULL");
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_buffer_copy_from_host(k.ps, &db, NULL, 1));
    MESSAGE_HAS("`src` is NULL");
    OK(geeps_buffer_copy_to_host(k.ps, &pb, NULL, 0));
    /* More floats than the buffer holds. */
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_buffer_copy_to_host(k.ps, &pb, host, ROWS * WIDTH + 1));
    MESSAGE_HAS("holds 32");
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_buffer_copy_from_host(k.ps, &db, host, ROWS * WIDTH + 1));
    /* Read buffers are read-only; a changed data pointer is not the buffer. */
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_buffer_copy_from_host(k.ps, &pb, host, 1));
    MESSAGE_HAS("read-only");
    geeps_buffer moved = db;
    moved.data += 1;
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_buffer_copy_from_host(k.ps, &moved, host, 1));
    MESSAGE_HAS("buffer->data");
    /* The copies: the read buffer's rows, and deltas written through it. */
    OK(geeps_buffer_copy_to_host(k.ps, &pb, host, ROWS * WIDTH));
    int same = 1;
    for (int i = 0; i < ROWS * WIDTH; i++) same &= host[i] == 1.0f && pb.data[i] == 1.0f;
    CHECK(same);
    for (int i = 0; i < ROWS * WIDTH; i++) host[i] = 1.0f;
    OK(geeps_buffer_copy_from_host(k.ps, &db, host, ROWS * WIDTH));
    CHECK(db.data[0] == 1.0f && db.data[ROWS * WIDTH - 1] == 1.0f);
    OK(geeps_update(k.ps, k.grad));
    /* A buffer no longer held. */
    EXPECT(GEEPS_STATUS_INVALID_HANDLE, geeps_buffer_copy_to_host(k.ps, &db, host, 1));
    MESSAGE_HAS("not held");
    OK(geeps_post_local_access(k.ps, k.local));
    OK(geeps_post_read(k.ps, k.read));
    OK(geeps_table_clock(k.ps, k.w));
    iterate(&k, 2.0f);

    /* After shutdown: the deadline is read, not changed; held buffers
     * still copy. */
    OK(geeps_read_keys(k.ps, k.w, ALL, 1, GEEPS_SLACK_BSP, &pb));
    OK(geeps_shutdown(k.ps));
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_set_wait_deadline_ms(k.ps, 1000));
    OK(geeps_wait_deadline_ms(k.ps, &ms));
    CHECK(ms == 2500);
    OK(geeps_buffer_copy_to_host(k.ps, &pb, host, WIDTH));
    CHECK(host[0] == 3.0f);
    OK(geeps_free(k.ps));
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_wait_deadline_ms(k.ps, &ms));

    /* A CUDA device that is not there: geeps_new fails, never the host. */
    char text[256];
    size_t len = 0;
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_config_set_cuda_device(NULL, 0));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_cuda_probe(4096, text, sizeof text, NULL));
    EXPECT(GEEPS_STATUS_DEVICE, geeps_cuda_probe(4096, text, sizeof text, &len));
    MESSAGE_HAS("geeps_cuda_probe(4096)");
    OK(geeps_config_set_cuda_device(cfg, 4096));
    geeps_instance *gpu = (geeps_instance *)&len;
    EXPECT(GEEPS_STATUS_DEVICE, geeps_new(cfg, &gpu));
    MESSAGE_HAS("cannot open CUDA device 4096");
    CHECK(gpu == NULL);
    OK(geeps_config_set_host_device(cfg));
    OK(geeps_new(cfg, &gpu));
    OK(geeps_free(gpu));
    OK(geeps_config_free(cfg));
}

static void clusters(void) {
    geeps_cluster *cluster = NULL;
    OK(geeps_cluster_new(2, &cluster));
    geeps_config *cfg = small_config();
    /* Long for the config; rank 0 shortens its own below. */
    OK(geeps_config_set_wait_deadline_ms(cfg, 60000));
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_config_set_cluster(cfg, cluster, 2));
    MESSAGE_HAS("rank 2 requested, but this in-process cluster has 2 workers: ranks 0 and 1");
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_config_set_cluster(cfg, NULL, 0));
    size_t n = 0;
    OK(geeps_cluster_world(cluster, &n));
    CHECK(n == 2);
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_cluster_rank(cluster, &n));
    MESSAGE_HAS("one rank per worker");

    worker a = {0}, twin = {0}, b = {0};
    OK(geeps_config_set_cluster(cfg, cluster, 0));
    declare(&a, cfg);
    declare(&twin, cfg);
    OK(geeps_config_set_cluster(cfg, cluster, 1));
    OK(geeps_cluster_free(cluster)); /* the config keeps it alive */
    declare(&b, cfg);
    record(&a);
    /* A second instance for rank 0 is refused when it joins. */
    geeps_handle h;
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_virtual_read(twin.ps, twin.w, ALL, 1, 0, &h));
    MESSAGE_HAS("already has");
    OK(geeps_free(twin.ps));

    /* Rank 1 declares other tables: a mismatch, and it can try again. */
    worker odd = {0};
    geeps_table t;
    OK(geeps_new(cfg, &odd.ps));
    OK(geeps_parameter_table(odd.ps, "w", ROWS + 1, &t));
    EXPECT(GEEPS_STATUS_MISMATCH, geeps_virtual_clock(odd.ps));
    OK(geeps_free(odd.ps));

    /* Rank 1 joins but never clocks: rank 0's second BSP read times out. */
    record(&b);
    OK(geeps_finish_virtual_iteration(a.ps));
    OK(geeps_finish_virtual_iteration(b.ps));
    iterate(&a, 0.0f);
    geeps_buffer buf = {.id = 1};
    OK(geeps_set_wait_deadline_ms(a.ps, 300));
    double start = seconds();
    EXPECT(GEEPS_STATUS_TIMEOUT, geeps_read(a.ps, a.read, &buf));
    double waited = seconds() - start;
    CHECK(waited >= 0.25 && waited < 30.0); /* its own deadline, not the config's */
    MESSAGE_HAS("worker 1");
    CHECK(buf.data == NULL && buf.id == 0);
    /* Rank 1 catches up (at clock 0 it sees no one's updates yet); rank 0
     * goes on where it was and sees both workers' clock-0 updates. */
    iterate(&b, 0.0f);
    iterate(&a, 2.0f);
    OK(geeps_shutdown(b.ps));
    iterate(&a, 3.0f); /* a departed worker no longer holds others back */
    OK(geeps_free(a.ps));
    OK(geeps_free(b.ps));
    OK(geeps_config_free(cfg));
}

/* Binds 127.0.0.1:port (port 0: any free one) and writes the address it got
 * as "127.0.0.1:PORT" into buf; returns 0 when the bind fails, that is when
 * a socket listens there (SO_REUSEADDR, as keepers use it, so connections
 * of a stopped keeper in TIME_WAIT do not count). The socket is closed, so
 * the port is free for a keeper to take right after. */
static int loopback_port(uint16_t port, char *buf, size_t cap) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int on = 1;
    struct sockaddr_in a = {0};
    socklen_t len = sizeof a;
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0 &&
             bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             getsockname(fd, (struct sockaddr *)&a, &len) == 0;
    if (fd >= 0) close(fd);
    if (ok) snprintf(buf, cap, "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
    return ok;
}

static uint16_t port_of(const char *address) { return (uint16_t)atoi(strrchr(address, ':') + 1); }

static void network_clusters(void) {
    char addr[32], other[32], scratch[32];
    CHECK(loopback_port(0, addr, sizeof addr) && loopback_port(0, other, sizeof other));
    const char *one[1] = {addr};
    const char *two[2] = {addr, other};
    geeps_cluster *c = (geeps_cluster *)&passed; /* must be cleared to NULL on failure */
    size_t n = 0;

    /* NULL out-pointers and arguments. */
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_cluster_connect(0, one, 1, NULL));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_cluster_connect_with(0, one, 1, NULL, NULL));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_cluster_from_env(NULL));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_cluster_connect(0, NULL, 2, &c));
    MESSAGE_HAS("`addresses` is NULL");
    CHECK(c == NULL);
    const char *hole[2] = {addr, NULL};
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_cluster_connect(0, hole, 2, &c));
    MESSAGE_HAS("addresses[1]");
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_cluster_rank(NULL, &n));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_cluster_world(NULL, &n));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_cluster_shutdown(NULL));

    /* World 0, rank >= world, addresses that cannot be listened on. */
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_cluster_connect(0, two, 0, &c));
    MESSAGE_HAS("world 0");
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_cluster_connect(2, two, 2, &c));
    MESSAGE_HAS("rank 2 of world 2");
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_cluster_connect(5, NULL, 0, &c));
    const char *no_port[1] = {"127.0.0.1"};
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_cluster_connect(0, no_port, 1, &c));
    MESSAGE_HAS("cannot listen");
    const char *bad_port[2] = {"127.0.0.1:99999", other};
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_cluster_connect(0, bad_port, 2, &c));
    const char *not_utf8[1] = {"\xff:1"};
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_cluster_connect(0, not_utf8, 1, &c));
    MESSAGE_HAS("UTF-8");
    CHECK(c == NULL);

    /* A broken environment. */
    unsetenv("GEEPS_HOSTFILE");
    unsetenv("GEEPS_TOKEN");
    unsetenv("GEEPS_LISTEN");
    setenv("GEEPS_RANK", "2", 1);
    setenv("GEEPS_WORLD_SIZE", "2", 1);
    setenv("GEEPS_HOSTS", "127.0.0.1:1,127.0.0.1:2", 1);
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_cluster_from_env(&c));
    MESSAGE_HAS("GEEPS_RANK=2 is not below GEEPS_WORLD_SIZE=2");
    setenv("GEEPS_RANK", "one", 1);
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_cluster_from_env(&c));
    MESSAGE_HAS("not a number");
    CHECK(c == NULL);

    /* Network options. */
    geeps_net_options *o = NULL;
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_net_options_new(NULL));
    OK(geeps_net_options_new(&o));
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_net_options_set_connect_timeout_ms(o, 0));
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_net_options_set_peer_timeout_ms(o, 500));
    MESSAGE_HAS("heartbeat");
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_net_options_set_shutdown_timeout_ms(o, 0));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_net_options_set_token(o, NULL));
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_net_options_set_token(NULL, "x"));
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_cluster_connect_with(0, one, 1, (geeps_net_options *)&n, &c));
    OK(geeps_net_options_set_token(o, "c-test"));
    OK(geeps_net_options_set_peer_timeout_ms(o, 10000));
    OK(geeps_net_options_set_shutdown_timeout_ms(o, 10000));

    /* A cluster of one from the environment, trained through. */
    setenv("GEEPS_RANK", "0", 1);
    setenv("GEEPS_WORLD_SIZE", "1", 1);
    setenv("GEEPS_HOSTS", addr, 1);
    OK(geeps_cluster_from_env_with(o, &c));
    n = 9;
    OK(geeps_cluster_rank(c, &n));
    CHECK(n == 0);
    OK(geeps_cluster_world(c, &n));
    CHECK(n == 1);
    EXPECT(GEEPS_STATUS_NULL_POINTER, geeps_cluster_rank(c, NULL));
    geeps_cluster *twin = NULL;
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_cluster_connect_with(0, one, 1, o, &twin));
    MESSAGE_HAS("cannot listen"); /* the keeper holds the address */
    geeps_config *cfg = small_config();
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_config_set_cluster(cfg, c, 1));
    MESSAGE_HAS("geeps_cluster_rank");
    OK(geeps_config_set_cluster(cfg, c, 0));
    worker k = {0}, second = {0};
    declare(&k, cfg);
    record(&k);
    OK(geeps_finish_virtual_iteration(k.ps));
    OK(geeps_num_workers(k.ps, &n));
    CHECK(n == 1);
    for (int it = 0; it < 3; it++) iterate(&k, (float)it);
    /* One instance per rank; the cluster outlives its running instance. */
    declare(&second, cfg);
    EXPECT(GEEPS_STATUS_INVALID_CONFIG, geeps_virtual_clock(second.ps));
    MESSAGE_HAS("already has an instance");
    OK(geeps_free(second.ps));
    EXPECT(GEEPS_STATUS_INVALID_STATE, geeps_cluster_shutdown(c));
    MESSAGE_HAS("still running");
    iterate(&k, 3.0f);
    OK(geeps_shutdown(k.ps));
    OK(geeps_cluster_shutdown(c));
    OK(geeps_cluster_shutdown(c));
    CHECK(loopback_port(port_of(addr), scratch, sizeof scratch)); /* the keeper stopped */
    EXPECT(GEEPS_STATUS_SHUT_DOWN, geeps_config_set_cluster(cfg, c, 0));
    OK(geeps_free(k.ps));
    OK(geeps_cluster_free(c));
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_cluster_free(c));

    /* Freed before its instance: the last release (here geeps_free) stops
     * the instance first, then the keeper, without waiting its timeout. */
    OK(geeps_cluster_connect_with(0, one, 1, o, &c));
    OK(geeps_config_set_cluster(cfg, c, 0));
    OK(geeps_cluster_free(c));
    declare(&k, cfg);
    OK(geeps_config_free(cfg));
    record(&k);
    OK(geeps_finish_virtual_iteration(k.ps));
    iterate(&k, 0.0f);
    iterate(&k, 1.0f);
    CHECK(!loopback_port(port_of(addr), scratch, sizeof scratch));
    OK(geeps_free(k.ps));
    CHECK(loopback_port(port_of(addr), scratch, sizeof scratch));
    OK(geeps_net_options_free(o));
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_net_options_free(o));
    OK(geeps_net_options_free(NULL));
}

static void misc(void) {
    CHECK(strcmp(geeps_status_name(GEEPS_STATUS_TIMEOUT), "GEEPS_STATUS_TIMEOUT") == 0);
    CHECK(strcmp(geeps_status_name(-1), "GEEPS_STATUS_UNKNOWN") == 0);
    CHECK(geeps_version()[0] != '\0');
    EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_log_init("no such level=="));
    OK(geeps_log_init("error"));
    EXPECT(GEEPS_STATUS_INVALID_STATE, geeps_log_init("error"));
}

int main(void) {
    misc();
    null_pointers_and_freed_objects();
    bad_values();
    handles_and_posts();
    deadlines_copies_and_devices();
    clusters();
    network_clusters();
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
