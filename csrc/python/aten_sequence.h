#pragma once
// A run of ATen operators and Tessera programs executed in C++, the operators through the
// dispatcher: one Python call for the whole run instead of one per operator (issue 19, item 7).
// The runner (runner.py) hands every maximal run of steps it can describe to one AtenSequence.
//
// Values live in numbered slots. A step reads its operands (a slot, a list of slots, or a
// constant converted once, at construction, to the schema's type), calls the operator boxed,
// writes its result to one slot (a tuple where the operator returns several), and clears the
// slots whose last reader it is, so that dead intermediates are freed as early as in eager.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/program.h"

namespace tessera::python {

struct AtenOperand {
  enum class Kind { kSlot, kSlotList, kConstant };
  Kind kind = Kind::kConstant;
  int slot = -1;           // kSlot
  std::vector<int> slots;  // kSlotList: a Tensor[] or Tensor?[] argument; -1 is None (Tensor?[])
  bool optional_elements = false;  // kSlotList of a Tensor?[] argument
  c10::IValue constant;            // kConstant
};

struct AtenStep {
  enum class Kind {
    kOperator,  // out = op(operands...)
    kGetItem,   // out = slot[index] of a tuple value
    kAlias,     // out = operands[0] (a clone nobody can observe)
    kProgram,   // Tessera kernels: program(data pointers of operands...); defines no value
  };
  Kind kind = Kind::kOperator;
  std::optional<c10::OperatorHandle> op;
  // kOperator: in schema order, defaults filled in. kProgram: the program's inputs then outputs,
  // each a tensor (its data pointer is passed) or an integer (a pointer made elsewhere).
  std::vector<AtenOperand> operands;
  std::shared_ptr<runtime::Program> program;  // kProgram
  int source = -1;                            // kGetItem, kAlias
  int index = 0;                              // kGetItem
  int out = -1;  // -1 for kProgram, whose outputs are tensors allocated by earlier steps
  std::vector<int> dead_after;  // slots nothing reads after this step (and not outputs)
};

class AtenSequence {
 public:
  AtenSequence(int num_slots, std::vector<int> inputs, std::vector<AtenStep> steps,
               std::vector<int> outputs);

  // Invariant: values.size() == number of inputs; returns one value per output slot. Needs no
  // GIL (the binding releases it): operators that call into Python take it themselves.
  std::vector<c10::IValue> run(std::vector<c10::IValue> values) const;

  size_t size() const { return steps_.size(); }

 private:
  int num_slots_;
  std::vector<int> inputs_;
  std::vector<AtenStep> steps_;
  std::vector<int> outputs_;
};

// The operator aten::name.overload ("" for the default overload); throws if unknown.
c10::OperatorHandle find_operator(const std::string& name, const std::string& overload);

}  // namespace tessera::python
