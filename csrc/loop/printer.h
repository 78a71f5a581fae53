#pragma once
// Human-readable text for loop IR (for debugging, explain() and golden-free tests).
#include <string>

#include "loop/stmt.h"

namespace tessera::loop {

std::string to_string(const Stmt& s);
std::string to_string(const LoweredFunc& f);

}  // namespace tessera::loop
