// Executing a kernel launch on the host: the blocks one after another on the
// calling thread, the threads of a block as fibers that switch only at
// __syncthreads and warp shuffles. A block whose threads cannot all meet at
// a barrier (one exited, or waits at another one) is reported with the
// threads concerned, and a memory access outside every allocation (a
// fault on a guard page, or on a device address used as a host one) ends
// the launch as CUDA_ERROR_ILLEGAL_ADDRESS.
#include "emu.h"
#include "shim.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

#include <cstring>
#include <string>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace emu {

thread_local ThreadState *tls_thread = nullptr;
thread_local BlockState tls_block{};
thread_local LaunchState tls_launch{};

namespace {

constexpr unsigned WARP = 32;
// Each fiber's stack: kernels need little, but a fault's signal frame may
// land on it too (AVX-512 state included).
constexpr size_t STACK = 64 << 10;

#if defined(__x86_64__)
// Saves the callee-saved registers on the current stack, stores the stack
// pointer in *from and continues on the stack `to` (System V AMD64).
extern "C" void emu_switch(void **from, void *to);
asm(R"(
    .text
    .p2align 4
    .type emu_switch,@function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");
#endif

enum class State { Ready, AtBarrier, AtShuffle, Done };

struct Fiber {
    ThreadState st{};
    State state = State::Ready;
    uint64_t wait_gen = 0;
    unsigned shuffles = 0;
    char *stack = nullptr;
#if defined(__x86_64__)
    void *sp = nullptr;
#else
    ucontext_t uc;
#endif
};

struct Warp {
    unsigned lanes = 0, arrived = 0;
    uint64_t gen = 0;
    uint64_t val[2][WARP];
};

// The state of one host thread that executes launches.
struct Executor {
    std::vector<Fiber> fibers;
    std::vector<Warp> warps;
    Fiber *cur = nullptr;
    unsigned threads = 0;
    unsigned arrived = 0;
    uint64_t gen = 0;
    const Launch *launch = nullptr;
#if defined(__x86_64__)
    void *main_sp = nullptr;
#else
    ucontext_t main_uc;
#endif
    sigjmp_buf recover;
    volatile sig_atomic_t in_kernel = 0;
    void *fault_addr = nullptr;
    std::string why;  // a fault found by the shim (not a signal)
};

// Executors by host thread, for the fault handler (which must not touch
// thread-local storage of a library loaded at run time).
constexpr int MAX_EXECUTORS = 512;
struct Slot {
    std::atomic<pthread_t> thread;
    std::atomic<Executor *> exec;
};
Slot g_slots[MAX_EXECUTORS];
std::atomic<int> g_used{0};

thread_local Executor *tls_exec = nullptr;

Executor *executor() {
    if (!tls_exec) {
        tls_exec = new Executor();
        int i = g_used.fetch_add(1);
        if (i < MAX_EXECUTORS) {
            g_slots[i].thread.store(pthread_self());
            g_slots[i].exec.store(tls_exec);
        }
    }
    return tls_exec;
}

Executor *executor_of_this_thread_signal_safe() {
    pthread_t me = pthread_self();
    int n = g_used.load();
    for (int i = 0; i < n && i < MAX_EXECUTORS; ++i) {
        if (pthread_equal(g_slots[i].thread.load(), me)) return g_slots[i].exec.load();
    }
    return nullptr;
}

struct sigaction g_old_segv, g_old_bus;

void chain(int sig, siginfo_t *si, void *uc) {
    struct sigaction *old = sig == SIGSEGV ? &g_old_segv : &g_old_bus;
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, si, uc);
        return;
    }
    if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        return;
    }
    // The default action: the faulting instruction runs again and ends the
    // process as it would have without the emulator.
    signal(sig, SIG_DFL);
}

void on_fault(int sig, siginfo_t *si, void *uc) {
    Executor *e = executor_of_this_thread_signal_safe();
    if (e && e->in_kernel) {
        e->in_kernel = 0;
        e->fault_addr = si->si_addr;
        siglongjmp(e->recover, 1);
    }
    chain(sig, si, uc);
}

// Back to the block scheduler.
void yield(Executor *e, Fiber *f) {
#if defined(__x86_64__)
    emu_switch(&f->sp, e->main_sp);
#else
    swapcontext(&f->uc, &e->main_uc);
#endif
}

