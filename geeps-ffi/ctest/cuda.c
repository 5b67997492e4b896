/*
 * An instance on a CUDA device from C: geeps_config_set_cuda_device, buffers
 * that hold device pointers (geeps_host_addressable is false), and the copy
 * helpers moving their rows to and from host memory, bounds included. Needs a
 * usable CUDA driver: .ci/ffi.sh runs it under the emulated one
 * (scripts/with-cuda-emu), which faults on any host access to a device
 * pointer. Prints "N passed, N failed" and exits non-zero on any failure.
 */
#include <stdio.h>
#include <string.h>

#include "geeps.h"

static int passed, failed;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (cond) {                                                                   \
            passed++;                                                                 \
        } else {                                                                      \
            failed++;                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, \
                    __LINE__, #cond, geeps_last_error_message());                     \
        }                                                                             \
    } while (0)

#define EXPECT(want, call) CHECK((call) == (want))
#define OK(call) EXPECT(GEEPS_STATUS_OK, call)

enum { WIDTH = 4, ROWS = 8, FLOATS = ROWS * WIDTH };

static const uint32_t ALL[ROWS] = {0, 1, 2, 3, 4, 5, 6, 7};

static int all(const float *p, size_t n, float v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

int main(void) {
    char what[256];
    size_t len = 0;
    geeps_status probe = geeps_cuda_probe(0, what, sizeof what, &len);
    if (probe != GEEPS_STATUS_OK) {
        fprintf(stderr, "no usable CUDA device 0 (run under scripts/with-cuda-emu): %s\n",
                geeps_last_error_message());
        return 1;
    }
    CHECK(len == strlen(what) && len > 0);
    printf("%s\n", what);

    geeps_config *cfg = NULL;
    geeps_instance *ps = NULL;
    OK(geeps_config_new(&cfg));
    OK(geeps_config_set_row_width(cfg, WIDTH));
    OK(geeps_config_set_device_memory(cfg, 1 << 20));
    OK(geeps_config_set_cuda_device(cfg, 0));
    OK(geeps_new(cfg, &ps));
    OK(geeps_config_free(cfg));
    if (ps == NULL) {
        printf("%d passed, %d failed\n", passed, failed + 1);
        return 1;
    }
    bool on_host = true;
    OK(geeps_host_addressable(ps, &on_host));
    CHECK(!on_host);

    geeps_table w, m;
    geeps_handle read, local, grad;
    OK(geeps_parameter_table(ps, "w", ROWS, &w));
    OK(geeps_local_table(ps, "m", 1, &m));
    OK(geeps_virtual_read(ps, w, ALL, ROWS, GEEPS_SLACK_BSP, &read));
    OK(geeps_virtual_local_access(ps, m, ALL, 1, true, &local));
    OK(geeps_virtual_pre_update(ps, w, ALL, ROWS, &grad));
    OK(geeps_virtual_update(ps, grad));
    OK(geeps_virtual_post_local_access(ps, local, true));
    OK(geeps_virtual_post_read(ps, read));
    OK(geeps_virtual_clock(ps));
    OK(geeps_finish_virtual_iteration(ps));

    float host[FLOATS + 1];
    for (int it = 0; it < 3; it++) {
        geeps_buffer pb, lb, db;
        OK(geeps_read(ps, read, &pb));
        OK(geeps_local_access(ps, local, &lb));
        OK(geeps_pre_update(ps, grad, &db));
        CHECK(pb.floats == FLOATS && lb.floats == WIDTH && db.floats == FLOATS && pb.data != NULL);
        /* Device pointers: only the copy helpers (or kernels) touch them. */
        OK(geeps_buffer_copy_to_host(ps, &pb, host, FLOATS));
        CHECK(all(host, FLOATS, (float)it));
        OK(geeps_buffer_copy_to_host(ps, &db, host, FLOATS));
        CHECK(all(host, FLOATS, 0.0f)); /* pre-update buffers start zeroed */
        OK(geeps_buffer_copy_to_host(ps, &lb, host, WIDTH));
        CHECK(host[0] == (float)it);
        host[0] += 1.0f;
        OK(geeps_buffer_copy_from_host(ps, &lb, host, 1)); /* a prefix */
        for (int i = 0; i < FLOATS; i++) host[i] = 1.0f;
        OK(geeps_buffer_copy_from_host(ps, &db, host, FLOATS));
        EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_buffer_copy_to_host(ps, &pb, host, FLOATS + 1));
        EXPECT(GEEPS_STATUS_INVALID_ARGUMENT, geeps_buffer_copy_from_host(ps, &pb, host, 1));
        OK(geeps_update(ps, grad));
        OK(geeps_post_local_access(ps, local));
        OK(geeps_post_read(ps, read));
        OK(geeps_clock(ps));
    }
    geeps_buffer kb;
    OK(geeps_read_keys(ps, w, ALL, ROWS, GEEPS_SLACK_BSP, &kb));
    OK(geeps_buffer_copy_to_host(ps, &kb, host, FLOATS));
    CHECK(all(host, FLOATS, 3.0f));
    OK(geeps_post_read_buffer(ps, kb.id));
    OK(geeps_local_access_keys(ps, m, ALL, 1, true, &kb));
    OK(geeps_buffer_copy_to_host(ps, &kb, host, 1));
    CHECK(host[0] == 3.0f);
    OK(geeps_post_local_access_buffer(ps, kb.id, false));
    OK(geeps_shutdown(ps));
    OK(geeps_free(ps));
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
