// A stand-in NCCL for the emulated devices: the calls himeno's `--halo
// nccl` makes (src/backend/gpu/nccl.rs), exported by the emulated driver
// itself and found as libnccl.so.2 through a link scripts/cuda-emu.sh makes,
// so that NCCL work runs on the emulator's streams: queued, run later in
// the seeded order, its receive buffers poisoned until it has run. A
// missing stream dependency around a send or a receive therefore moves
// stale or NaN data, as it would on a GPU.
//
// One transport serves ranks in one process and ranks in several (under
// mpirun): the unique id names a fresh folder (under HIMENO_EMU_STATE_DIR,
// else TMPDIR), and each message is a file in it, written whole and renamed
// into place by the sender, read and removed by the receiver. Sends and
// receives are matched per peer in the order they were issued, as NCCL
// matches them. A group is two ops on its stream: one that posts what it
// sends (it never waits for a peer), then one that starts only when all it
// receives is there (a poll, sched.cpp) and copies it in. No op ever blocks
// the emulator waiting for a peer, so ranks sharing a device, or a host
// that waits in MPI while its peer's receive is queued, cannot deadlock it.
#include "emu.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#define EXPORT extern "C" __attribute__((visibility("default")))

using namespace emu;

extern "C" CUresult cuDevicePrimaryCtxRetain(CUcontext *out, CUdevice d);
extern "C" CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d);

typedef int ncclResult_t;
struct ncclUniqueId {
    char internal[128];
};
struct EmuComm;
typedef EmuComm *ncclComm_t;

namespace {

// ncclResult_t values.
enum : ncclResult_t {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
};

// NCCL 2.23.4, as ncclGetVersion encodes it.
constexpr int VERSION = 22304;
constexpr char ID_PREFIX[] = "himeno-emu-nccl:";
// How long a receive or a rank joining a communicator waits for its peers
// before it fails (a peer that died, or sends that do not match).
constexpr double PATIENCE_NS = 60e9;

// Bytes of ncclDataType_t t, or 0 when unknown.
size_t type_size(int t) {
    switch (t) {
        case 0: case 1: return 1;          // int8, uint8
        case 6: case 9: return 2;          // float16, bfloat16
        case 2: case 3: case 7: return 4;  // int32, uint32, float32
        case 4: case 5: case 8: return 8;  // int64, uint64, float64
        default: return 0;
    }
}

bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

// Writes data whole under `path` (through a temporary name and a rename,
// so a reader never sees part of it).
bool write_file(const std::string &path, const void *data, size_t n) {
    std::string tmp = path + ".part";
    int fd = open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    const char *p = static_cast<const char *>(data);
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, p + done, n - done);
        if (w <= 0) {
            close(fd);
            unlink(tmp.c_str());
            return false;
        }
        done += static_cast<size_t>(w);
    }
    close(fd);
    return rename(tmp.c_str(), path.c_str()) == 0;
}

// Reads the file at `path`, which must hold exactly n bytes, into out and
// removes it; false with `why` otherwise.
bool take_file(const std::string &path, void *out, size_t n, std::string *why) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *why = "cannot open " + path;
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != n) {
        close(fd);
        *why = "the matching send carries " + std::to_string(st.st_size) + " bytes, not the " +
               std::to_string(n) + " received";
        return false;
    }
    char *p = static_cast<char *>(out);
    size_t done = 0;
    while (done < n) {
        ssize_t r = read(fd, p + done, n - done);
        if (r <= 0) break;
        done += static_cast<size_t>(r);
    }
    close(fd);
    unlink(path.c_str());
    if (done != n) *why = "short read of " + path;
    return done == n;
}

// One rank's view of a communicator. Queued work holds it by shared_ptr,
// so that it outlives ncclCommDestroy.
struct State {
    std::string dir;
    int rank = 0, nranks = 0;
    // Messages issued to and from each peer (host order), point to point
    // and collective apart, as NCCL matches each kind on its own.
    std::vector<uint64_t> sent, received;
    uint64_t collectives = 0;
};

