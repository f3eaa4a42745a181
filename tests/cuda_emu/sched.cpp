// Streams and the work queued on them. Work runs later than it is queued:
// when the host synchronises (a stream, an event, the context, or a copy
// that CUDA documents as synchronous), on the synchronising thread, or on
// worker threads (HIMENO_EMU_WORKERS). Which ready stream goes next is a
// seeded choice (HIMENO_EMU_SEED): usually one the waiting host needs, and
// with the HIMENO_EMU_EAGER percentage any other, as a device runs streams
// side by side. Stream order and event waits are always kept. After a
// fault the context's error is sticky and queued work is dropped.
//
// Work that waits for something outside the device (an NCCL receive whose
// peer has not sent yet, nccl.cpp) has a poll: it starts once the poll says
// so, and those waiting for it look again every few microseconds. While
// NCCL work is queued, a background thread also runs ready work every
// millisecond, as a real device moves on while its host sits in MPI: a
// peer's receive never waits for this host to synchronise.
//
// A stream may wait for an event of another device (a peer copy waiting
// for the neighbour's pack): a thread that finds nothing ready on its own
// device while such a wait is pending runs the other device's ready work,
// one op at a time (and, where that device waits on a third, that one's),
// and naps where none is ready; a record wakes every device. It never
// nests: driving the other device until the record had run, with that
// device waiting on this one in turn (behind an op another thread was
// running), recursed without bound and overflowed a rank's stack. Work
// is stuck only when the device of a record waited for has nothing ready,
// running or polled and its waits are on its own records: a record of
// another device may run, under that device's lock, while this one looks.
//
// It also counts, per host thread, what the host waited for and copied
// (himeno_emu_host_counts): the GPU backend reports both per iteration.
#include "emu.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace emu {
namespace {

thread_local Context *tls_current = nullptr;
thread_local uint64_t tls_waits = 0;
thread_local uint64_t tls_bytes = 0;

// How long a thread with nothing to run sleeps before looking again: a
// record on another device wakes it sooner (wake_all_devices), and the
// timeout covers a wake-up that came between its look and its sleep.
constexpr auto NAP = std::chrono::milliseconds(2);
// The same while a poll (an NCCL receive) may turn true: nothing wakes it.
constexpr auto POLL_NAP = std::chrono::microseconds(100);

// Whether the head of s may run now.
bool ready(Stream *s) {
    if (s->busy || s->queue.empty()) return false;
    const Op &op = *s->queue.front();
    return (!op.wait || op.wait->done) && (!op.poll || op.poll());
}

// Whether the head of some stream of d waits on a poll (lock held).
bool polling(Device *d) {
    for (Stream *s : d->streams) {
        if (!s->busy && !s->queue.empty() && s->queue.front()->poll) return true;
    }
    return false;
}

// Whether work of d that is not ready now may become ready without
// another device: an op is running, workers may run some, or a poll may
// turn true (lock held).
bool may_move(Device *d) { return d->running > 0 || d->workers_started || polling(d); }


// The next stream to run, among those `useful` says the caller waits for,
// or (eagerly, or when none of those is ready) any ready one; nullptr
// when nothing is ready.
template <class Useful>
Stream *pick(Device *d, Useful useful) {
    std::vector<Stream *> all, wanted;
    for (Stream *s : d->streams) {
        if (!ready(s)) continue;
        all.push_back(s);
        if (useful(s)) wanted.push_back(s);
    }
    if (all.empty()) return nullptr;
    d->rng = mix(d->rng);
    bool eager = static_cast<int>(d->rng % 100) < config().eager_percent;
    const auto &from = wanted.empty() || eager ? all : wanted;
    return from[(d->rng >> 8) % from.size()];
}

// Runs the head of s (lock held on entry and on return).
void step(Device *d, std::unique_lock<std::mutex> &lk, Stream *s) {
    s->busy = true;
    ++d->running;
    Op *op = s->queue.front().get();
    Context *ctx = s->ctx;
    lk.unlock();
    CUresult r = OK;
    if (ctx->sticky.load() == OK && op->run) r = op->run();
    double t = now_ns();
    lk.lock();
    if (r != OK) {
        CUresult none = OK;
        ctx->sticky.compare_exchange_strong(none, r);
    }
    bool recorded = false;
    if (op->record) {
        op->record->ns = t;
        op->record->done = true;
        recorded = true;
    }
    if (op->nccl) --d->nccl_queued;
    s->queue.pop_front();
    s->busy = false;
    --d->running;
    if (s->destroyed && s->queue.empty()) {
        d->streams.erase(std::remove(d->streams.begin(), d->streams.end(), s), d->streams.end());
    }
    d->changed.notify_all();
    if (recorded && device_count() > 1) {
        lk.unlock();
        wake_all_devices();
        lk.lock();
    }
}

// A record of another device that the head of a stream of d waits for,
// one that has not run when there is one, or nullptr (lock of d held).
// One that has run is returned too: another device's thread marks a record
// done under that device's lock, not d's, so it may have run since `pick`
// found its waiter not ready, and then d can move on. Leaving it out made
// a device whose only blocked head had just been released look stuck.
std::shared_ptr<Mark> foreign_wait(Device *d) {
    std::shared_ptr<Mark> ran;
    for (Stream *s : d->streams) {
        if (s->busy || s->queue.empty()) continue;
        const Op &op = *s->queue.front();
        if (!op.wait || !op.wait->dev || op.wait->dev == d) continue;
        if (!op.wait->done) return op.wait;
        ran = op.wait;
    }
    return ran;
}

// What helping the devices a blocked device waits for did.
enum class Help { Ran, Waiting, Stuck };

// Runs one ready op of the device that records m, or of the device that
// one waits for in turn, each device once along the chain (no lock held
// on entry; `from` is where the chain starts). Ran: something ran, or m
// or another device's record that a device of the chain waits for has
// run meanwhile. Waiting: the work the chain waits for runs on
// another thread, or waits for a poll. Stuck: a device of the chain has
// nothing ready, running or polled and waits for no other device, so its
// record can never run.
Help help(Device *from, std::shared_ptr<Mark> m) {
    std::vector<Device *> seen{from};
    while (m && std::find(seen.begin(), seen.end(), m->dev) == seen.end()) {
        Device *o = m->dev;
        seen.push_back(o);
        std::unique_lock<std::mutex> lk(o->mu);
        // Looked at under o's lock, under which o's records run: before
        // it, the record could run between this look and `pick`'s.
        if (m->done) return Help::Ran;
        if (Stream *s = pick(o, [](Stream *) { return true; })) {
            step(o, lk, s);
            return Help::Ran;
        }
        m = foreign_wait(o);
        if (!m && !may_move(o)) return Help::Stuck;
    }
    return m && m->done ? Help::Ran : Help::Waiting;
}

// Runs work of d until done() (lock held), helping the other threads.
template <class Done, class Useful>
CUresult drive(Device *d, std::unique_lock<std::mutex> &lk, Done done, Useful useful) {
    while (!done()) {
        if (Stream *s = pick(d, useful)) {
            step(d, lk, s);
            continue;
        }
        Help h = may_move(d) ? Help::Waiting : Help::Stuck;
        bool foreign = false;
        if (std::shared_ptr<Mark> m = foreign_wait(d)) {
            // Its own device cannot go on before the other one records
            // (help says Ran at once where it has, since `pick` looked).
            foreign = true;
            lk.unlock();
            h = help(d, m);
            lk.lock();
        }
        if (h == Help::Stuck) {
            say("queued work waits for an event record that can never run");
            return UNKNOWN;
        }
        if (h == Help::Waiting && !done()) d->changed.wait_for(lk, foreign || polling(d) ? POLL_NAP : NAP);
    }
    return OK;
}

void worker(Device *d, unsigned id) {
    uint64_t r = mix(config().seed ^ (static_cast<uint64_t>(d->index) << 32) ^ id);
    std::unique_lock<std::mutex> lk(d->mu);
    for (;;) {
        Stream *s = pick(d, [](Stream *) { return true; });
        if (!s) {
            d->changed.wait_for(lk, polling(d) ? POLL_NAP : NAP);
            continue;
        }
        step(d, lk, s);
        // A short, seeded pause: other work and the host move on meanwhile.
        r = mix(r);
        lk.unlock();
        usleep(static_cast<useconds_t>(r % 200));
        lk.lock();
    }
}

// The background thread of a device with NCCL work: while any is queued,
// it runs one ready op a millisecond, whichever the seeded choice picks.
void progress(Device *d) {
    std::unique_lock<std::mutex> lk(d->mu);
    for (;;) {
        if (d->nccl_queued == 0) {
            d->changed.wait(lk);
            continue;
        }
        if (Stream *s = pick(d, [](Stream *) { return true; })) step(d, lk, s);
        lk.unlock();
        usleep(1000);
        lk.lock();
    }
}

}  // namespace

