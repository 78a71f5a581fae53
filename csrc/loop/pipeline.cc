#include "loop/pipeline.h"

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "loop/guard_division.h"
#include "loop/legalize_vectorize.h"
#include "loop/outline_parallel.h"
#include "loop/printer.h"
#include "loop/simplify_stmt.h"
#include "loop/transpose_tiles.h"
#include "loop/unroll.h"

namespace tessera::loop {

namespace {

bool dump_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("TESSERA_DUMP");
    return v != nullptr && std::strcmp(v, "lower") == 0;
  }();
  return enabled;
}

void dump(const char* pass, const LoweredFunc& f) {
  if (!dump_enabled()) return;
  std::cerr << "== loop IR after " << pass << "\n" << to_string(f) << "\n";
}

}  // namespace

LoweredFunc run_loop_passes(LoweredFunc f) {
  dump("lowering", f);
  f.body = simplify_stmt(f.body);
  dump("simplify_stmt", f);
  f = guard_integer_division(std::move(f));
  dump("guard_integer_division", f);
  return f;
}

LoweredFunc prepare_for_cpu(LoweredFunc f) {
  f.body = transpose_register_tiles(f.body);
  dump("transpose_register_tiles", f);
  f.body = legalize_vectorized_loops(f.body, &f.notes);
  dump("legalize_vectorized_loops", f);
  f.body = unroll_loops(f.body, &f.notes);
  dump("unroll_loops", f);
  f = outline_parallel_loops(std::move(f));
  dump("outline_parallel_loops", f);
  f.cpu_ready = true;
  return f;
}

}  // namespace tessera::loop
