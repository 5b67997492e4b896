// A C++ trainer that keeps its model in geeps through the C API only
// (include/geeps.h): multinomial logistic regression on Fashion-MNIST with
// momentum SGD, data-parallel over the workers of a geeps cluster, one geeps
// instance per worker. Either all workers are threads of this process (an
// in-process cluster, --workers N), or this process is one worker of a
// network cluster (--net: rank, world size and peers from the environment,
// e.g. `geeps-launch -n 2 -- trainer --net`, srun, mpirun, torchrun).
//
// Tables (rows of 128 floats):
//   weights   parameter  10 x 785 weights (784 pixels + bias per class)
//   progress  parameter  one row: loss sum, examples, correct predictions
//   momentum  local      this worker's momentum, same shape as the weights
//
// One iteration, recorded once as the virtual iteration and then replayed:
// read weights; local_access momentum; pre_update weights and progress;
// compute the gradient of a minibatch; momentum = mu * momentum + gradient;
// update weights with -lr / workers * momentum; update progress; post; clock.
// The workers' updates of one clock add up to one momentum-SGD step on the
// gradient averaged over workers x batch examples.
//
// Rank 0 reads the cluster-wide progress row with a keyed (unrecorded) read
// after each epoch and prints the epoch's training loss, then evaluates the
// test set; the process of rank 0 fails if the loss did not go down.
//
// With --gpu N every instance keeps its tables and buffers on CUDA GPU N
// (geeps_config_set_cuda_device). The trainer still computes on the CPU, so
// it stages each buffer through host memory with geeps_buffer_copy_to_host /
// geeps_buffer_copy_from_host (see Staged); a program that links the CUDA
// runtime would pass the buffers' device pointers to its kernels or to
// cudaMemcpy instead. The arithmetic is the same, so the losses equal those
// of the host device bit for bit. Without a usable driver it stops with one
// message, and never falls back to the host.
//
//   trainer --data examples/data [--workers 2 | --net] [--epochs 5]
//           [--batch 100] [--lr 0.1] [--momentum 0.9] [--slack 0]
//           [--train-images N] [--gpu N]

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "geeps.h"

namespace {

constexpr int kClasses = 10;
constexpr int kPixels = 28 * 28;
constexpr int kStride = kPixels + 1;  // weights of one class, then its bias
constexpr int kParams = kClasses * kStride;
constexpr int kRowWidth = 128;
constexpr int kWeightRows = (kParams + kRowWidth - 1) / kRowWidth;

// Throws with geeps's own message when a call fails.
void check(geeps_status status, const char *call) {
    if (status != GEEPS_STATUS_OK) {
        throw std::runtime_error(std::string(call) + ": " + geeps_status_name(status) + ": " +
                                 geeps_last_error_message());
    }
}
#define GEEPS(call) check((call), #call)

struct Options {
    std::string data = "examples/data";
    bool net = false;  // one worker of a network cluster, from the environment
    int workers = 2;   // with --net: the cluster's world size
    int epochs = 5;
    int batch = 100;
    float lr = 0.1f;
    float momentum = 0.9f;
    uint32_t slack = GEEPS_SLACK_BSP;
    size_t train_images = 0;  // 0: all
    long gpu = -1;            // the CUDA device's ordinal; -1: the host device
};

struct Dataset {
    std::vector<float> images;  // scaled to [0, 1], kPixels per image
    std::vector<uint8_t> labels;
    size_t size() const { return labels.size(); }
    const float *image(size_t i) const { return &images[i * kPixels]; }
};

// Reads a gzipped IDX file of unsigned bytes through `gzip -dc`.
std::vector<uint8_t> read_idx(const std::string &path, int rank, std::vector<uint32_t> &dims) {
    if (path.find('\'') != std::string::npos) throw std::runtime_error("data path may not contain a quote: " + path);
    std::string cmd = "gzip -dc -- '" + path + "'";
    FILE *pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) throw std::runtime_error("cannot run " + cmd + ": " + std::strerror(errno));
    std::vector<uint8_t> bytes;
    uint8_t chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, pipe)) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
    if (pclose(pipe) != 0) throw std::runtime_error(path + ": gzip failed (missing or not gzip?)");
    size_t header = 4 + 4 * static_cast<size_t>(rank);
    if (bytes.size() < header || bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] != rank)
        throw std::runtime_error(path + ": not an IDX file of unsigned bytes with " + std::to_string(rank) +
                                 " dimension(s)");
    size_t len = 1;
    dims.clear();
    for (int d = 0; d < rank; d++) {
        const uint8_t *b = &bytes[4 + 4 * d];
        dims.push_back(uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3]);
        len *= dims.back();
    }
    if (bytes.size() - header != len) throw std::runtime_error(path + ": size does not match its dimensions");
    return std::vector<uint8_t>(bytes.begin() + header, bytes.end());
}

