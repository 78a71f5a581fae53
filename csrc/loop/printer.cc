#include "loop/printer.h"

#include <sstream>

#include "ir/printer.h"

namespace tessera::loop {

namespace {

void print_buffer_decl(std::ostream& os, const Buffer& b) {
  os << b->name << ": " << ir::dtype_name(b->dtype) << "[";
  for (size_t i = 0; i < b->shape.size(); ++i) {
    if (i) os << ", ";
    os << ir::to_string(b->shape[i]);
  }
  os << "]";
}

// The captures of an outlined body: buffers, then variables ("; " between when both exist).
void print_names(std::ostream& os, const std::vector<Buffer>& buffers,
                 const std::vector<Var>& vars) {
  for (size_t i = 0; i < buffers.size(); ++i) os << (i ? ", " : "") << buffers[i]->name;
  if (!buffers.empty() && !vars.empty()) os << "; ";
  for (size_t i = 0; i < vars.size(); ++i) os << (i ? ", " : "") << ir::to_string(vars[i]);
}

// Prints every kind its own way, so a switch (the compiler flags a kind left out) rather than a
// StmtVisitor, whose defaults would print nothing for it.
class StmtPrinter {
 public:
  // `f`, when given, names the outlined bodies that parallel calls run.
  explicit StmtPrinter(std::ostream& os, const LoweredFunc* f = nullptr) : os_(os), f_(f) {}

  void print(const Stmt& s, int indent) {
    if (!s) {
      line(indent) << "<null>\n";
      return;
    }
    switch (s->kind) {
      case StmtKind::kFor: {
        std::ostream& os = line(indent);
        if (s->for_kind != ForKind::kSerial) os << for_kind_name(s->for_kind) << " ";
        os << "for " << ir::to_string(s->var) << " in [" << ir::to_string(s->min) << ", "
           << ir::to_string(ir::add(s->min, s->extent)) << "):\n";
        print(s->body, indent + 1);
        return;
      }
      case StmtKind::kLet:
        line(indent) << "let " << ir::to_string(s->var) << " = " << ir::to_string(s->value) << "\n";
        print(s->body, indent);
        return;
      case StmtKind::kIf:
        line(indent) << "if " << ir::to_string(s->cond) << ":\n";
        print(s->then_case, indent + 1);
        if (s->else_case) {
          line(indent) << "else:\n";
          print(s->else_case, indent + 1);
        }
        return;
      case StmtKind::kStore:
        line(indent) << s->buffer->name << "[" << ir::to_string(s->index)
                     << "] = " << ir::to_string(s->value) << "\n";
        return;
      case StmtKind::kAllocate: {
        std::ostream& os = line(indent);
        os << "allocate ";
        print_buffer_decl(os, s->buffer);
        os << " (" << ir::mem_scope_name(s->buffer->scope) << ")\n";
        print(s->body, indent);
        return;
      }
      case StmtKind::kSeq:
        for (const Stmt& x : s->seq) print(x, indent);
        return;
      case StmtKind::kNop:
        line(indent) << "nop\n";
        return;
      case StmtKind::kBarrier:
        line(indent) << "barrier\n";
        return;
      case StmtKind::kPrefetch:
        line(indent) << "prefetch_l" << s->cache_level << " " << s->buffer->name << "["
                     << ir::to_string(s->index) << "]\n";
        return;
      case StmtKind::kParallelCall: {
        std::ostream& os = line(indent);
        os << "parallel for " << ir::to_string(s->var) << " in [" << ir::to_string(s->min) << ", "
           << ir::to_string(ir::add(s->min, s->extent)) << "): call ";
        if (f_ && s->callee < static_cast<int>(f_->outlined.size())) {
          const OutlinedBody& o = f_->outlined[s->callee];
          os << o.name << "(";
          print_names(os, o.buffers, o.vars);
          os << ")\n";
        } else {
          os << "outlined body " << s->callee << "\n";
        }
        return;
      }
    }
  }

 private:
  std::ostream& line(int indent) {
    for (int i = 0; i < indent; ++i) os_ << "  ";
    return os_;
  }

  std::ostream& os_;
  const LoweredFunc* f_;
};

std::string without_final_newline(std::string s) {
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

std::string to_string(const Stmt& s) {
  std::ostringstream os;
  StmtPrinter(os).print(s, 0);
  return without_final_newline(os.str());
}

std::string to_string(const LoweredFunc& f) {
  std::ostringstream os;
  os << "func " << f.name << "(";
  for (size_t i = 0; i < f.args.size(); ++i) {
    if (i) os << ", ";
    print_buffer_decl(os, f.args[i]);
  }
  if (!f.size_vars.empty()) {
    os << (f.args.empty() ? "" : "; ") << "sizes: ";
    for (size_t i = 0; i < f.size_vars.size(); ++i) {
      if (i) os << ", ";
      os << ir::to_string(f.size_vars[i]);
    }
  }
  os << "):\n";
  StmtPrinter(os, &f).print(f.body, 1);
  for (const OutlinedBody& o : f.outlined) {
    os << "outlined " << o.name << "(" << ir::to_string(o.var);
    if (!o.buffers.empty() || !o.vars.empty()) os << "; ";
    print_names(os, o.buffers, o.vars);
    os << "):\n";
    StmtPrinter(os, &f).print(o.body, 1);
  }
  return without_final_newline(os.str());
}

}  // namespace tessera::loop
