#include "loop/stmt.h"

#include "util/check.h"

namespace tessera::loop {

const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::kSerial:
      return "serial";
    case ForKind::kParallel:
      return "parallel";
    case ForKind::kVectorized:
      return "vectorized";
    case ForKind::kUnrolled:
      return "unrolled";
    case ForKind::kGpuBlockX:
      return "blockIdx.x";
    case ForKind::kGpuBlockY:
      return "blockIdx.y";
    case ForKind::kGpuBlockZ:
      return "blockIdx.z";
    case ForKind::kGpuThreadX:
      return "threadIdx.x";
    case ForKind::kGpuThreadY:
      return "threadIdx.y";
    case ForKind::kGpuThreadZ:
      return "threadIdx.z";
  }
  return "?";
}

bool is_gpu_bound(ForKind k) {
  return k == ForKind::kGpuBlockX || k == ForKind::kGpuBlockY || k == ForKind::kGpuBlockZ ||
         k == ForKind::kGpuThreadX || k == ForKind::kGpuThreadY || k == ForKind::kGpuThreadZ;
}

namespace {
std::shared_ptr<StmtNode> new_stmt(StmtKind k) {
  auto s = std::make_shared<StmtNode>();
  s->kind = k;
  return s;
}
}  // namespace

Stmt make_for(Var var, Expr min, Expr extent, ForKind kind, Stmt body) {
  TESSERA_CHECK(var.defined() && var->is_var()) << "for loop needs a variable";
  auto s = new_stmt(StmtKind::kFor);
  s->var = std::move(var);
  s->min = std::move(min);
  s->extent = std::move(extent);
  s->for_kind = kind;
  s->body = std::move(body);
  return s;
}

Stmt make_let(Var var, Expr value, Stmt body) {
  auto s = new_stmt(StmtKind::kLet);
  s->var = std::move(var);
  s->value = std::move(value);
  s->body = std::move(body);
  return s;
}

Stmt make_if(Expr cond, Stmt then_case, Stmt else_case) {
  auto s = new_stmt(StmtKind::kIf);
  s->cond = std::move(cond);
  s->then_case = std::move(then_case);
  s->else_case = std::move(else_case);
  return s;
}

Stmt make_store(Buffer buffer, Expr index, Expr value) {
  TESSERA_CHECK(buffer != nullptr) << "store to a null buffer";
  auto s = new_stmt(StmtKind::kStore);
  s->buffer = std::move(buffer);
  s->index = std::move(index);
  s->value = std::move(value);
  return s;
}

Stmt make_allocate(Buffer buffer, Stmt body) {
  auto s = new_stmt(StmtKind::kAllocate);
  s->buffer = std::move(buffer);
  s->body = std::move(body);
  return s;
}

Stmt make_prefetch(Buffer buffer, Expr index, int cache_level) {
  TESSERA_CHECK(buffer != nullptr) << "prefetch of a null buffer";
  TESSERA_CHECK(cache_level == 1 || cache_level == 2) << "prefetch into L1 or L2 only";
  auto s = new_stmt(StmtKind::kPrefetch);
  s->buffer = std::move(buffer);
  s->index = std::move(index);
  s->cache_level = cache_level;
  return s;
}

Stmt make_parallel_call(Var var, Expr min, Expr extent, int callee) {
  TESSERA_CHECK(var.defined() && var->is_var()) << "parallel call needs a variable";
  TESSERA_CHECK(callee >= 0) << "parallel call of a negative body index";
  auto s = new_stmt(StmtKind::kParallelCall);
  s->var = std::move(var);
  s->min = std::move(min);
  s->extent = std::move(extent);
  s->callee = callee;
  return s;
}

Stmt make_seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (auto& s : stmts) {
    if (!s || s->kind == StmtKind::kNop) continue;
    if (s->kind == StmtKind::kSeq) {
      flat.insert(flat.end(), s->seq.begin(), s->seq.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.empty()) return make_nop();
  if (flat.size() == 1) return flat[0];
  auto s = new_stmt(StmtKind::kSeq);
  s->seq = std::move(flat);
  return s;
}

Stmt make_nop() { return new_stmt(StmtKind::kNop); }

Stmt make_barrier() { return new_stmt(StmtKind::kBarrier); }

}  // namespace tessera::loop