Dataset load(const std::string &dir, const std::string &prefix, size_t limit) {
    std::vector<uint32_t> idims, ldims;
    auto pixels = read_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz", 3, idims);
    auto labels = read_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", 1, ldims);
    if (idims[1] * idims[2] != kPixels || idims[0] != ldims[0])
        throw std::runtime_error(prefix + ": expected as many 28x28 images as labels");
    size_t n = limit ? std::min<size_t>(limit, ldims[0]) : ldims[0];
    Dataset d;
    d.images.resize(n * kPixels);
    for (size_t i = 0; i < n * kPixels; i++) d.images[i] = pixels[i] / 255.0f;
    d.labels.assign(labels.begin(), labels.begin() + n);
    for (uint8_t l : d.labels)
        if (l >= kClasses) throw std::runtime_error(prefix + ": label out of range");
    return d;
}

// Softmax cross-entropy of one example. Adds its gradient to `grad` when
// given; returns the loss and sets `correct`.
float example(const float *w, const float *x, int label, float *grad, bool &correct) {
    float logits[kClasses];
    for (int c = 0; c < kClasses; c++) {
        const float *wc = w + c * kStride;
        float z = wc[kPixels];
        for (int p = 0; p < kPixels; p++) z += wc[p] * x[p];
        logits[c] = z;
    }
    int best = int(std::max_element(logits, logits + kClasses) - logits);
    correct = best == label;
    float max = logits[best], sum = 0;
    float label_logit = logits[label] - max;
    for (float &z : logits) sum += (z = std::exp(z - max));
    if (grad != nullptr) {
        for (int c = 0; c < kClasses; c++) {
            float g = logits[c] / sum - (c == label ? 1.0f : 0.0f);
            float *gc = grad + c * kStride;
            for (int p = 0; p < kPixels; p++) gc[p] += g * x[p];
            gc[kPixels] += g;
        }
    }
    return std::log(sum) - label_logit;
}

// The CPU's view of the first `floats` floats of a geeps buffer. On the host
// device that is the buffer itself. On a CUDA device a buffer's `data` is a
// device pointer the CPU must not dereference: the view is then a host copy,
// filled by geeps_buffer_copy_to_host and written back by
// geeps_buffer_copy_from_host (cudaMemcpy in a program with the CUDA runtime).
class Staged {
public:
    Staged(geeps_instance *ps, size_t floats) : ps_(ps), floats_(floats) {
        GEEPS(geeps_host_addressable(ps, &on_host_));
        if (!on_host_) host_.resize(floats);
    }
    // The buffer's contents, to read (and to change, then store()).
    float *load(const geeps_buffer &b) {
        fits(b);
        if (on_host_) return b.data;
        GEEPS(geeps_buffer_copy_to_host(ps_, &b, host_.data(), floats_));
        return host_.data();
    }
    // Zeroed memory for the contents of a pre-update buffer (which geeps
    // hands out zeroed), to fill and then store().
    float *zeroed(const geeps_buffer &b) {
        fits(b);
        if (on_host_) return b.data;
        std::fill(host_.begin(), host_.end(), 0.0f);
        return host_.data();
    }
    // Puts what load() or zeroed() returned into the buffer.
    void store(const geeps_buffer &b) {
        if (!on_host_) GEEPS(geeps_buffer_copy_from_host(ps_, &b, host_.data(), floats_));
    }

private:
    void fits(const geeps_buffer &b) const {
        if (b.floats < floats_)
            throw std::runtime_error("a buffer of " + std::to_string(b.floats) + " floats, " +
                                     std::to_string(floats_) + " expected");
    }
    geeps_instance *ps_;
    size_t floats_;
    bool on_host_ = true;
    std::vector<float> host_;
};

struct Shared {
    Options opt;
    Dataset train, test;
    geeps_cluster *cluster = nullptr;
    size_t steps_per_epoch = 0;
    std::mutex print;
    std::vector<std::string> errors;
    std::vector<std::string> stats;  // per rank, printed at the end
    float first_loss = NAN, last_loss = NAN, test_accuracy = NAN;
};

