#include "frontend/expr_dynamic.h"

#include <algorithm>
#include <regex>

#include "frontend/expr_error.h"

namespace tessera::frontend {

namespace {

int input_index(const Program& p, const std::string& tensor) {
  auto it = std::find(p.inputs.begin(), p.inputs.end(), tensor);
  return it == p.inputs.end() ? -1 : static_cast<int>(it - p.inputs.begin());
}

// Appends the input dims that accesses under `n` index with iterator `iter` alone.
void plain_uses(const Program& p, const AstNode& n, const std::string& iter,
                std::vector<InputDim>* out) {
  if (n.kind == AstKind::kAccess) {
    const int input = input_index(p, n.name);
    for (size_t d = 0; d < n.args.size() && input >= 0; ++d) {
      const AstNode& index = *n.args[d];
      const InputDim found{input, static_cast<int>(d)};
      const bool seen = std::any_of(out->begin(), out->end(), [&](const InputDim& x) {
        return x.input == found.input && x.dim == found.dim;
      });
      if (index.kind == AstKind::kIter && index.name == iter && !seen) out->push_back(found);
    }
  }
  for (const AstPtr& a : n.args) plain_uses(p, *a, iter, out);
}

}  // namespace

std::vector<InputDim> dynamic_dims(const Program& p, const std::string& name) {
  static const std::regex kSizeOf(R"(^\s*([A-Za-z_]\w*)\.size\((\d+)\)\s*$)");
  std::smatch m;
  if (std::regex_match(name, m, kSizeOf)) {
    const int input = input_index(p, m[1]);
    if (input < 0) {
      throw ExpressionError(p.source, ExpressionError::kNoOffset,
                            "dynamic= names " + name + ", but " + m[1].str() + " is not an input");
    }
    const int dim = std::stoi(m[2]);
    const int rank = p.ndim.at(m[1]);
    if (dim >= rank) {
      throw ExpressionError(p.source, ExpressionError::kNoOffset,
                            "dynamic= names " + name + ", but " + m[1].str() + " has " +
                                std::to_string(rank) + " dims");
    }
    return {InputDim{input, dim}};
  }
  std::vector<InputDim> out;
  for (const Statement& s : p.statements) plain_uses(p, *s.rhs, name, &out);
  if (out.empty()) {
    throw ExpressionError(p.source, ExpressionError::kNoOffset,
                          "dynamic= names '" + name +
                              "', which is neither an iterator indexing an input dim by itself "
                              "(A[.., " +
                              name + ", ..]) nor an input dim (\"A.size(0)\")");
  }
  return out;
}

}  // namespace tessera::frontend
