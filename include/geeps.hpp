// geeps.hpp: a header-only C++17 wrapper over the C API in geeps.h, written
// by hand (geeps.h is the generated one). Failures throw geeps::Error with
// the status and geeps's message; objects free themselves; buffers are RAII
// guards: a read or local buffer is posted when it goes out of scope, an
// update buffer is discarded unless update() was called. Guards hold a
// plain pointer to their instance and must not outlive it. Guide:
// docs/c-api.md.
#ifndef GEEPS_HPP
#define GEEPS_HPP

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "geeps.h"

namespace geeps {

/// A failed call: what() is "call: GEEPS_STATUS_...: message".
class Error : public std::runtime_error {
public:
    Error(geeps_status status, const char *call)
        : std::runtime_error(std::string(call) + ": " + geeps_status_name(status) + ": " +
                             geeps_last_error_message()),
          status_(status) {}
    geeps_status status() const noexcept { return status_; }

private:
    geeps_status status_;
};

inline void check(geeps_status status, const char *call) {
    if (status != GEEPS_STATUS_OK) throw Error(status, call);
}

/// Rows first, first + 1, ..., first + count - 1.
inline std::vector<uint32_t> rows(uint32_t first, uint32_t count) {
    std::vector<uint32_t> r(count);
    std::iota(r.begin(), r.end(), first);
    return r;
}

/// What geeps_cuda_probe says of CUDA GPU `ordinal`; throws geeps::Error
/// (GEEPS_STATUS_DEVICE) with what is missing when it is not usable.
inline std::string cuda_probe(size_t ordinal) {
    size_t len = 0;
    check(geeps_cuda_probe(ordinal, nullptr, 0, &len), "geeps_cuda_probe");
    std::string s(len + 1, '\0');
    check(geeps_cuda_probe(ordinal, &s[0], s.size(), &len), "geeps_cuda_probe");
    s.resize(len);
    return s;
}

/// Owns one C object; move-only.
template <class T, geeps_status (*Free)(T *)>
class Owned {
public:
    Owned() = default;
    Owned(const Owned &) = delete;
    Owned &operator=(const Owned &) = delete;
    Owned(Owned &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    Owned &operator=(Owned &&o) noexcept {
        std::swap(p_, o.p_);
        return *this;
    }
    ~Owned() {
        if (p_ != nullptr) Free(p_);
    }
    T *get() const noexcept { return p_; }

protected:
    T *p_ = nullptr;
};

/// Network settings for Cluster::from_env and Cluster::connect; setters chain.
class NetOptions : public Owned<geeps_net_options, geeps_net_options_free> {
public:
    NetOptions() { check(geeps_net_options_new(&p_), "geeps_net_options_new"); }
    NetOptions &token(const std::string &t) {
        check(geeps_net_options_set_token(p_, t.c_str()), "geeps_net_options_set_token");
        return *this;
    }
    NetOptions &connect_timeout_ms(uint64_t ms) {
        check(geeps_net_options_set_connect_timeout_ms(p_, ms), "geeps_net_options_set_connect_timeout_ms");
        return *this;
    }
    NetOptions &peer_timeout_ms(uint64_t ms) {
        check(geeps_net_options_set_peer_timeout_ms(p_, ms), "geeps_net_options_set_peer_timeout_ms");
        return *this;
    }
    NetOptions &shutdown_timeout_ms(uint64_t ms) {
        check(geeps_net_options_set_shutdown_timeout_ms(p_, ms), "geeps_net_options_set_shutdown_timeout_ms");
        return *this;
    }
};

/// A cluster: in-process (`Cluster(workers)`, one rank per worker thread) or
/// this process's rank of a network cluster (`Cluster::from_env()`,
/// `Cluster::connect(rank, addresses)`). A network cluster shuts down when
/// it and every Config and Instance that uses it are gone; call shutdown()
/// after the instances to see that wait's outcome as an exception.
class Cluster : public Owned<geeps_cluster, geeps_cluster_free> {
public:
    explicit Cluster(size_t workers) { check(geeps_cluster_new(workers, &p_), "geeps_cluster_new"); }
    /// The network cluster described by the environment (geeps-launch,
    /// GEEPS_*, hosts file, Slurm, MPI, torchrun).
    static Cluster from_env(const NetOptions *options = nullptr) {
        Cluster c;
        check(geeps_cluster_from_env_with(options ? options->get() : nullptr, &c.p_), "geeps_cluster_from_env");
        return c;
    }
    /// Rank `rank` of the network cluster whose keepers listen on
    /// `addresses` ("host:port", by rank).
    static Cluster connect(size_t rank, const std::vector<std::string> &addresses,
                           const NetOptions *options = nullptr) {
        std::vector<const char *> list;
        for (const auto &a : addresses) list.push_back(a.c_str());
        Cluster c;
        check(geeps_cluster_connect_with(rank, list.data(), list.size(), options ? options->get() : nullptr, &c.p_),
              "geeps_cluster_connect");
        return c;
    }
    /// This process's rank (network clusters only).
    size_t rank() const {
        size_t r = 0;
        check(geeps_cluster_rank(p_, &r), "geeps_cluster_rank");
        return r;
    }
    /// The number of workers.
    size_t world() const {
        size_t w = 0;
        check(geeps_cluster_world(p_, &w), "geeps_cluster_world");
        return w;
    }
    /// Stops the cluster once this process's instances are shut down.
    void shutdown() { check(geeps_cluster_shutdown(p_), "geeps_cluster_shutdown"); }

private:
    Cluster() = default;
};

/// The settings of an instance; setters chain.
class Config : public Owned<geeps_config, geeps_config_free> {
public:
    Config() { check(geeps_config_new(&p_), "geeps_config_new"); }
    Config &row_width(size_t floats) {
        check(geeps_config_set_row_width(p_, floats), "geeps_config_set_row_width");
        return *this;
    }
    Config &device_memory(size_t bytes) {
        check(geeps_config_set_device_memory(p_, bytes), "geeps_config_set_device_memory");
        return *this;
    }
    Config &read_my_writes(bool on) {
        check(geeps_config_set_read_my_writes(p_, on), "geeps_config_set_read_my_writes");
        return *this;
    }
    Config &slow_wait_log_ms(uint64_t ms) {
        check(geeps_config_set_slow_wait_log_ms(p_, ms), "geeps_config_set_slow_wait_log_ms");
        return *this;
    }
    Config &wait_deadline_ms(uint64_t ms) {
        check(geeps_config_set_wait_deadline_ms(p_, ms), "geeps_config_set_wait_deadline_ms");
        return *this;
    }
    /// Instances on CUDA GPU `ordinal`: buffers' data() are then device
    /// pointers (see Instance::host_addressable and the copy helpers).
    Config &cuda_device(size_t ordinal) {
        check(geeps_config_set_cuda_device(p_, ordinal), "geeps_config_set_cuda_device");
        return *this;
    }
    /// Instances on the host device (the default).
    Config &host_device() {
        check(geeps_config_set_host_device(p_), "geeps_config_set_host_device");
        return *this;
    }
    Config &cluster(const Cluster &c, size_t rank) {
        check(geeps_config_set_cluster(p_, c.get(), rank), "geeps_config_set_cluster");
        return *this;
    }
};

namespace detail {

/// A held buffer: acquired by recorded handle (released by it) or by a
/// keyed call (released by its id).
class Held {
public:
    Held(const Held &) = delete;
    Held &operator=(const Held &) = delete;
    Held(Held &&o) noexcept
        : ps_(std::exchange(o.ps_, nullptr)), key_(o.key_), keyed_(o.keyed_), buf_(o.buf_) {}
    Held &operator=(Held &&o) noexcept {
        std::swap(ps_, o.ps_);
        std::swap(key_, o.key_);
        std::swap(keyed_, o.keyed_);
        std::swap(buf_, o.buf_);
        return *this;
    }
    /// Floats in the buffer (rows x row width).
    size_t size() const noexcept { return buf_.floats; }
    /// Rows in the buffer, in the order of the access's rows.
    size_t rows() const noexcept { return buf_.rows; }
    /// The buffer's id (geeps_buffer.id).
    uint64_t id() const noexcept { return buf_.id; }
    /// The C description of the buffer.
    const geeps_buffer &c_buffer() const noexcept { return buf_; }
    /// Whether the buffer is still held (not yet posted).
    bool held() const noexcept { return ps_ != nullptr; }
    /// Copies the first `floats` floats to host memory at `dst`, through
    /// the instance's device (needed on a CUDA device, where data() is a
    /// device pointer; a plain copy on the host device).
    void copy_to_host(float *dst, size_t floats) const {
        if (ps_ == nullptr) throw std::logic_error("copy_to_host: the buffer was already released");
        check(geeps_buffer_copy_to_host(ps_, &buf_, dst, floats), "geeps_buffer_copy_to_host");
    }
    /// The whole buffer, copied to host memory.
    std::vector<float> to_host() const {
        std::vector<float> v(buf_.floats);
        copy_to_host(v.data(), v.size());
        return v;
    }

protected:
    Held(geeps_instance *ps, uint64_t key, bool keyed, const geeps_buffer &buf)
        : ps_(ps), key_(key), keyed_(keyed), buf_(buf) {}
    ~Held() = default;
    /// Releases with `by_handle` or `by_id`; the guard is empty afterwards.
    void release(geeps_status (*by_handle)(geeps_instance *, geeps_handle),
                 geeps_status (*by_id)(geeps_instance *, uint64_t), const char *call) {
        if (ps_ == nullptr) throw std::logic_error(std::string(call) + ": the buffer was already released");
        geeps_instance *ps = std::exchange(ps_, nullptr);
        check(keyed_ ? by_id(ps, key_) : by_handle(ps, key_), call);
    }
    geeps_instance *ps_;
    uint64_t key_;
    bool keyed_;
    geeps_buffer buf_;
};

}  // namespace detail

/// Rows from read(); posted when it goes out of scope.
class ReadBuffer : public detail::Held {
public:
    ReadBuffer(ReadBuffer &&) noexcept = default;
    ReadBuffer &operator=(ReadBuffer &&) noexcept = default;
    ~ReadBuffer() {
        if (ps_ != nullptr) (void)(keyed_ ? geeps_post_read_buffer(ps_, key_) : geeps_post_read(ps_, key_));
    }
    const float *data() const noexcept { return buf_.data; }
    const float &operator[](size_t i) const noexcept { return buf_.data[i]; }
    /// The clock the rows were read at: every worker's updates of the
    /// clocks below it are included (geeps_buffer_data_age).
    uint64_t data_age() const {
        if (ps_ == nullptr) throw std::logic_error("data_age: the buffer was already released");
        uint64_t age = 0;
        check(geeps_buffer_data_age(ps_, buf_.id, &age), "geeps_buffer_data_age");
        return age;
    }
    /// post_read now, reporting a failure.
    void post() { release(geeps_post_read, geeps_post_read_buffer, "post_read"); }

private:
    ReadBuffer(geeps_instance *ps, uint64_t key, bool keyed, const geeps_buffer &buf) : Held(ps, key, keyed, buf) {}
    friend class Instance;
};

/// A buffer from pre_update() (zeroed unless recorded with `overwrite`);
/// discarded unless update() is called.
class UpdateBuffer : public detail::Held {
public:
    UpdateBuffer(UpdateBuffer &&) noexcept = default;
    UpdateBuffer &operator=(UpdateBuffer &&) noexcept = default;
    ~UpdateBuffer() {
        if (ps_ != nullptr) (void)(keyed_ ? geeps_discard_buffer(ps_, key_) : geeps_discard_update(ps_, key_));
    }
    float *data() noexcept { return buf_.data; }
    float &operator[](size_t i) noexcept { return buf_.data[i]; }
    /// Copies `floats` floats from host memory at `src` into the start of
    /// the buffer, through the instance's device.
    void copy_from_host(const float *src, size_t floats) {
        if (ps_ == nullptr) throw std::logic_error("copy_from_host: the buffer was already released");
        check(geeps_buffer_copy_from_host(ps_, &buf_, src, floats), "geeps_buffer_copy_from_host");
    }
    void copy_from_host(const std::vector<float> &src) { copy_from_host(src.data(), src.size()); }
    /// Adds the deltas to the parameters.
    void update() { release(geeps_update, geeps_update_buffer, "update"); }
    /// Gives the buffer back without applying it.
    void discard() { release(geeps_discard_update, geeps_discard_buffer, "discard_update"); }

private:
    UpdateBuffer(geeps_instance *ps, uint64_t key, bool keyed, const geeps_buffer &buf) : Held(ps, key, keyed, buf) {}
    friend class Instance;
};

/// Local rows from local_access(); posted (saved as recorded, or saved
/// when keyed) when it goes out of scope.
class LocalBuffer : public detail::Held {
public:
    LocalBuffer(LocalBuffer &&) noexcept = default;
    LocalBuffer &operator=(LocalBuffer &&) noexcept = default;
    ~LocalBuffer() {
        if (ps_ != nullptr) (void)(keyed_ ? geeps_post_local_access_buffer(ps_, key_, true) : geeps_post_local_access(ps_, key_));
    }
    float *data() noexcept { return buf_.data; }
    float &operator[](size_t i) noexcept { return buf_.data[i]; }
    /// Copies `floats` floats from host memory at `src` into the start of
    /// the buffer, through the instance's device.
    void copy_from_host(const float *src, size_t floats) {
        if (ps_ == nullptr) throw std::logic_error("copy_from_host: the buffer was already released");
        check(geeps_buffer_copy_from_host(ps_, &buf_, src, floats), "geeps_buffer_copy_from_host");
    }
    void copy_from_host(const std::vector<float> &src) { copy_from_host(src.data(), src.size()); }
    /// post_local_access now, reporting a failure.
    void post() { release(geeps_post_local_access, save_keyed, "post_local_access"); }

private:
    LocalBuffer(geeps_instance *ps, uint64_t key, bool keyed, const geeps_buffer &buf) : Held(ps, key, keyed, buf) {}
    static geeps_status save_keyed(geeps_instance *ps, uint64_t id) { return geeps_post_local_access_buffer(ps, id, true); }
    friend class Instance;
};

/// One worker. Freed (and shut down) when it goes out of scope.
class Instance : public Owned<geeps_instance, geeps_free> {
public:
    explicit Instance(const Config &config) {
        check(geeps_new(config.get(), &p_), "geeps_new");
        check(geeps_row_width(p_, &width_), "geeps_row_width");
    }