// The cluster-wide progress row, read on the slow path (not recorded).
void read_progress(geeps_instance *ps, geeps_table progress, uint32_t slack, double out[3]) {
    uint32_t row = 0;
    geeps_buffer b;
    Staged view(ps, 3);
    GEEPS(geeps_read_keys(ps, progress, &row, 1, slack, &b));
    const float *p = view.load(b);
    for (int i = 0; i < 3; i++) out[i] = p[i];
    GEEPS(geeps_post_read_buffer(ps, b.id));
}

void worker(Shared &s, int rank) {
    const Options &o = s.opt;
    geeps_config *cfg = nullptr;
    geeps_instance *ps = nullptr;
    try {
        GEEPS(geeps_config_new(&cfg));
        GEEPS(geeps_config_set_row_width(cfg, kRowWidth));
        GEEPS(geeps_config_set_device_memory(cfg, 64u << 20));
        GEEPS(geeps_config_set_cluster(cfg, s.cluster, size_t(rank)));
        if (o.gpu >= 0) GEEPS(geeps_config_set_cuda_device(cfg, size_t(o.gpu)));
        GEEPS(geeps_new(cfg, &ps));
        GEEPS(geeps_config_free(cfg));
        cfg = nullptr;

        geeps_table weights, progress, momentum;
        GEEPS(geeps_parameter_table(ps, "weights", kWeightRows, &weights));
        GEEPS(geeps_parameter_table(ps, "progress", 1, &progress));
        GEEPS(geeps_local_table(ps, "momentum", kWeightRows, &momentum));

        std::vector<uint32_t> rows(kWeightRows);
        std::iota(rows.begin(), rows.end(), 0u);
        uint32_t progress_row = 0;
        geeps_handle read_w, mom, upd_w, upd_p;
        GEEPS(geeps_virtual_read(ps, weights, rows.data(), rows.size(), o.slack, &read_w));
        GEEPS(geeps_virtual_local_access(ps, momentum, rows.data(), rows.size(), true, &mom));
        GEEPS(geeps_virtual_pre_update(ps, weights, rows.data(), rows.size(), &upd_w));
        GEEPS(geeps_virtual_pre_update(ps, progress, &progress_row, 1, &upd_p));
        GEEPS(geeps_virtual_update(ps, upd_w));
        GEEPS(geeps_virtual_update(ps, upd_p));
        GEEPS(geeps_virtual_post_local_access(ps, mom, true));
        GEEPS(geeps_virtual_post_read(ps, read_w));
        GEEPS(geeps_virtual_clock(ps));
        GEEPS(geeps_finish_virtual_iteration(ps));
        if (rank == 0) {
            char plan[1024];
            size_t len;
            GEEPS(geeps_plan_string(ps, plan, sizeof plan, &len));
            std::lock_guard<std::mutex> lock(s.print);
            std::printf("rank 0 placement: %s", plan);
        }

        // Rank-strided slice of the training set, shuffled every epoch.
        std::vector<size_t> mine;
        for (size_t i = size_t(rank); i < s.train.size(); i += size_t(o.workers)) mine.push_back(i);
        std::mt19937 rng(2016u + unsigned(rank));
        std::vector<float> grad(kParams);
        Staged weights_view(ps, kParams), momentum_view(ps, kParams), delta_view(ps, kParams), progress_view(ps, 3);
        double before[3] = {0, 0, 0};
        const float scale = -o.lr / float(o.workers);

        for (int epoch = 0; epoch < o.epochs; epoch++) {
            std::shuffle(mine.begin(), mine.end(), rng);
            for (size_t step = 0; step < s.steps_per_epoch; step++) {
                geeps_buffer wb, mb, dwb, dpb;
                GEEPS(geeps_read(ps, read_w, &wb));
                GEEPS(geeps_local_access(ps, mom, &mb));
                GEEPS(geeps_pre_update(ps, upd_w, &dwb));
                GEEPS(geeps_pre_update(ps, upd_p, &dpb));
                if (wb.rows != kWeightRows || mb.rows != kWeightRows || dpb.rows != 1) {
                    throw std::runtime_error("geeps handed out buffers of unexpected row counts");
                }
                if (step == 0) {
                    // The staleness bound, as geeps reports it: the weights
                    // hold every worker's updates of the clocks below their
                    // data age, at most `slack` clocks behind this worker.
                    uint64_t age = 0, clock = 0;
                    GEEPS(geeps_buffer_data_age(ps, wb.id, &age));
                    GEEPS(geeps_current_clock(ps, &clock));
                    if (age + o.slack < clock) {
                        throw std::runtime_error("weights of data age " + std::to_string(age) + " at clock " +
                                                 std::to_string(clock) + " exceed the slack");
                    }
                }
                const float *w = weights_view.load(wb);
                float *m = momentum_view.load(mb), *dw = delta_view.zeroed(dwb), *dp = progress_view.zeroed(dpb);
                std::fill(grad.begin(), grad.end(), 0.0f);
                float loss = 0;
                int correct = 0;
                for (int b = 0; b < o.batch; b++) {
                    size_t i = mine[step * size_t(o.batch) + size_t(b)];
                    bool ok;
                    loss += example(w, s.train.image(i), s.train.labels[i], grad.data(), ok);
                    correct += ok;
                }
                for (int j = 0; j < kParams; j++) {
                    m[j] = o.momentum * m[j] + grad[j] / float(o.batch);
                    dw[j] = scale * m[j];
                }
                dp[0] = loss;
                dp[1] = float(o.batch);
                dp[2] = float(correct);
                momentum_view.store(mb);
                delta_view.store(dwb);
                progress_view.store(dpb);
                GEEPS(geeps_update(ps, upd_w));
                GEEPS(geeps_update(ps, upd_p));
                GEEPS(geeps_post_local_access(ps, mom));
                GEEPS(geeps_post_read(ps, read_w));
                GEEPS(geeps_clock(ps));
            }
            if (rank != 0) continue;
            // BSP read at this clock: every worker's updates of the epoch.
            double now[3];
            read_progress(ps, progress, GEEPS_SLACK_BSP, now);
            double examples = now[1] - before[1];
            float epoch_loss = float((now[0] - before[0]) / examples);
            float epoch_acc = float((now[2] - before[2]) / examples);
            std::copy(now, now + 3, before);
            if (epoch == 0) s.first_loss = epoch_loss;
            s.last_loss = epoch_loss;
            std::lock_guard<std::mutex> lock(s.print);
            // %.9g: every float prints as a different number, so runs can be
            // compared bit for bit (host device against --gpu).
            std::printf("epoch %d  train loss %.9g  train acc %.2f%%  (%.0f examples, %d workers)\n", epoch + 1,
                        epoch_loss, epoch_acc * 100.0f, examples, o.workers);
            std::fflush(stdout);
        }

        if (rank == 0) {
            geeps_buffer b;
            GEEPS(geeps_read_keys(ps, weights, rows.data(), rows.size(), GEEPS_SLACK_BSP, &b));
            const float *w = weights_view.load(b);
            size_t right = 0;
            for (size_t i = 0; i < s.test.size(); i++) {
                bool ok;
                example(w, s.test.image(i), s.test.labels[i], nullptr, ok);
                right += ok;
            }
            GEEPS(geeps_post_read_buffer(ps, b.id));
            s.test_accuracy = float(right) / float(s.test.size());
        }

        geeps_stats stats;
        stats.struct_size = sizeof stats;
        GEEPS(geeps_stats_get(ps, &stats));
        char line[1024];
        size_t len;
        GEEPS(geeps_stats_string(ps, line, sizeof line, &len));
        GEEPS(geeps_shutdown(ps));
        char summary[1200];
        std::snprintf(summary, sizeof summary, "geeps worker %d: stall %.1f%%  %s", rank, stats.stall_fraction * 100.0,
                      line);
        s.stats[size_t(rank)] = summary;
        GEEPS(geeps_free(ps));
    } catch (const std::exception &e) {
        // Leave the cluster so the other workers fail fast instead of waiting.
        if (ps != nullptr) geeps_free(ps);
        if (cfg != nullptr) geeps_config_free(cfg);
        std::lock_guard<std::mutex> lock(s.print);
        s.errors.push_back("worker " + std::to_string(rank) + ": " + e.what());
    }
}