double now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

Context *&current() { return tls_current; }

void count_wait() { ++tls_waits; }

bool idle(Context *ctx, Stream *s) {
    std::lock_guard<std::mutex> g(ctx->dev->mu);
    auto quiet = [](Stream *x) { return x->queue.empty() && !x->busy; };
    if (s) return quiet(s);
    return std::all_of(ctx->streams.begin(), ctx->streams.end(), quiet) && quiet(ctx->null_stream);
}
void count_bytes(size_t n) { tls_bytes += n; }
uint64_t thread_waits() { return tls_waits; }
uint64_t thread_bytes() { return tls_bytes; }

CUresult usable(Context **out) {
    Context *c = tls_current;
    if (!c || !c->alive) return INVALID_CONTEXT;
    CUresult s = c->sticky.load();
    if (s != OK) return s;
    *out = c;
    return OK;
}

CUresult resolve(Context *ctx, CUstream s, Stream **out) {
    if (!s) {
        *out = ctx->null_stream;
        return OK;
    }
    if (s->ctx != ctx || s->destroyed) return INVALID_HANDLE;
    *out = s;
    return OK;
}

CUresult enqueue(Context *ctx, Stream *s, std::unique_ptr<Op> op) {
    Device *d = ctx->dev;
    if (op->record) op->record->dev = d;
    std::lock_guard<std::mutex> g(d->mu);
    if (!d->workers_started && config().workers > 0) {
        d->workers_started = true;
        for (int i = 0; i < config().workers; ++i) std::thread(worker, d, static_cast<unsigned>(i)).detach();
    }
    if (op->nccl) {
        ++d->nccl_queued;
        if (!d->progress_started) {
            d->progress_started = true;
            std::thread(progress, d).detach();
        }
    }
    s->queue.push_back(std::move(op));
    d->changed.notify_all();
    return OK;
}