    geeps_table parameter_table(const std::string &name, uint32_t rows) {
        geeps_table t;
        check(geeps_parameter_table(p_, name.c_str(), rows, &t), "geeps_parameter_table");
        return t;
    }
    geeps_table local_table(const std::string &name, uint32_t rows) {
        geeps_table t;
        check(geeps_local_table(p_, name.c_str(), rows, &t), "geeps_local_table");
        return t;
    }

    geeps_handle virtual_read(geeps_table t, const std::vector<uint32_t> &rows, uint32_t slack = GEEPS_SLACK_BSP) {
        geeps_handle h;
        check(geeps_virtual_read(p_, t, rows.data(), rows.size(), slack, &h), "geeps_virtual_read");
        return h;
    }
    void virtual_post_read(geeps_handle h) { check(geeps_virtual_post_read(p_, h), "geeps_virtual_post_read"); }
    /// `overwrite`: the application writes every value of the buffer before
    /// update(), so it comes with unspecified contents instead of zeros.
    geeps_handle virtual_pre_update(geeps_table t, const std::vector<uint32_t> &rows, bool overwrite = false) {
        geeps_handle h;
        if (overwrite)
            check(geeps_virtual_pre_update_overwrite(p_, t, rows.data(), rows.size(), &h),
                  "geeps_virtual_pre_update_overwrite");
        else
            check(geeps_virtual_pre_update(p_, t, rows.data(), rows.size(), &h), "geeps_virtual_pre_update");
        return h;
    }
    void virtual_update(geeps_handle h) { check(geeps_virtual_update(p_, h), "geeps_virtual_update"); }
    geeps_handle virtual_local_access(geeps_table t, const std::vector<uint32_t> &rows, bool fetch = true) {
        geeps_handle h;
        check(geeps_virtual_local_access(p_, t, rows.data(), rows.size(), fetch, &h), "geeps_virtual_local_access");
        return h;
    }
    void virtual_post_local_access(geeps_handle h, bool save = true) {
        check(geeps_virtual_post_local_access(p_, h, save), "geeps_virtual_post_local_access");
    }
    void virtual_table_clock(geeps_table t) { check(geeps_virtual_table_clock(p_, t), "geeps_virtual_table_clock"); }
    void virtual_clock() { check(geeps_virtual_clock(p_), "geeps_virtual_clock"); }
    void finish_virtual_iteration() {
        check(geeps_finish_virtual_iteration(p_), "geeps_finish_virtual_iteration");
    }