bool parse(int argc, char **argv, Options &o) {
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--net") {
            o.net = true;
            continue;
        }
        if (i + 1 >= argc) return false;
        const char *v = argv[++i];
        if (a == "--data") o.data = v;
        else if (a == "--workers") o.workers = std::atoi(v);
        else if (a == "--epochs") o.epochs = std::atoi(v);
        else if (a == "--batch") o.batch = std::atoi(v);
        else if (a == "--lr") o.lr = std::strtof(v, nullptr);
        else if (a == "--momentum") o.momentum = std::strtof(v, nullptr);
        else if (a == "--slack") o.slack = uint32_t(std::strtoul(v, nullptr, 10));
        else if (a == "--train-images") o.train_images = std::strtoul(v, nullptr, 10);
        else if (a == "--gpu") {
            char *end = nullptr;
            o.gpu = std::strtol(v, &end, 10);
            if (end == v || *end != '\0' || o.gpu < 0) return false;
        }
        else return false;
    }
    return o.workers > 0 && o.epochs > 0 && o.batch > 0 && o.lr > 0;
}

}  // namespace

// Starts the cluster: this process's rank of a network cluster (--net), or
// an in-process one with a thread per worker. Returns this process's ranks.
std::vector<int> start_cluster(Shared &s) {
    if (!s.opt.net) {
        GEEPS(geeps_cluster_new(size_t(s.opt.workers), &s.cluster));
        std::vector<int> ranks(size_t(s.opt.workers));
        std::iota(ranks.begin(), ranks.end(), 0);
        return ranks;
    }
    GEEPS(geeps_cluster_from_env(&s.cluster));
    size_t rank = 0, world = 0;
    GEEPS(geeps_cluster_rank(s.cluster, &rank));
    GEEPS(geeps_cluster_world(s.cluster, &world));
    s.opt.workers = int(world);
    return {int(rank)};
}