CUresult drain(Context *ctx, Stream *s) {
    Device *d = ctx->dev;
    std::unique_lock<std::mutex> lk(d->mu);
    auto idle = [](Stream *x) { return x->queue.empty() && !x->busy; };
    CUresult r;
    if (s) {
        r = drive(
            d, lk, [&] { return idle(s); },
            [&](Stream *x) {
                if (x == s) return true;
                const Op *head = s->queue.empty() ? nullptr : s->queue.front().get();
                return head && head->wait && !head->wait->done && x->ctx == ctx;
            });
    } else {
        r = drive(
            d, lk,
            [&] {
                return std::all_of(ctx->streams.begin(), ctx->streams.end(), idle) && idle(ctx->null_stream);
            },
            [&](Stream *x) { return x->ctx == ctx; });
    }
    return r != OK ? r : ctx->sticky.load();
}

CUresult wait_mark(Context *ctx, const std::shared_ptr<Mark> &m) {
    Device *d = ctx->dev;
    std::unique_lock<std::mutex> lk(d->mu);
    CUresult r = drive(d, lk, [&] { return m->done.load(); }, [&](Stream *x) { return x->ctx == ctx; });
    return r != OK ? r : ctx->sticky.load();
}

bool pending_touch(Device *d, const char *p, size_t n) {
    for (Stream *s : d->streams) {
        for (const auto &op : s->queue) {
            for (const auto &t : op->touches) {
                if (p < t.first + t.second && t.first < p + n) return true;
            }
        }
    }
    return false;
}

void destroy_streams(Context *ctx) {
    Device *d = ctx->dev;
    for (Stream *s : ctx->streams) s->destroyed = true;
    ctx->null_stream->destroyed = true;
    d->streams.erase(std::remove_if(d->streams.begin(), d->streams.end(),
                                    [&](Stream *s) { return s->ctx == ctx && s->queue.empty(); }),
                     d->streams.end());
    ctx->streams.clear();
}

}  // namespace emu