std::string message(const State &st, char kind, int from, int to, uint64_t seq) {
    return st.dir + "/" + kind + std::to_string(from) + "-" + std::to_string(to) + "-" + std::to_string(seq);
}

// One send, receive or all-reduce of a group.
struct Item {
    enum Kind { SEND, RECV, ALLREDUCE } kind;
    char *send = nullptr;  // host address of the device buffer read
    char *recv = nullptr;  // host address of the device buffer written
    size_t count = 0, bytes = 0;
    int peer = -1, type = 0, op = 0;
    uint64_t seq = 0;
};

// Reduces `in` into `acc` (count elements of type t) with op.
template <class T>
void reduce_as(char *acc, const char *in, size_t count, int op) {
    for (size_t i = 0; i < count; ++i) {
        T a, b;
        std::memcpy(&a, acc + i * sizeof(T), sizeof(T));
        std::memcpy(&b, in + i * sizeof(T), sizeof(T));
        T r = op == 1 ? a * b : op == 2 ? (a > b ? a : b) : op == 3 ? (a < b ? a : b) : a + b;
        std::memcpy(acc + i * sizeof(T), &r, sizeof(T));
    }
}

bool reduce(char *acc, const char *in, size_t count, int type, int op) {
    switch (type) {
        case 0: reduce_as<int8_t>(acc, in, count, op); return true;
        case 1: reduce_as<uint8_t>(acc, in, count, op); return true;
        case 2: reduce_as<int32_t>(acc, in, count, op); return true;
        case 3: reduce_as<uint32_t>(acc, in, count, op); return true;
        case 4: reduce_as<int64_t>(acc, in, count, op); return true;
        case 5: reduce_as<uint64_t>(acc, in, count, op); return true;
        case 7: reduce_as<float>(acc, in, count, op); return true;
        case 8: reduce_as<double>(acc, in, count, op); return true;
        default: return false;
    }
}

// What a group queues on one stream of one communicator.
struct Batch {
    std::shared_ptr<State> st;
    Stream *stream = nullptr;
    std::vector<Item> items;
};

// The calling thread's open group (ncclGroupStart .. ncclGroupEnd).
thread_local int tls_depth = 0;
thread_local std::vector<Batch> tls_batches;
thread_local std::vector<std::shared_ptr<State>> tls_joins;
thread_local ncclResult_t tls_group_error = ncclSuccess;
thread_local std::string tls_last_error;

ncclResult_t fail(ncclResult_t r, const std::string &why) {
    say("nccl: %s", why.c_str());
    tls_last_error = why;
    return r;
}

