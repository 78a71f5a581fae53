#include "codegen/cuda/emit_cuda.h"

#include <sstream>

#include "codegen/cuda/cuda_expr.h"
#include "codegen/cuda/launch_dims.h"
#include "ir/printer.h"
#include "util/check.h"

namespace tessera::codegen::cuda {

using loop::ForKind;
using loop::Stmt;
using loop::StmtKind;

namespace {

// The CUDA built-in a GPU-bound loop variable reads ("blockIdx.x", ...: the loop kind's own
// name), or null for other loop kinds.
const char* hardware_index(ForKind k) {
  return loop::is_gpu_bound(k) ? loop::for_kind_name(k) : nullptr;
}

// Switches over every statement kind (no visitor defaults), so a new kind is a compile warning
// here until it has a translation or a refusal.
class KernelEmitter {
 public:
  std::string emit(const loop::LoweredFunc& f) {
    TESSERA_CHECK(!f.cpu_ready && f.outlined.empty())
        << "CUDA codegen: kernel " << f.name << " was prepared for the CPU";
    launch_dims(f);  // validates the GPU loops (one extent per hardware index, min 0)
    os_ << cuda_expr_prelude() << "\n";
    emit_signature(f);
    os_ << " {\n";
    emit_stmt(f.body, 1);
    os_ << "}\n";
    return os_.str();
  }

 private:
  void emit_signature(const loop::LoweredFunc& f) {
    os_ << "extern \"C\" __global__ void " << names_.unique(f.name) << "(";
    const char* sep = "";
    for (const ir::Buffer& b : f.args) {
      os_ << sep << element_type(b->dtype) << "* " << names_.bind(b.get(), b->name);
      sep = ", ";
    }
    for (const ir::Var& v : f.size_vars) {
      os_ << sep << "long long " << names_.bind(v.get(), v->name);
      sep = ", ";
    }
    os_ << ")";
  }

  std::ostream& line(int indent) {
    for (int i = 0; i < indent; ++i) os_ << "  ";
    return os_;
  }

  std::string expr(const ir::Expr& e) { return cuda_expr(e, names_); }

  // `e` with its shared subexpressions bound to constants declared here first (cuda_expr_shared).
  std::string shared_expr(const ir::Expr& e, int indent) {
    std::vector<std::string> decls;
    std::string text = cuda_expr_shared(e, names_, &decls);
    for (const std::string& d : decls) line(indent) << d << "\n";
    return text;
  }

  void emit_stmt(const Stmt& s, int indent) {
    switch (s->kind) {
      case StmtKind::kFor:
        return emit_for(s, indent);
      case StmtKind::kLet: {
        line(indent) << "{\n";
        const std::string value = shared_expr(s->value, indent + 1);
        const std::string& v = names_.bind(s->var.get(), s->var->name);
        line(indent + 1) << "const " << scalar_type(s->var->dtype) << " " << v << " = " << value
                         << ";\n";
        emit_stmt(s->body, indent + 1);
        line(indent) << "}\n";
        return;
      }
      case StmtKind::kIf:
        line(indent) << "if (" << expr(s->cond) << ") {\n";
        emit_stmt(s->then_case, indent + 1);
        if (s->else_case) {
          line(indent) << "} else {\n";
          emit_stmt(s->else_case, indent + 1);
        }
        line(indent) << "}\n";
        return;
      case StmtKind::kStore: {
        const std::string value = shared_expr(s->value, indent);
        line(indent) << names_.of(s->buffer.get()) << "[" << expr(s->index) << "] = " << value
                     << ";\n";
        return;
      }
      case StmtKind::kAllocate:
        return emit_allocate(s, indent);
      case StmtKind::kSeq:
        for (const Stmt& c : s->seq) emit_stmt(c, indent);
        return;
      case StmtKind::kNop:
      case StmtKind::kPrefetch:  // a CPU cache hint: no effect on results
        return;
      case StmtKind::kBarrier:
        line(indent) << "__syncthreads();\n";
        return;
      case StmtKind::kParallelCall:
        TESSERA_FAIL() << "CUDA codegen: a parallel call is a CPU thread-pool construct";
    }
    TESSERA_FAIL() << "CUDA codegen: unknown statement kind";
  }

  void emit_for(const Stmt& s, int indent) {
    const std::string& v = names_.bind(s->var.get(), s->var->name);
    const char* t = scalar_type(s->var->dtype);
    if (const char* hw = hardware_index(s->for_kind)) {
      // Not a loop: the kernel runs once per index value (launch_dims gives the extents).
      line(indent) << "{\n";
      line(indent + 1) << "const " << t << " " << v << " = (" << t << ")" << hw << ";\n";
      // A loop of extent 1 leaves its index unread once simplified (nvcc warns of that).
      line(indent + 1) << "(void)" << v << ";\n";
      emit_stmt(s->body, indent + 1);
      line(indent) << "}\n";
      return;
    }
    TESSERA_CHECK(s->for_kind != ForKind::kParallel)
        << "CUDA codegen: loop " << s->var->name << " is a CPU parallel loop";
    // Unrolled loops ask nvcc to unroll; vectorized loops run their lanes one after another in
    // one thread (vector loads and stores are not generated yet).
    if (s->for_kind == ForKind::kUnrolled) line(indent) << "#pragma unroll\n";
    const std::string end = names_.unique(s->var->name + "_end");
    line(indent) << "for (" << t << " " << v << " = " << expr(s->min) << ", " << end << " = "
                 << expr(ir::add(s->min, s->extent)) << "; " << v << " < " << end << "; ++" << v
                 << ") {\n";
    emit_stmt(s->body, indent + 1);
    line(indent) << "}\n";
  }

  void emit_allocate(const Stmt& s, int indent) {
    const ir::Buffer& b = s->buffer;
    const ir::Expr size = ir::buffer_size(b);
    const bool local = b->scope == ir::MemScope::kShared || b->scope == ir::MemScope::kRegister ||
                       b->scope == ir::MemScope::kStack;
    TESSERA_CHECK(local) << "CUDA codegen: buffer " << b->name << " has "
                         << ir::mem_scope_name(b->scope)
                         << " scope, which needs a device allocator (not supported yet)";
    TESSERA_CHECK(size->is_const_int() && size->int_value >= 1)
        << "CUDA codegen: buffer " << b->name << " needs a positive constant size, not "
        << ir::to_string(size);
    line(indent) << "{\n";
    const char* qualifier = b->scope == ir::MemScope::kShared ? "__shared__ " : "";
    line(indent + 1) << qualifier << element_type(b->dtype) << " " << names_.bind(b.get(), b->name)
                     << "[" << size->int_value << "];\n";
    emit_stmt(s->body, indent + 1);
    line(indent) << "}\n";
  }

  Names names_;
  std::ostringstream os_;
};

}  // namespace

std::string emit_cuda(const loop::LoweredFunc& f) { return KernelEmitter().emit(f); }

}  // namespace tessera::codegen::cuda