    ReadBuffer read(geeps_handle h) {
        geeps_buffer b;
        check(geeps_read(p_, h, &b), "geeps_read");
        return ReadBuffer(p_, h, false, b);
    }
    UpdateBuffer pre_update(geeps_handle h) {
        geeps_buffer b;
        check(geeps_pre_update(p_, h, &b), "geeps_pre_update");
        return UpdateBuffer(p_, h, false, b);
    }
    LocalBuffer local_access(geeps_handle h) {
        geeps_buffer b;
        check(geeps_local_access(p_, h, &b), "geeps_local_access");
        return LocalBuffer(p_, h, false, b);
    }

    ReadBuffer read_keys(geeps_table t, const std::vector<uint32_t> &rows, uint32_t slack = GEEPS_SLACK_BSP) {
        geeps_buffer b;
        check(geeps_read_keys(p_, t, rows.data(), rows.size(), slack, &b), "geeps_read_keys");
        return ReadBuffer(p_, b.id, true, b);
    }
    UpdateBuffer pre_update_keys(geeps_table t, const std::vector<uint32_t> &rows) {
        geeps_buffer b;
        check(geeps_pre_update_keys(p_, t, rows.data(), rows.size(), &b), "geeps_pre_update_keys");
        return UpdateBuffer(p_, b.id, true, b);
    }
    LocalBuffer local_access_keys(geeps_table t, const std::vector<uint32_t> &rows, bool fetch = true) {
        geeps_buffer b;
        check(geeps_local_access_keys(p_, t, rows.data(), rows.size(), fetch, &b), "geeps_local_access_keys");
        return LocalBuffer(p_, b.id, true, b);
    }