// Ends the launch from inside a fiber with a fault found by the shim.
[[noreturn]] void fault(Executor *e, const std::string &why) {
    e->why = why;
    e->in_kernel = 0;
    siglongjmp(e->recover, 2);
}

void fiber_main() {
    Executor *e = tls_exec;
    Fiber *f = e->cur;
    e->launch->fn->host->call(e->launch->args.get());
    f->state = State::Done;
    yield(e, f);
    __builtin_unreachable();
}

#if !defined(__x86_64__)
void fiber_entry() { fiber_main(); }
#endif

// Prepares fiber f to start the kernel from the top of its stack.
void arm(Executor *e, Fiber *f) {
    (void)e;
#if defined(__x86_64__)
    auto top = reinterpret_cast<uintptr_t>(f->stack + STACK) & ~uintptr_t(15);
    auto *sp = reinterpret_cast<uint64_t *>(top);
    *--sp = 0;  // the return address fiber_main never uses
    *--sp = reinterpret_cast<uint64_t>(&fiber_main);
    for (int i = 0; i < 6; ++i) *--sp = 0;
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = STACK;
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, fiber_entry, 0);
#endif
}

// Makes room for n fibers, each with a stack above a guard page.
bool reserve(Executor *e, unsigned n) {
    while (e->fibers.size() < n) {
        size_t bytes = STACK + 4096;
        void *m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return false;
        mprotect(m, 4096, PROT_NONE);
        Fiber f;
        f.stack = static_cast<char *>(m) + 4096;
        e->fibers.push_back(f);
    }
    return true;
}

const char *where(State s) {
    switch (s) {
        case State::AtBarrier: return "waits at __syncthreads";
        case State::AtShuffle: return "waits at a warp shuffle";
        case State::Done: return "has exited";
        default: return "is ready";
    }
}

// Runs block b of the launch; false with e->why set when its threads
// cannot all finish.
bool run_block(Executor *e, const Launch &l, unsigned long long b) {
    const Dim3 g = l.grid, d = l.block;
    tls_block.idx = Coord{static_cast<unsigned>(b % g.x), static_cast<unsigned>(b / g.x % g.y),
                          static_cast<unsigned>(b / (1ull * g.x * g.y))};
    e->threads = d.x * d.y * d.z;
    e->arrived = 0;
    unsigned nwarps = (e->threads + WARP - 1) / WARP;
    e->warps.assign(nwarps, Warp{});
    for (unsigned w = 0; w < nwarps; ++w) e->warps[w].lanes = std::min(WARP, e->threads - w * WARP);
    for (unsigned t = 0; t < e->threads; ++t) {
        Fiber &f = e->fibers[t];
        f.st.idx = Coord{t % d.x, t / d.x % d.y, t / (d.x * d.y)};
        f.st.flat = t;
        f.st.lane = t % WARP;
        f.st.warp = t / WARP;
        f.state = State::Ready;
        f.shuffles = 0;
        arm(e, &f);
    }
    unsigned done = 0;
    while (done < e->threads) {
        bool progress = false;
        for (unsigned t = 0; t < e->threads; ++t) {
            Fiber &f = e->fibers[t];
            if (f.state == State::Done) continue;
            if (f.state == State::AtBarrier && f.wait_gen == e->gen) continue;
            if (f.state == State::AtShuffle && f.wait_gen == e->warps[f.st.warp].gen) continue;
            f.state = State::Ready;
            e->cur = &f;
            tls_thread = &f.st;
#if defined(__x86_64__)
            emu_switch(&e->main_sp, f.sp);
#else
            swapcontext(&e->main_uc, &f.uc);
#endif
            progress = true;
            if (f.state == State::Done) ++done;
        }
        if (!progress) {
            std::string who;
            int shown = 0;
            for (unsigned t = 0; t < e->threads && shown < 4; ++t) {
                Fiber &f = e->fibers[t];
                bool waiting = f.state == State::AtBarrier || f.state == State::AtShuffle;
                if (shown == 0 || !waiting) {
                    who += (who.empty() ? "" : "; ") + std::string("thread (") + std::to_string(f.st.idx.x) +
                           "," + std::to_string(f.st.idx.y) + "," + std::to_string(f.st.idx.z) + ") " +
                           where(f.state);
                    ++shown;
                }
            }
            e->why = "block " + std::to_string(b) + " cannot go on: " + std::to_string(e->arrived) + " of " +
                     std::to_string(e->threads) + " threads reached __syncthreads, and a thread never arrives (" +
                     who + ")";
            return false;
        }
    }
    return true;
}

}  // namespace

