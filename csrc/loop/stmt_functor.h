#pragma once
// A rebuilding mutator over loop-IR statements (the statement-side twin of ir::ExprMutator).
// Override `mutate` for the kinds a pass cares about and call `mutate_children` for the rest;
// unchanged subtrees come back as the same node.
#include "loop/stmt.h"

namespace tessera::loop {

class StmtMutator {
 public:
  virtual ~StmtMutator() = default;
  virtual Stmt mutate(const Stmt& s) { return mutate_children(s); }

 protected:
  // Rebuilds `s` with its child statements mutated (expressions are left as they are).
  Stmt mutate_children(const Stmt& s);
};

}  // namespace tessera::loop
