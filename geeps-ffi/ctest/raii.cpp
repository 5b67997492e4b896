// The C++ wrapper include/geeps.hpp: guards post and discard on scope exit,
// explicit posts report failures as geeps::Error with the status, keyed
// calls, stats and plan text, two workers on threads, a network cluster of
// one on loopback. Built and run under AddressSanitizer by .ci/ffi.sh;
// prints "N passed, N failed".
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <cstring>
#include <thread>
#include <vector>

#include "geeps.hpp"

static int passed, failed;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (cond) {                                                            \
            passed++;                                                          \
        } else {                                                               \
            failed++;                                                          \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                      \
    } while (0)

// `stmt` throws geeps::Error with status `want`.
#define THROWS(want, stmt)                                                     \
    do {                                                                       \
        try {                                                                  \
            stmt;                                                              \
            failed++;                                                          \
            std::fprintf(stderr, "%s:%d: no error from %s\n", __FILE__, __LINE__, #stmt); \
        } catch (const geeps::Error &e) {                                      \
            CHECK(e.status() == (want));                                       \
            CHECK(std::strstr(e.what(), geeps_status_name(want)) != nullptr);  \
        }                                                                      \
    } while (0)

namespace {

constexpr uint32_t kRows = 4, kWidth = 8;

bool all(const float *p, size_t n, float v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return false;
    return true;
}

void single_worker() {
    geeps::Instance ps(geeps::Config().row_width(kWidth).device_memory(1 << 20));
    CHECK(ps.row_width() == kWidth && ps.rank() == 0 && ps.num_workers() == 1);
    geeps_table w = ps.parameter_table("w", kRows);
    geeps_table m = ps.local_table("m", 1);
    auto rows = geeps::rows(0, kRows);
    geeps_handle read = ps.virtual_read(w, rows);
    geeps_handle local = ps.virtual_local_access(m, {0});
    geeps_handle grad = ps.virtual_pre_update(w, rows);
    ps.virtual_update(grad);
    ps.virtual_post_local_access(local);
    ps.virtual_post_read(read);
    ps.virtual_clock();
    ps.finish_virtual_iteration();
    CHECK(ps.plan().peak_bytes > 0 && ps.plan_string().rfind("budget", 0) == 0);
    CHECK(ps.host_addressable());
    CHECK(ps.wait_deadline_ms() == 120000);
    ps.set_wait_deadline_ms(30000);
    CHECK(ps.wait_deadline_ms() == 30000);
    THROWS(GEEPS_STATUS_INVALID_CONFIG, ps.set_wait_deadline_ms(0));
    CHECK(ps.wait_deadline_ms() == 30000);

    for (int it = 0; it < 3; it++) {
        geeps::ReadBuffer params = ps.read(read);
        geeps::LocalBuffer counter = ps.local_access(local);
        geeps::UpdateBuffer delta = ps.pre_update(grad);
        CHECK(params.size() == kRows * kWidth && counter.size() == kWidth);
        CHECK(params.rows() == kRows && counter.rows() == 1 && delta.rows() == kRows);
        CHECK(params.id() != 0 && params.c_buffer().data == params.data());
        CHECK(params.data_age() == uint64_t(it) && ps.current_clock() == uint64_t(it));
        CHECK(!ps.drain_requested());
        CHECK(ps.checkpoint_requests() == 0);
        CHECK(ps.current_table_clock(w) == uint64_t(it));
        uint64_t age = 0;
        THROWS(GEEPS_STATUS_INVALID_ARGUMENT, geeps::check(geeps_buffer_data_age(ps.get(), delta.id(), &age), "age"));
        CHECK(all(params.data(), params.size(), float(it)));
        CHECK(counter[0] == float(it));
        for (size_t i = 0; i < delta.size(); i++) delta[i] = 1.0f;
        counter[0] += 1.0f;
        delta.update();
        THROWS(GEEPS_STATUS_INVALID_HANDLE, ps.read(read));  // still held by `params`
        // `counter` and `params` are posted here, in reverse order.
        counter.post();
        ps.clock();
    }

    {
        // An update buffer dropped without update() is discarded.
        auto params = ps.read(read);
        auto local_rows = ps.local_access(local);
        auto delta = ps.pre_update(grad);
        delta[0] = 100.0f;
    }
    ps.clock();
    {
        auto params = ps.read(read);
        CHECK(all(params.data(), params.size(), 3.0f));
        params.post();
        THROWS(GEEPS_STATUS_INVALID_HANDLE, geeps::check(geeps_post_read(ps.get(), read), "geeps_post_read"));
        bool logic = false;
        try {
            params.post();
        } catch (const std::logic_error &) {
            logic = true;
        }
        CHECK(logic && !params.held());
    }

    // Keyed calls.
    {
        auto r = ps.read_keys(w, {1, 3}, GEEPS_SLACK_UNBOUNDED);
        CHECK(r.size() == 2 * kWidth && all(r.data(), r.size(), 3.0f));
        auto u = ps.pre_update_keys(w, {1});
        u[0] = 0.5f;
        u.update();
        auto l = ps.local_access_keys(m, {0});
        CHECK(l[0] == 3.0f);
    }
    // The copy helpers, on the host device a plain copy.
    {
        auto r = ps.read_keys(w, {1});
        CHECK(r.to_host() == std::vector<float>(r.data(), r.data() + r.size()));
        THROWS(GEEPS_STATUS_INVALID_ARGUMENT, r.copy_to_host(nullptr, 0); std::vector<float> big(r.size() + 1);
               r.copy_to_host(big.data(), big.size()));
        auto l = ps.local_access_keys(m, {0});
        std::vector<float> v(l.size(), 7.0f);
        l.copy_from_host(v);
        CHECK(l[0] == 7.0f && l.to_host() == v);
        l.copy_from_host(std::vector<float>{3.0f});  // a prefix
        CHECK(l[0] == 3.0f && l[1] == 7.0f);
    }
    THROWS(GEEPS_STATUS_UNKNOWN_ROW, ps.read_keys(w, {kRows}));
    THROWS(GEEPS_STATUS_INVALID_STATE, ps.virtual_clock());
    geeps_stats s = ps.stats();
    CHECK(s.struct_size == sizeof s && s.calls[GEEPS_CALL_KIND_READ].count >= 5 && s.slow_path_calls >= 3);
    CHECK(ps.stats_string().find("stall") != std::string::npos);
    ps.shutdown();
    THROWS(GEEPS_STATUS_SHUT_DOWN, ps.read(read));
}

void two_workers() {
    geeps::Cluster cluster(2);
    float seen[2] = {0, 0};
    auto run = [&](size_t rank) {
        try {
            geeps::Instance ps(geeps::Config().row_width(kWidth).device_memory(1 << 20).cluster(cluster, rank));
            geeps_table w = ps.parameter_table("w", kRows);
            geeps_handle read = ps.virtual_read(w, geeps::rows(0, kRows));
            geeps_handle grad = ps.virtual_pre_update(w, geeps::rows(0, kRows));
            ps.virtual_update(grad);
            ps.virtual_post_read(read);
            ps.virtual_clock();
            ps.finish_virtual_iteration();
            for (int it = 0; it < 5; it++) {
                auto params = ps.read(read);
                auto delta = ps.pre_update(grad);
                delta[0] = 1.0f;
                delta.update();
                params.post();
                ps.clock();
            }
            seen[rank] = ps.read(read)[0];
        } catch (const geeps::Error &e) {
            std::fprintf(stderr, "worker %zu: %s\n", rank, e.what());
        }
    };
    std::thread a(run, 0), b(run, 1);
    a.join();
    b.join();
    // BSP: after 5 clocks each worker sees all 10 updates of clocks 0..4.
    CHECK(seen[0] == 10.0f && seen[1] == 10.0f);
}

// A pre-update recorded with `overwrite`: its buffer is not zeroed, the
// worker writes every value, and every delta counts exactly once.
void overwritten_updates() {
    geeps::Instance ps(geeps::Config().row_width(kWidth).device_memory(1 << 20));
    geeps_table w = ps.parameter_table("w", kRows);
    auto rows = geeps::rows(0, kRows);
    geeps_handle read = ps.virtual_read(w, rows);
    geeps_handle grad = ps.virtual_pre_update(w, rows, true);
    ps.virtual_update(grad);
    ps.virtual_post_read(read);
    ps.virtual_clock();
    ps.finish_virtual_iteration();
    for (int it = 0; it < 4; it++) {
        auto params = ps.read(read);
        CHECK(all(params.data(), params.size(), 2.0f * it));
        auto delta = ps.pre_update(grad);
        for (size_t i = 0; i < delta.size(); i++) delta[i] = 2.0f;
        delta.update();
        params.post();
        ps.clock();
    }
    CHECK(all(ps.read(read).data(), kRows * kWidth, 8.0f));
}

// "127.0.0.1:PORT" with a port that was free a moment ago.
std::string free_loopback_address() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    socklen_t len = sizeof a;
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
              getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0;
    if (fd >= 0) close(fd);
    if (!ok) throw std::runtime_error("no free loopback port");
    return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

void network_cluster_of_one() {
    THROWS(GEEPS_STATUS_INVALID_CONFIG, geeps::Cluster::connect(0, {}));
    THROWS(GEEPS_STATUS_INVALID_ARGUMENT, geeps::Cluster(1).rank());
    geeps::NetOptions opts;
    opts.token("raii").shutdown_timeout_ms(10000);
    THROWS(GEEPS_STATUS_INVALID_CONFIG, opts.connect_timeout_ms(0));
    geeps::Cluster cluster = geeps::Cluster::connect(0, {free_loopback_address()}, &opts);
    CHECK(cluster.rank() == 0 && cluster.world() == 1);
    float seen = 0;
    {
        geeps::Instance ps(
            geeps::Config().row_width(kWidth).device_memory(1 << 20).cluster(cluster, cluster.rank()));
        geeps_table w = ps.parameter_table("w", kRows);
        geeps_handle read = ps.virtual_read(w, geeps::rows(0, kRows));
        geeps_handle grad = ps.virtual_pre_update(w, geeps::rows(0, kRows));
        ps.virtual_update(grad);
        ps.virtual_post_read(read);
        ps.virtual_clock();
        ps.finish_virtual_iteration();
        for (int it = 0; it < 3; it++) {
            auto params = ps.read(read);
            auto delta = ps.pre_update(grad);
            delta[0] = 1.0f;
            delta.update();
            params.post();
            ps.clock();
        }
        seen = ps.read(read)[0];
        THROWS(GEEPS_STATUS_INVALID_STATE, cluster.shutdown());  // its instance still runs
    }
    CHECK(seen == 3.0f);
    cluster.shutdown();
}

// Checkpoint, then restore into a fresh instance; the bad paths by status.
void checkpoint_and_restore() {
    char tmpl[] = "/tmp/geeps-ckpt-cpp-XXXXXX";
    CHECK(mkdtemp(tmpl) != nullptr);
    std::string dir = std::string(tmpl) + "/ckpt";
    auto make = [](uint32_t rows) {
        geeps::Instance ps(geeps::Config().row_width(kWidth).device_memory(1 << 20));
        ps.parameter_table("w", rows);
        ps.finish_virtual_iteration();
        return ps;
    };
    {
        geeps::Instance ps = make(kRows);
        THROWS(GEEPS_STATUS_CHECKPOINT, ps.restore(dir));  // nothing saved yet
        THROWS(GEEPS_STATUS_INVALID_STATE, ps.restored_state(0));
        auto d = ps.pre_update_keys(0, geeps::rows(0, kRows));
        for (size_t i = 0; i < d.size(); i++) d[i] = float(i);
        d.update();
        ps.clock();
        CHECK(ps.checkpoint(dir, {1, 2, 3}));
        THROWS(GEEPS_STATUS_CHECKPOINT, ps.restore(dir));  // not a fresh instance
        THROWS(GEEPS_STATUS_NULL_POINTER, geeps::check(geeps_checkpoint(ps.get(), dir.c_str(), nullptr, 4, nullptr), "x"));
    }
    {
        geeps::Instance ps = make(kRows);
        auto r = ps.restore(dir);
        CHECK(r.clock == 1 && r.workers == 1);
        CHECK((ps.restored_state(0) == std::vector<uint8_t>{1, 2, 3}));
        THROWS(GEEPS_STATUS_INVALID_ARGUMENT, ps.restored_state(1));
        uint8_t small[2];
        size_t len = 0;
        THROWS(GEEPS_STATUS_INVALID_ARGUMENT, geeps::check(geeps_restored_state(ps.get(), 0, small, 2, &len), "x"));
        CHECK(len == 3);
        auto p = ps.read_keys(0, geeps::rows(0, kRows));
        bool same = true;
        for (size_t i = 0; i < p.size(); i++) same = same && p[i] == float(i);
        CHECK(same);
    }
    {
        geeps::Instance ps = make(kRows + 1);  // tables differ from the saved ones
        THROWS(GEEPS_STATUS_CHECKPOINT, ps.restore(dir));
    }
    std::string cleanup = std::string("rm -rf ") + tmpl;
    CHECK(std::system(cleanup.c_str()) == 0);
}

}  // namespace

int main() {
    try {
        single_worker();
        two_workers();
        overwritten_updates();
        network_cluster_of_one();
        checkpoint_and_restore();
    } catch (const std::exception &e) {
        failed++;
        std::fprintf(stderr, "unexpected: %s\n", e.what());
    }
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