int main(int argc, char **argv) {
    Shared s;
    if (!parse(argc, argv, s.opt)) {
        std::fprintf(stderr,
                     "usage: %s --data DIR [--workers 2 | --net] [--epochs 5] [--batch 100] [--lr 0.1] "
                     "[--momentum 0.9] [--slack 0] [--train-images N] [--gpu N]\n",
                     argv[0]);
        return 2;
    }
    const Options &o = s.opt;
    std::vector<int> ranks;
    std::string device = "host device";
    try {
        GEEPS(geeps_log_init(nullptr));
        if (o.gpu >= 0) {
            // One clear message when the GPU is not usable, before any worker
            // starts; geeps_new would refuse it as well (never the host).
            char what[512];
            size_t len = 0;
            geeps_status st = geeps_cuda_probe(size_t(o.gpu), what, sizeof what, &len);
            if (st != GEEPS_STATUS_OK) {
                std::fprintf(stderr, "cpp_trainer: --gpu %ld: %s: %s\n", o.gpu, geeps_status_name(st),
                             geeps_last_error_message());
                return 1;
            }
            device = what;
        }
        ranks = start_cluster(s);
        s.train = load(o.data, "train", o.train_images);
        s.test = load(o.data, "t10k", 0);
        // BSP waits for every worker at every clock, so all run the same
        // number of steps: as many as the smallest slice holds.
        s.steps_per_epoch = s.train.size() / size_t(o.workers) / size_t(o.batch);
        if (s.steps_per_epoch == 0) throw std::runtime_error("too few training images for one minibatch per worker");
    } catch (const std::exception &e) {
        // Exit without freeing the cluster: a network cluster's release would
        // wait for the other processes' workers to leave.
        std::fprintf(stderr, "cpp_trainer: %s\n", e.what());
        return 1;
    }
    const bool has_rank0 = ranks.front() == 0;
    if (has_rank0) {
        std::printf("cpp_trainer (libgeeps %s): %zu train / %zu test images, %d workers%s x batch %d, %zu steps per "
                    "epoch, lr %g, momentum %g, slack %u, on %s\n",
                    geeps_version(), s.train.size(), s.test.size(), o.workers, o.net ? " (processes)" : "", o.batch,
                    s.steps_per_epoch, o.lr, o.momentum, o.slack, device.c_str());
        std::fflush(stdout);
    }

    s.stats.resize(size_t(o.workers));
    if (o.net) {
        worker(s, ranks.front());
    } else {
        std::vector<std::thread> threads;
        for (int rank : ranks) threads.emplace_back(worker, std::ref(s), rank);
        for (auto &t : threads) t.join();
    }
    // A failed worker has left its cluster; exit at once (the other
    // processes fail too, or geeps-launch stops them).
    for (const auto &e : s.errors) std::fprintf(stderr, "cpp_trainer: %s\n", e.c_str());
    if (!s.errors.empty()) return 1;
    // Every instance is shut down; a network cluster now waits until the
    // other processes' workers have left this rank's keeper, then stops it.
    try {
        GEEPS(geeps_cluster_shutdown(s.cluster));
        GEEPS(geeps_cluster_free(s.cluster));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "cpp_trainer: %s\n", e.what());
        return 1;
    }
    for (int rank : ranks) std::printf("%s\n", s.stats[size_t(rank)].c_str());
    if (!has_rank0) return 0;
    std::printf("final: train loss %.9g (epoch 1: %.9g), test accuracy %.2f%%\n", s.last_loss, s.first_loss,
                s.test_accuracy * 100.0f);
    if (!(s.last_loss < s.first_loss) || !(s.test_accuracy > 0.5f)) {
        std::fprintf(stderr, "cpp_trainer: the model did not learn\n");
        return 1;
    }
    return 0;
}