// Queues a batch: the posting op, then the op that waits for and takes
// in what the peers send.
ncclResult_t queue(Batch &b, Context *ctx) {
    auto st = b.st;
    auto items = std::make_shared<std::vector<Item>>(std::move(b.items));
    // The contributions to each all-reduce, as this rank had them when it
    // posted (the buffer may be reduced into in place).
    auto own = std::make_shared<std::vector<std::vector<char>>>(items->size());
    auto post = std::make_unique<Op>();
    post->what = "nccl post";
    post->nccl = true;
    auto take = std::make_unique<Op>();
    take->what = "nccl receive";
    take->nccl = true;
    // Receive buffers to poison: not one an all-reduce reads in place.
    std::vector<std::pair<char *, size_t>> fresh;
    for (const Item &it : *items) {
        if (it.send) post->touches.emplace_back(it.send, it.bytes);
        if (it.recv) take->touches.emplace_back(it.recv, it.bytes);
        bool in_place = it.send && it.recv < it.send + it.bytes && it.send < it.recv + it.bytes;
        if (it.recv && !in_place) fresh.emplace_back(it.recv, it.bytes);
    }
    post->run = [st, items, own]() -> CUresult {
        for (size_t i = 0; i < items->size(); ++i) {
            const Item &it = (*items)[i];
            bool ok = true;
            if (it.kind == Item::SEND) {
                ok = write_file(message(*st, 'p', st->rank, it.peer, it.seq), it.send, it.bytes);
            } else if (it.kind == Item::ALLREDUCE) {
                (*own)[i].assign(it.send, it.send + it.bytes);
                for (int r = 0; ok && r < st->nranks; ++r) {
                    if (r != st->rank) ok = write_file(message(*st, 'c', st->rank, r, it.seq), it.send, it.bytes);
                }
            }
            if (!ok) {
                say("nccl: rank %d cannot write a message in %s", st->rank, st->dir.c_str());
                return UNKNOWN;
            }
        }
        return OK;
    };
    // Everything the receiving op reads, present once the poll is true.
    auto wanted = std::make_shared<std::vector<std::string>>();
    for (const Item &it : *items) {
        if (it.kind == Item::RECV) wanted->push_back(message(*st, 'p', it.peer, st->rank, it.seq));
        if (it.kind == Item::ALLREDUCE) {
            for (int r = 0; r < st->nranks; ++r) {
                if (r != st->rank) wanted->push_back(message(*st, 'c', r, st->rank, it.seq));
            }
        }
    }
    auto since = std::make_shared<double>(0);
    auto late = std::make_shared<bool>(false);
    take->poll = [wanted, since, late]() {
        for (const auto &w : *wanted) {
            if (exists(w)) continue;
            double t = now_ns();
            if (*since == 0) *since = t;
            if (t - *since < PATIENCE_NS) return false;
            *late = true;  // ran now, to fail and say what is missing
            return true;
        }
        return true;
    };
    take->run = [st, items, own, wanted, late]() -> CUresult {
        if (*late) {
            for (const auto &w : *wanted) {
                if (!exists(w)) say("nccl: rank %d waited %.0f s for %s: its peer never sent it", st->rank,
                                    PATIENCE_NS / 1e9, w.c_str());
            }
            return UNKNOWN;
        }
        std::string why;
        for (size_t i = 0; i < items->size(); ++i) {
            const Item &it = (*items)[i];
            if (it.kind == Item::RECV) {
                if (!take_file(message(*st, 'p', it.peer, st->rank, it.seq), it.recv, it.bytes, &why)) {
                    say("nccl: rank %d's receive from rank %d: %s", st->rank, it.peer, why.c_str());
                    return UNKNOWN;
                }
            } else if (it.kind == Item::ALLREDUCE) {
                // Every rank reduces the contributions in rank order, so all
                // get the same bits.
                std::vector<char> acc, in(it.bytes);
                for (int r = 0; r < st->nranks; ++r) {
                    const std::vector<char> *from = &(*own)[i];
                    if (r != st->rank) {
                        if (!take_file(message(*st, 'c', r, st->rank, it.seq), in.data(), it.bytes, &why)) {
                            say("nccl: rank %d's all-reduce from rank %d: %s", st->rank, r, why.c_str());
                            return UNKNOWN;
                        }
                        from = &in;
                    }
                    if (r == 0) {
                        acc = *from;
                    } else {
                        reduce(acc.data(), from->data(), it.count, it.type, it.op);
                    }
                }
                std::memcpy(it.recv, acc.data(), it.bytes);
            }
        }
        return OK;
    };
    Device *d = ctx->dev;
    {
        // A receive buffer holds NaN until the data has arrived, unless
        // queued work still uses it (then that work sees what it had).
        std::lock_guard<std::mutex> g(d->mu);
        for (const auto &t : fresh) {
            if (!pending_touch(d, t.first, t.second)) poison(t.first, t.second, POISON_PENDING);
        }
    }
    if (CUresult r = enqueue(ctx, b.stream, std::move(post))) return fail(ncclUnhandledCudaError, "cannot queue: " + std::to_string(r));
    if (CUresult r = enqueue(ctx, b.stream, std::move(take))) return fail(ncclUnhandledCudaError, "cannot queue: " + std::to_string(r));
    return ncclSuccess;
}

// Announces this rank in the communicator's folder.
ncclResult_t join(const State &st) {
    std::string me = st.dir + "/join-" + std::to_string(st.rank);
    std::string n = std::to_string(st.nranks);
    if (exists(me)) return fail(ncclInvalidUsage, "rank " + std::to_string(st.rank) + " joined twice");
    if (!write_file(me, n.data(), n.size())) return fail(ncclSystemError, "cannot write " + me);
    return ncclSuccess;
}

