#include "loop/interpreter.h"

#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "ir/eval.h"
#include "util/check.h"

namespace tessera::loop {

namespace {

struct BoundBuffer {
  void* data = nullptr;
  int64_t numel = 0;
  ir::DType dtype = ir::DType::kFloat32;
};

// What the GPU-semantics mode shares across the blocks of a launch: the findings, the shadow
// memory, and the counters that number blocks and phases.
struct LaunchState {
  GpuCheckReport report;
  RaceChecker races{&report};
  int64_t blocks = 0;
  int64_t phases = 0;
};

// The threads of one GPU block in the GPU-semantics mode: its shared allocations, and the turn
// that lets its threads run one at a time, phase by phase. In a phase, threads 0, 1, ... each
// run until they reach a barrier or their end; when the last has stopped, the next phase starts
// with the lowest thread still running. A thread that finishes (or fails) is done and never gets
// the turn again, so a barrier that some threads never reach releases the others instead of
// hanging; the divergence is reported afterwards.
class BlockContext {
 public:
  BlockContext(int64_t threads, LaunchState* launch)
      : done_(static_cast<size_t>(threads), false),
        wake_(static_cast<size_t>(threads)),
        launch_(launch),
        block_(launch->blocks++),
        phase_(launch->phases++) {
    launch->races.begin_block();
  }

  // Returns once it is thread t's turn.
  void wait_turn(int64_t t) {
    std::unique_lock<std::mutex> lock(mu_);
    wake_[t].wait(lock, [&] { return turn_ == t; });
  }

  // Thread t stops at a barrier; it runs again in the next phase.
  void arrive_and_wait(int64_t t) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pass(t);
    }
    wait_turn(t);
  }

  // Thread t is done.
  void finish(int64_t t) {
    std::lock_guard<std::mutex> lock(mu_);
    done_[t] = true;
    pass(t);
  }

  // Threads from t on will never run (no OS thread could be started for them).
  void abandon_from(int64_t t) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t u = static_cast<size_t>(t); u < done_.size(); ++u) done_[u] = true;
    if (turn_ >= t) pass(static_cast<int64_t>(done_.size()) - 1);
  }

  // The running thread t as a race-check actor (only the thread holding the turn calls this).
  GpuActor actor(int64_t t) const { return GpuActor{block_, t, phase_}; }

  // Storage of shared buffer `b` for this block: allocated (filled with 0xff bytes, like other
  // temporaries) by the first thread that reaches its Allocate.
  char* shared(const ir::BufferNode* b, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<char[]>& storage = shared_[b];
    if (!storage) {
      storage = std::make_unique<char[]>(std::max<size_t>(bytes, 1));
      std::memset(storage.get(), 0xff, bytes);
    }
    return storage.get();
  }

 private:
  // Hands the turn on from thread t (mu_ held).
  void pass(int64_t t) {
    const int64_t n = static_cast<int64_t>(done_.size());
    for (int64_t u = t + 1; u < n; ++u) {
      if (!done_[u]) return hand_to(u);
    }
    // Every thread has stopped at a barrier or ended: the phase is over.
    phase_ = launch_->phases++;
    for (int64_t u = 0; u < n; ++u) {
      if (!done_[u]) return hand_to(u);
    }
    turn_ = -1;
  }

  void hand_to(int64_t u) {
    turn_ = u;
    wake_[u].notify_one();
  }

  std::mutex mu_;
  std::vector<bool> done_;
  std::vector<std::condition_variable> wake_;
  int64_t turn_ = 0;
  LaunchState* launch_;
  const int64_t block_;
  int64_t phase_;
  std::map<const ir::BufferNode*, std::unique_ptr<char[]>> shared_;
};