void syncthreads() {
    Executor *e = tls_exec;
    Fiber *f = e->cur;
    if (++e->arrived == e->threads) {
        e->arrived = 0;
        ++e->gen;
        return;
    }
    f->state = State::AtBarrier;
    f->wait_gen = e->gen;
    yield(e, f);
}

uint64_t shfl_down_bits(unsigned mask, uint64_t bits, unsigned delta, int width) {
    Executor *e = tls_exec;
    Fiber *f = e->cur;
    Warp &w = e->warps[f->st.warp];
    unsigned full = w.lanes == WARP ? 0xffffffffu : (1u << w.lanes) - 1;
    if (mask != full) {
        fault(e, "a warp shuffle with mask " + std::to_string(mask) + " in a warp of " +
                     std::to_string(w.lanes) + " lanes (this emulator runs whole warps in step only)");
    }
    if (width <= 0 || width > static_cast<int>(WARP) || (width & (width - 1))) {
        fault(e, "a warp shuffle of width " + std::to_string(width));
    }
    unsigned phase = f->shuffles++ & 1;
    unsigned lane = f->st.lane;
    w.val[phase][lane] = bits;
    if (++w.arrived == w.lanes) {
        w.arrived = 0;
        ++w.gen;
    } else {
        f->state = State::AtShuffle;
        f->wait_gen = w.gen;
        yield(e, f);
    }
    unsigned seg = lane / static_cast<unsigned>(width) * static_cast<unsigned>(width);
    unsigned src = lane + delta;
    if (src >= seg + static_cast<unsigned>(width) || src >= w.lanes) return bits;
    return w.val[phase][src];
}

void install_fault_handlers() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &g_old_segv);
        sigaction(SIGBUS, &sa, &g_old_bus);
    });
}

CUresult execute(const Launch &l) {
    install_fault_handlers();
    Executor *e = executor();
    unsigned threads = l.block.x * l.block.y * l.block.z;
    if (!reserve(e, threads)) {
        say("kernel %s: no host memory for %u fiber stacks", l.fn->image->name.c_str(), threads);
        return LAUNCH_OUT_OF_RESOURCES;
    }
    const char *name = l.fn->image->name.c_str();
    e->launch = &l;
    e->why.clear();
    tls_launch.grid = Coord{l.grid.x, l.grid.y, l.grid.z};
    tls_launch.block = Coord{l.block.x, l.block.y, l.block.z};
    unsigned long long blocks = 1ull * l.grid.x * l.grid.y * l.grid.z;
    // Volatile: read after a siglongjmp back into this frame.
    volatile unsigned long long b = 0;
    int how = sigsetjmp(e->recover, 1);
    if (how == 1) {
        const ThreadState *t = tls_thread;
        say("kernel %s: illegal address %p in block %llu, thread (%u,%u,%u): the context is unusable from "
            "now on (sticky CUDA_ERROR_ILLEGAL_ADDRESS)",
            name, e->fault_addr, static_cast<unsigned long long>(b), t ? t->idx.x : 0, t ? t->idx.y : 0,
            t ? t->idx.z : 0);
        return ILLEGAL_ADDRESS;
    }
    if (how == 2) {
        say("kernel %s: %s; the context is unusable from now on (sticky CUDA_ERROR_LAUNCH_FAILED)", name,
            e->why.c_str());
        return LAUNCH_FAILED;
    }
    e->in_kernel = 1;
    for (; b < blocks; b = b + 1) {
        if (!run_block(e, l, b)) {
            e->in_kernel = 0;
            say("kernel %s: %s; the context is unusable from now on (sticky CUDA_ERROR_LAUNCH_FAILED)", name,
                e->why.c_str());
            return LAUNCH_FAILED;
        }
    }
    e->in_kernel = 0;
    return OK;
}

}  // namespace emu