// Waits until every rank has joined, with the same rank count.
ncclResult_t await_ranks(const State &st) {
    double start = now_ns();
    for (int r = 0; r < st.nranks; ++r) {
        std::string f = st.dir + "/join-" + std::to_string(r);
        unsigned pause = 20;
        while (!exists(f)) {
            if (now_ns() - start > PATIENCE_NS) {
                return fail(ncclRemoteError, "rank " + std::to_string(r) + " never joined the communicator in " + st.dir);
            }
            usleep(pause);
            pause = std::min(pause * 2, 2000u);
        }
        char buf[32] = {0};
        int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
        ssize_t got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0) close(fd);
        if (got <= 0 || std::atoi(buf) != st.nranks) {
            return fail(ncclInvalidUsage, "rank " + std::to_string(r) + " joined with " + buf + " ranks, rank " +
                                              std::to_string(st.rank) + " with " + std::to_string(st.nranks));
        }
    }
    return ncclSuccess;
}

// The folder an id names, or "" when it is not one of this stand-in's.
std::string folder(const ncclUniqueId &id) {
    size_t n = strnlen(id.internal, sizeof id.internal);
    if (n == sizeof id.internal || std::strncmp(id.internal, ID_PREFIX, sizeof ID_PREFIX - 1) != 0) return "";
    return std::string(id.internal + sizeof ID_PREFIX - 1, n - (sizeof ID_PREFIX - 1));
}

ncclResult_t new_id(ncclUniqueId *out) {
    std::memset(out->internal, 0, sizeof out->internal);
    std::vector<std::string> bases;
    if (!config().state_dir.empty()) bases.push_back(config().state_dir);
    if (const char *t = std::getenv("TMPDIR")) bases.push_back(t);
    bases.push_back("/tmp");
    for (const auto &b : bases) {
        std::string tmpl = b + "/nccl.XXXXXX";
        if (tmpl.size() + sizeof ID_PREFIX > sizeof out->internal) continue;
        std::vector<char> path(tmpl.begin(), tmpl.end());
        path.push_back(0);
        if (!mkdtemp(path.data())) continue;
        std::snprintf(out->internal, sizeof out->internal, "%s%s", ID_PREFIX, path.data());
        return ncclSuccess;
    }
    return fail(ncclSystemError, "cannot make a rendezvous folder under HIMENO_EMU_STATE_DIR, TMPDIR or /tmp");
}

}  // namespace

struct EmuComm {
    std::shared_ptr<State> st;
    Context *ctx = nullptr;
    int owned_device = -1;  // a primary context ncclCommInitAll retained
};

namespace {

// How a new rank meets the others: it waits for them now, at ncclGroupEnd,
// or not at all (ncclCommInitAll, which joins them all itself).
enum Meet { NOW, AT_GROUP_END, JOINED };

ncclResult_t make_comm(ncclComm_t *out, int nranks, const ncclUniqueId &id, int rank, Context *ctx, int owned,
                       Meet meet) {
    std::string dir = folder(id);
    if (dir.empty()) return fail(ncclInvalidArgument, "the unique id is not one ncclGetUniqueId made");
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        return fail(ncclInvalidArgument, "rank " + std::to_string(rank) + " of " + std::to_string(nranks));
    }
    auto st = std::make_shared<State>();
    st->dir = dir;
    st->rank = rank;
    st->nranks = nranks;
    st->sent.assign(static_cast<size_t>(nranks), 0);
    st->received.assign(static_cast<size_t>(nranks), 0);
    if (ncclResult_t r = join(*st)) return r;
    if (meet == NOW) {
        if (ncclResult_t r = await_ranks(*st)) return r;
    } else if (meet == AT_GROUP_END) {
        tls_joins.push_back(st);
    }
    auto *c = new EmuComm();
    c->st = st;
    c->ctx = ctx;
    c->owned_device = owned;
    *out = c;
    return ncclSuccess;
}