// Gives every kind its own meaning, so a switch (the compiler flags a kind left out) rather than
// a StmtVisitor, whose defaults would silently skip it.
class Interpreter {
 public:
  // `launch`: the GPU-semantics mode's state (see interpret_gpu), null for the serial mode.
  Interpreter(const LoweredFunc& f, LaunchState* launch) : f_(f), launch_(launch) { bind_reader(); }
  // A copy runs one GPU thread: same bindings, its own variables and local allocations.
  Interpreter(const Interpreter& o)
      : f_(o.f_), env_(o.env_), buffers_(o.buffers_), launch_(o.launch_) {
    bind_reader();
  }

  void bind_size(const Var& v, int64_t value) { env_.vars[v.get()] = ir::Scalar::of_int(value); }

  void bind_buffer(const Buffer& b, void* data) {
    buffers_[b.get()] = BoundBuffer{data, eval_int(ir::buffer_size(b)), b->dtype};
  }

  void run(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kNop:
      case StmtKind::kPrefetch:  // a cache hint: no effect on results
        return;
      case StmtKind::kSeq:
        for (const Stmt& c : s->seq) run(c);
        return;
      case StmtKind::kBarrier:
        // Serially, loops run one iteration at a time, so the threads of a block cannot meet at
        // a barrier: results would silently differ from the GPU's.
        TESSERA_CHECK(launch_) << "interpreter: a barrier needs the GPU-semantics interpreter";
        TESSERA_CHECK(block_) << "interpreter: barrier outside a thread-bound loop";
        block_->arrive_and_wait(thread_);
        ++barriers_passed_;
        return;
      case StmtKind::kFor: {
        if (launch_ && is_thread_bound(s->for_kind)) return run_threads(s);
        const int64_t lo = eval_int(s->min), n = eval_int(s->extent);
        for (int64_t i = lo; i < lo + n; ++i) {
          env_.vars[s->var.get()] = ir::Scalar::of_int(i);
          run(s->body);
        }
        env_.vars.erase(s->var.get());
        return;
      }
      case StmtKind::kParallelCall: {
        TESSERA_CHECK(s->callee >= 0 && s->callee < static_cast<int>(f_.outlined.size()))
            << "parallel call of a missing outlined body";
        // Iterations in order: a parallel body's iterations never depend on each other.
        const OutlinedBody& o = f_.outlined[s->callee];
        const int64_t lo = eval_int(s->min), n = eval_int(s->extent);
        for (int64_t i = lo; i < lo + n; ++i) {
          env_.vars[o.var.get()] = ir::Scalar::of_int(i);
          run(o.body);
        }
        env_.vars.erase(o.var.get());
        return;
      }
      case StmtKind::kLet:
        env_.vars[s->var.get()] = ir::evaluate(s->value, env_);
        run(s->body);
        env_.vars.erase(s->var.get());
        return;
      case StmtKind::kIf:
        if (eval_int(s->cond)) {
          run(s->then_case);
        } else if (s->else_case) {
          run(s->else_case);
        }
        return;
      case StmtKind::kStore:
        write(*s->buffer, eval_int(s->index), ir::evaluate(s->value, env_, true));
        return;
      case StmtKind::kAllocate: {
        if (block_ && s->buffer->scope == ir::MemScope::kShared) return run_shared_allocate(s);
        const int64_t n = eval_int(ir::buffer_size(s->buffer));
        TESSERA_CHECK(n >= 0) << "negative allocation for " << s->buffer->name;
        auto storage = std::make_unique<char[]>(
            static_cast<size_t>(std::max<int64_t>(n, 1) * ir::dtype_bytes(s->buffer->dtype)));
        // Fill with NaN-like garbage so reads before writes show up in results.
        std::memset(storage.get(), 0xff,
                    static_cast<size_t>(n * ir::dtype_bytes(s->buffer->dtype)));
        buffers_[s->buffer.get()] = BoundBuffer{storage.get(), n, s->buffer->dtype};
        run(s->body);
        buffers_.erase(s->buffer.get());
        return;
      }
    }
  }

 private:
  void bind_reader() {
    env_.read_buffer = [this](const ir::BufferNode& b, int64_t i) { return read(b, i); };
  }

  static bool is_thread_bound(ForKind k) {
    return k == ForKind::kGpuThreadX || k == ForKind::kGpuThreadY || k == ForKind::kGpuThreadZ;
  }

  // Runs the iterations of a thread-bound loop (the threads of one block) phase by phase, one
  // OS thread per GPU thread so that each can stop at a barrier and resume after it; the block's
  // turn lets one run at a time. The loop's threads are the whole block.
  void run_threads(const Stmt& s) {
    TESSERA_CHECK(!block_) << "interpreter: thread-bound loop " << s->var->name
                           << " nested in another one (one thread loop per block is supported)";
    const int64_t lo = eval_int(s->min), n = eval_int(s->extent);
    TESSERA_CHECK(n >= 0 && n <= kMaxBlockThreads)
        << "interpreter: block of " << n << " threads (at most " << kMaxBlockThreads << ")";
    if (n == 0) return;
    BlockContext block(n, launch_);
    std::vector<Interpreter> workers(static_cast<size_t>(n), *this);
    std::vector<std::exception_ptr> errors(workers.size());
    std::vector<std::thread> threads;
    for (size_t t = 0; t < workers.size(); ++t) {
      workers[t].block_ = &block;
      workers[t].thread_ = static_cast<int64_t>(t);
      workers[t].env_.vars[s->var.get()] = ir::Scalar::of_int(lo + static_cast<int64_t>(t));
      auto body = [&, t] {
        const int64_t id = static_cast<int64_t>(t);
        block.wait_turn(id);
        try {
          workers[t].run(s->body);
        } catch (...) {
          errors[t] = std::current_exception();
        }
        block.finish(id);
      };
      try {
        threads.emplace_back(body);
      } catch (...) {  // no OS thread left: threads never started must not hold the others
        errors[t] = std::current_exception();
        block.abandon_from(static_cast<int64_t>(t));
        break;
      }
    }
    for (std::thread& th : threads) th.join();
    for (const std::exception_ptr& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    for (const Interpreter& w : workers) {
      TESSERA_CHECK(w.barriers_passed_ == workers[0].barriers_passed_)
          << "interpreter: threads of loop " << s->var->name
          << " passed different numbers of barriers (a barrier under a thread-dependent branch)";
    }
  }

  void run_shared_allocate(const Stmt& s) {
    const int64_t n = eval_int(ir::buffer_size(s->buffer));
    TESSERA_CHECK(n >= 0) << "negative allocation for " << s->buffer->name;
    const size_t bytes = static_cast<size_t>(n * ir::dtype_bytes(s->buffer->dtype));
    buffers_[s->buffer.get()] =
        BoundBuffer{block_->shared(s->buffer.get(), bytes), n, s->buffer->dtype};
    run(s->body);
    buffers_.erase(s->buffer.get());
  }

  int64_t eval_int(const Expr& e) { return ir::evaluate(e, env_).i; }

  // The bound buffer of `b` when `i` is inside it. Out of bounds: the serial mode throws, the GPU
  // mode records the access and returns null (the access is skipped).
  BoundBuffer* find(const ir::BufferNode& b, int64_t i, bool write) {
    auto it = buffers_.find(&b);
    TESSERA_CHECK(it != buffers_.end()) << "buffer " << b.name << " is not bound";
    if (i >= 0 && i < it->second.numel) {
      if (launch_ && block_) launch_->races.access(b, i, write, block_->actor(thread_));
      return &it->second;
    }
    TESSERA_CHECK(launch_) << "index " << i << " out of bounds of " << b.name << " ("
                           << it->second.numel << ")";
    ++launch_->report.out_of_bounds;
    launch_->report.note("out of bounds: thread " + std::to_string(thread_) +
                         (write ? " writes " : " reads ") + b.name + "[" + std::to_string(i) +
                         "] of " + std::to_string(it->second.numel) + " elements");
    return nullptr;
  }

  ir::Scalar read(const ir::BufferNode& b, int64_t i) {
    BoundBuffer* found = find(b, i, /*write=*/false);
    if (!found) return ir::is_float(b.dtype) ? ir::Scalar::of_float(0.0) : ir::Scalar::of_int(0);
    BoundBuffer& bb = *found;
    switch (bb.dtype) {
      case ir::DType::kFloat32:
        return ir::Scalar::of_float(static_cast<float*>(bb.data)[i]);
      case ir::DType::kFloat64:
        return ir::Scalar::of_float(static_cast<double*>(bb.data)[i]);
      case ir::DType::kInt32:
        return ir::Scalar::of_int(static_cast<int32_t*>(bb.data)[i]);
      case ir::DType::kInt64:
        return ir::Scalar::of_int(static_cast<int64_t*>(bb.data)[i]);
      case ir::DType::kBool:
        return ir::Scalar::of_int(static_cast<uint8_t*>(bb.data)[i]);
      default:
        break;
    }
    TESSERA_FAIL() << "interpreter: unsupported dtype " << ir::dtype_name(bb.dtype);
  }

  void write(const ir::BufferNode& b, int64_t i, const ir::Scalar& v) {
    BoundBuffer* found = find(b, i, /*write=*/true);
    if (!found) return;
    BoundBuffer& bb = *found;
    switch (bb.dtype) {
      case ir::DType::kFloat32:
        static_cast<float*>(bb.data)[i] = static_cast<float>(v.as_double());
        return;
      case ir::DType::kFloat64:
        static_cast<double*>(bb.data)[i] = v.as_double();
        return;
      case ir::DType::kInt32:
        static_cast<int32_t*>(bb.data)[i] = static_cast<int32_t>(v.i);
        return;
      case ir::DType::kInt64:
        static_cast<int64_t*>(bb.data)[i] = v.i;
        return;
      case ir::DType::kBool:
        static_cast<uint8_t*>(bb.data)[i] = v.i != 0;
        return;
      default:
        break;
    }
    TESSERA_FAIL() << "interpreter: unsupported dtype " << ir::dtype_name(bb.dtype);
  }

  // Most threads a block may have: CUDA's limit, and a bound on the OS threads one block starts.
  static constexpr int64_t kMaxBlockThreads = 1024;

  const LoweredFunc& f_;
  ir::EvalEnv env_;
  std::map<const ir::BufferNode*, BoundBuffer> buffers_;
  LaunchState* launch_;            // GPU-semantics mode only
  BlockContext* block_ = nullptr;  // set in the threads of a block (GPU-semantics mode)
  int64_t thread_ = -1;            // this thread's index in its block
  int64_t barriers_passed_ = 0;
};

}  // namespace