    void table_clock(geeps_table t) { check(geeps_table_clock(p_, t), "geeps_table_clock"); }
    void clock() { check(geeps_clock(p_), "geeps_clock"); }
    /// This worker's clock of parameter table `t` (table_clock calls so far).
    uint64_t current_table_clock(geeps_table t) const {
        uint64_t c = 0;
        check(geeps_current_table_clock(p_, t, &c), "geeps_current_table_clock");
        return c;
    }
    /// This worker's clock: the lowest of its parameter tables'.
    uint64_t current_clock() const {
        uint64_t c = 0;
        check(geeps_current_clock(p_, &c), "geeps_current_clock");
        return c;
    }
    /// Whether an operator asked the cluster to drain (stop at the next clock boundary).
    bool drain_requested() const {
        bool d = false;
        check(geeps_drain_requested(p_, &d), "geeps_drain_requested");
        return d;
    }
    /// Saves every parameter table as of this clock, with this worker's
    /// state; every worker calls it at the same clock boundary. True on
    /// rank 0 once the checkpoint is complete.
    bool checkpoint(const std::string &dir, const std::vector<uint8_t> &state = {}) {
        bool written = false;
        check(geeps_checkpoint(p_, dir.c_str(), state.data(), state.size(), &written), "geeps_checkpoint");
        return written;
    }
    /// What `restore` loaded: the checkpoint's clock and how many workers saved it.
    struct Restored {
        uint64_t clock;
        size_t workers;
    };
    /// Loads the newest complete checkpoint of `dir` into this fresh instance.
    Restored restore(const std::string &dir) {
        Restored r{0, 0};
        check(geeps_restore(p_, dir.c_str(), &r.clock, &r.workers), "geeps_restore");
        return r;
    }
    /// The state worker `rank` saved in the restored checkpoint.
    std::vector<uint8_t> restored_state(size_t rank) const {
        size_t len = 0;
        check(geeps_restored_state(p_, rank, nullptr, 0, &len), "geeps_restored_state");
        std::vector<uint8_t> out(len);
        check(geeps_restored_state(p_, rank, out.data(), out.size(), &len), "geeps_restored_state");
        return out;
    }
    /// How many checkpoints an operator has asked for so far (admin endpoint).
    uint64_t checkpoint_requests() const {
        uint64_t n = 0;
        check(geeps_checkpoint_requests(p_, &n), "geeps_checkpoint_requests");
        return n;
    }
    void shutdown() { check(geeps_shutdown(p_), "geeps_shutdown"); }
    /// The deadline of blocking calls made from now on, in ms.
    void set_wait_deadline_ms(uint64_t ms) { check(geeps_set_wait_deadline_ms(p_, ms), "geeps_set_wait_deadline_ms"); }
    uint64_t wait_deadline_ms() const {
        uint64_t ms = 0;
        check(geeps_wait_deadline_ms(p_, &ms), "geeps_wait_deadline_ms");
        return ms;
    }
    /// Whether buffers' data() are host memory (false on a CUDA device).
    bool host_addressable() const {
        bool on_host = false;
        check(geeps_host_addressable(p_, &on_host), "geeps_host_addressable");
        return on_host;
    }

