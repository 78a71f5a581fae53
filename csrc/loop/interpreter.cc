#include "loop/interpreter.h"

#include <cstring>
#include <map>
#include <memory>

#include "ir/eval.h"
#include "util/check.h"

namespace tessera::loop {

namespace {

struct BoundBuffer {
  void* data = nullptr;
  int64_t numel = 0;
  ir::DType dtype = ir::DType::kFloat32;
};

// Gives every kind its own meaning, so a switch (the compiler flags a kind left out) rather than
// a StmtVisitor, whose defaults would silently skip it.
class Interpreter {
 public:
  explicit Interpreter(const LoweredFunc& f) : f_(f) {
    env_.read_buffer = [this](const ir::BufferNode& b, int64_t i) { return read(b, i); };
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
        // Loops run one iteration at a time here, so the threads of a block cannot meet at a
        // barrier: results would silently differ from the GPU's.
        TESSERA_FAIL() << "interpreter: a barrier needs the GPU-semantics interpreter";
      case StmtKind::kFor: {
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
  int64_t eval_int(const Expr& e) { return ir::evaluate(e, env_).i; }

  BoundBuffer& find(const ir::BufferNode& b, int64_t i) {
    auto it = buffers_.find(&b);
    TESSERA_CHECK(it != buffers_.end()) << "buffer " << b.name << " is not bound";
    TESSERA_CHECK(i >= 0 && i < it->second.numel)
        << "index " << i << " out of bounds of " << b.name << " (" << it->second.numel << ")";
    return it->second;
  }

  ir::Scalar read(const ir::BufferNode& b, int64_t i) {
    BoundBuffer& bb = find(b, i);
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
    BoundBuffer& bb = find(b, i);
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

  const LoweredFunc& f_;
  ir::EvalEnv env_;
  std::map<const ir::BufferNode*, BoundBuffer> buffers_;
};

}  // namespace

void interpret(const LoweredFunc& f, const std::vector<void*>& buffers,
               const std::vector<int64_t>& sizes) {
  // The status word may be left out: the interpreter raises on a division by zero by itself.
  const size_t visible = f.args.size() - (f.has_status ? 1 : 0);
  TESSERA_CHECK(buffers.size() == f.args.size() || buffers.size() == visible)
      << "interpret: wrong number of buffers";
  TESSERA_CHECK(sizes.size() == f.size_vars.size()) << "interpret: wrong number of sizes";
  Interpreter in(f);
  int32_t status = 0;
  for (size_t i = 0; i < sizes.size(); ++i) in.bind_size(f.size_vars[i], sizes[i]);
  for (size_t i = 0; i < f.args.size(); ++i) {
    in.bind_buffer(f.args[i], i < buffers.size() ? buffers[i] : &status);
  }
  in.run(f.body);
}

}  // namespace tessera::loop