namespace {

void run_interpreter(const LoweredFunc& f, const std::vector<void*>& buffers,
                     const std::vector<int64_t>& sizes, LaunchState* launch) {
  // The status word may be left out: the interpreter raises on a division by zero by itself.
  const size_t visible = f.args.size() - (f.has_status ? 1 : 0);
  TESSERA_CHECK(buffers.size() == f.args.size() || buffers.size() == visible)
      << "interpret: wrong number of buffers";
  TESSERA_CHECK(sizes.size() == f.size_vars.size()) << "interpret: wrong number of sizes";
  Interpreter in(f, launch);
  int32_t status = 0;
  for (size_t i = 0; i < sizes.size(); ++i) in.bind_size(f.size_vars[i], sizes[i]);
  for (size_t i = 0; i < f.args.size(); ++i) {
    in.bind_buffer(f.args[i], i < buffers.size() ? buffers[i] : &status);
  }
  in.run(f.body);
}

}  // namespace

void interpret(const LoweredFunc& f, const std::vector<void*>& buffers,
               const std::vector<int64_t>& sizes) {
  run_interpreter(f, buffers, sizes, nullptr);
}

GpuCheckReport interpret_gpu(const LoweredFunc& f, const std::vector<void*>& buffers,
                             const std::vector<int64_t>& sizes) {
  LaunchState launch;
  run_interpreter(f, buffers, sizes, &launch);
  return launch.report;
}

}  // namespace tessera::loop