    geeps_stats stats() const {
        geeps_stats s;
        s.struct_size = sizeof s;
        check(geeps_stats_get(p_, &s), "geeps_stats_get");
        return s;
    }
    std::string stats_string() const { return text(geeps_stats_string, "geeps_stats_string"); }
    void reset_stats() { check(geeps_stats_reset(p_), "geeps_stats_reset"); }
    geeps_plan plan() const {
        geeps_plan p;
        p.struct_size = sizeof p;
        check(geeps_plan_get(p_, &p), "geeps_plan_get");
        return p;
    }
    std::string plan_string() const { return text(geeps_plan_string, "geeps_plan_string"); }

    size_t rank() const { return number(geeps_rank, "geeps_rank"); }
    size_t num_workers() const { return number(geeps_num_workers, "geeps_num_workers"); }
    size_t row_width() const noexcept { return width_; }

private:
    size_t number(geeps_status (*get)(const geeps_instance *, size_t *), const char *call) const {
        size_t n;
        check(get(p_, &n), call);
        return n;
    }
    std::string text(geeps_status (*get)(const geeps_instance *, char *, size_t, size_t *), const char *call) const {
        size_t len = 0;
        check(get(p_, nullptr, 0, &len), call);
        std::string s(len + 1, '\0');
        check(get(p_, &s[0], s.size(), &len), call);
        s.resize(len);
        return s;
    }

    size_t width_ = 0;
};

}  // namespace geeps

#endif  // GEEPS_HPP