// The comm's stream s (its context's NULL stream for null), or an error.
ncclResult_t stream_of(ncclComm_t comm, CUstream s, Stream **out) {
    if (!comm || !comm->ctx || !comm->ctx->alive) return fail(ncclInvalidArgument, "no communicator");
    if (resolve(comm->ctx, s, out) != OK) {
        return fail(ncclInvalidArgument, "the stream is not one of the communicator's device context");
    }
    return ncclSuccess;
}

// Adds an item to the calling thread's group (one of its own when none is
// open) for comm's stream.
ncclResult_t add(ncclComm_t comm, Stream *s, Item it) {
    if (tls_depth == 0) {
        Batch b{comm->st, s, {it}};
        return queue(b, comm->ctx);
    }
    for (auto &b : tls_batches) {
        if (b.st == comm->st && b.stream == s) {
            b.items.push_back(it);
            return ncclSuccess;
        }
    }
    tls_batches.push_back(Batch{comm->st, s, {it}});
    return ncclSuccess;
}

// The host address of count elements of type t at device address p of
// comm's device, or null after saying why.
char *buffer(ncclComm_t comm, const void *p, size_t count, int type, const char *what, size_t *bytes) {
    size_t size = type_size(type);
    if (!size) {
        fail(ncclInvalidArgument, std::string(what) + ": data type " + std::to_string(type) + " is not supported");
        return nullptr;
    }
    *bytes = count * size;
    char *h = device_range(comm->ctx, reinterpret_cast<CUdeviceptr>(p), *bytes);
    if (!h) {
        fail(ncclInvalidArgument, std::string(what) + ": the buffer is not device memory of the communicator's device");
    }
    return h;
}

}  // namespace

EXPORT ncclResult_t ncclGetVersion(int *version) {
    if (!version) return ncclInvalidArgument;
    *version = VERSION;
    return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
        case ncclSuccess: return "no error";
        case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
        case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
        case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
        case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
        case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
        case ncclRemoteError: return "remote process exited or there was a network error";
        default: return "unknown result code";
    }
}

EXPORT const char *ncclGetLastError(ncclComm_t) { return tls_last_error.c_str(); }

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    if (!id) return ncclInvalidArgument;
    return new_id(id);
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    if (!comm) return ncclInvalidArgument;
    // The device is the calling thread's current one, as with the runtime.
    Context *ctx = current();
    if (!ctx || !ctx->alive) return fail(ncclInvalidUsage, "ncclCommInitRank without a current CUDA context");
    // Inside a group the join completes at ncclGroupEnd, so that one
    // thread may initialise several ranks.
    return make_comm(comm, nranks, id, rank, ctx, -1, tls_depth == 0 ? NOW : AT_GROUP_END);
}

EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
    if (!comms || ndev < 1) return ncclInvalidArgument;
    ncclUniqueId id;
    if (ncclResult_t r = new_id(&id)) return r;
    for (int i = 0; i < ndev; ++i) {
        int d = devlist ? devlist[i] : i;
        Context *ctx = nullptr;
        if (cuDevicePrimaryCtxRetain(&ctx, d) != OK) {
            return fail(ncclInvalidArgument, "ncclCommInitAll: device " + std::to_string(d) + " is not usable");
        }
        if (ncclResult_t r = make_comm(&comms[i], ndev, id, i, ctx, d, JOINED)) return r;
    }
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclInvalidArgument;
    // Its queued work still runs, as with NCCL; then the rank leaves, and
    // the last to leave removes the folder.
    if (comm->ctx && comm->ctx->alive) drain(comm->ctx, nullptr);
    State &st = *comm->st;
    std::string gone = st.dir + "/gone-" + std::to_string(st.rank);
    write_file(gone, "", 0);
    int left = 0;
    for (int r = 0; r < st.nranks; ++r) left += exists(st.dir + "/gone-" + std::to_string(r));
    if (left == st.nranks) {
        if (DIR *dir = opendir(st.dir.c_str())) {
            while (dirent *e = readdir(dir)) {
                if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) unlink((st.dir + "/" + e->d_name).c_str());
            }
            closedir(dir);
        }
        rmdir(st.dir.c_str());
    }
    if (comm->owned_device >= 0) cuDevicePrimaryCtxRelease_v2(comm->owned_device);
    delete comm;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    if (!comm || !count) return ncclInvalidArgument;
    *count = comm->st->nranks;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    if (!comm || !rank) return ncclInvalidArgument;
    *rank = comm->st->rank;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
    if (!comm || !device) return ncclInvalidArgument;
    *device = -1;
    for (int i = 0; i < device_count(); ++i) {
        if (emu::device(i) == comm->ctx->dev) *device = i;
    }
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async) {
    if (!comm || !async) return ncclInvalidArgument;
    *async = comm->ctx->sticky.load() == OK ? ncclSuccess : ncclUnhandledCudaError;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclGroupStart(void) {
    if (tls_depth++ == 0) tls_group_error = ncclSuccess;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclGroupEnd(void) {
    if (tls_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--tls_depth > 0) return ncclSuccess;
    ncclResult_t r = tls_group_error;
    std::vector<std::shared_ptr<State>> joins;
    joins.swap(tls_joins);
    for (const auto &st : joins) {
        if (r == ncclSuccess) r = await_ranks(*st);
    }
    std::vector<Batch> batches;
    batches.swap(tls_batches);
    for (auto &b : batches) {
        if (r != ncclSuccess) break;
        r = queue(b, b.stream->ctx);
    }
    return r;
}

EXPORT ncclResult_t ncclSend(const void *buff, size_t count, int datatype, int peer, ncclComm_t comm, CUstream s) {
    Stream *stream;
    if (ncclResult_t r = stream_of(comm, s, &stream)) return tls_group_error = r;
    if (peer < 0 || peer >= comm->st->nranks) return tls_group_error = fail(ncclInvalidArgument, "ncclSend to no rank");
    Item it;
    it.kind = Item::SEND;
    it.send = buffer(comm, buff, count, datatype, "ncclSend", &it.bytes);
    if (!it.send) return tls_group_error = ncclInvalidArgument;
    it.count = count;
    it.peer = peer;
    it.seq = comm->st->sent[static_cast<size_t>(peer)]++;
    return add(comm, stream, it);
}

EXPORT ncclResult_t ncclRecv(void *buff, size_t count, int datatype, int peer, ncclComm_t comm, CUstream s) {
    Stream *stream;
    if (ncclResult_t r = stream_of(comm, s, &stream)) return tls_group_error = r;
    if (peer < 0 || peer >= comm->st->nranks) return tls_group_error = fail(ncclInvalidArgument, "ncclRecv from no rank");
    Item it;
    it.kind = Item::RECV;
    it.recv = buffer(comm, buff, count, datatype, "ncclRecv", &it.bytes);
    if (!it.recv) return tls_group_error = ncclInvalidArgument;
    it.count = count;
    it.peer = peer;
    it.seq = comm->st->received[static_cast<size_t>(peer)]++;
    return add(comm, stream, it);
}

EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op,
                                  ncclComm_t comm, CUstream s) {
    Stream *stream;
    if (ncclResult_t r = stream_of(comm, s, &stream)) return tls_group_error = r;
    if (op < 0 || op > 3) return tls_group_error = fail(ncclInvalidArgument, "ncclAllReduce: op " + std::to_string(op));
    Item it;
    it.kind = Item::ALLREDUCE;
    it.send = buffer(comm, sendbuff, count, datatype, "ncclAllReduce", &it.bytes);
    it.recv = buffer(comm, recvbuff, count, datatype, "ncclAllReduce", &it.bytes);
    if (!it.send || !it.recv || datatype == 6 || datatype == 9) {
        return tls_group_error = fail(ncclInvalidArgument, "ncclAllReduce: buffers or data type refused");
    }
    it.count = count;
    it.type = datatype;
    it.op = op;
    it.seq = comm->st->collectives++;
    return add(comm, stream, it);
}
