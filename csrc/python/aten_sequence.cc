#include "python/aten_sequence.h"

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "util/check.h"

namespace tessera::python {

namespace {

c10::IValue tensor_list(const AtenOperand& o, const std::vector<c10::IValue>& slots) {
  if (o.optional_elements) {
    c10::List<std::optional<at::Tensor>> list;
    list.reserve(o.slots.size());
    for (int s : o.slots) {
      list.push_back(s < 0 || slots[s].isNone() ? std::nullopt
                                                : std::optional<at::Tensor>(slots[s].toTensor()));
    }
    return list;
  }
  c10::List<at::Tensor> list;
  list.reserve(o.slots.size());
  for (int s : o.slots) list.push_back(slots[s].toTensor());
  return list;
}

c10::IValue operand_value(const AtenOperand& o, const std::vector<c10::IValue>& slots) {
  switch (o.kind) {
    case AtenOperand::Kind::kSlot:
      return slots[o.slot];
    case AtenOperand::Kind::kSlotList:
      return tensor_list(o, slots);
    case AtenOperand::Kind::kConstant:
      break;
  }
  return o.constant;
}

// value[index] of a tuple (several returns) or a list (a Tensor[] return), Python's way.
c10::IValue element(const c10::IValue& value, int index) {
  const bool tuple = value.isTuple();
  TESSERA_CHECK(tuple || value.isList())
      << "ATen sequence: getitem of a " << value.tagKind() << ", not a tuple or list";
  const int64_t n = tuple ? static_cast<int64_t>(value.toTupleRef().elements().size())
                          : static_cast<int64_t>(value.toListRef().size());
  const int64_t i = index < 0 ? index + n : index;
  TESSERA_CHECK(i >= 0 && i < n) << "ATen sequence: index " << index << " of " << n;
  return tuple ? value.toTupleRef().elements()[i] : value.toListRef()[i];
}

void* pointer_of(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().data_ptr();
  TESSERA_CHECK(v.isInt()) << "ATen sequence: a program buffer is a " << v.tagKind();
  return reinterpret_cast<void*>(static_cast<uintptr_t>(v.toInt()));
}

void run_program(const AtenStep& step, const std::vector<c10::IValue>& slots) {
  runtime::Program& p = *step.program;
  runtime::CallPointers ptrs(step.operands.size());
  for (size_t i = 0; i < step.operands.size(); ++i) {
    const AtenOperand& o = step.operands[i];
    ptrs[i] = pointer_of(o.kind == AtenOperand::Kind::kSlot ? slots[o.slot] : o.constant);
  }
  p.run_raw(ptrs.data(), ptrs.data() + p.num_inputs());
}

// The value a step defines.
c10::IValue execute(const AtenStep& step, const std::vector<c10::IValue>& slots) {
  switch (step.kind) {
    case AtenStep::Kind::kProgram:
      run_program(step, slots);
      return c10::IValue();
    case AtenStep::Kind::kGetItem:
      return element(slots[step.source], step.index);
    case AtenStep::Kind::kAlias:
      return slots[step.source];
    case AtenStep::Kind::kOperator:
      break;
  }
  torch::jit::Stack stack;
  stack.reserve(step.operands.size());
  for (const AtenOperand& o : step.operands) stack.push_back(operand_value(o, slots));
  step.op->callBoxed(stack);
  if (stack.size() == 1) return std::move(stack[0]);
  return c10::ivalue::Tuple::create(std::move(stack));
}

}  // namespace

AtenSequence::AtenSequence(int num_slots, std::vector<int> inputs, std::vector<AtenStep> steps,
                           std::vector<int> outputs)
    : num_slots_(num_slots),
      inputs_(std::move(inputs)),
      steps_(std::move(steps)),
      outputs_(std::move(outputs)) {
  auto check_slot = [&](int s) {
    TESSERA_CHECK(s >= 0 && s < num_slots_) << "ATen sequence: slot " << s << " out of range";
  };
  for (int s : inputs_) check_slot(s);
  for (int s : outputs_) check_slot(s);
  for (const AtenStep& st : steps_) {
    const bool program = st.kind == AtenStep::Kind::kProgram;
    if (!program) check_slot(st.out);
    if (program || st.kind == AtenStep::Kind::kOperator) {
      TESSERA_CHECK(program ? st.program != nullptr : st.op.has_value())
          << "ATen sequence: a step without its operator or program";
    } else {
      check_slot(st.source);
    }
    if (program) {
      const size_t n = static_cast<size_t>(st.program->num_inputs() + st.program->num_outputs());
      TESSERA_CHECK(st.operands.size() == n)
          << "ATen sequence: a program of " << n << " buffers given " << st.operands.size();
      for (const AtenOperand& o : st.operands) {
        TESSERA_CHECK(o.kind != AtenOperand::Kind::kSlotList)
            << "ATen sequence: a program buffer is a list";
      }
    }
    for (const AtenOperand& o : st.operands) {
      if (o.kind == AtenOperand::Kind::kSlot) check_slot(o.slot);
      for (int s : o.slots) {
        if (s >= 0 || !o.optional_elements) check_slot(s);
      }
    }
    for (int s : st.dead_after) check_slot(s);
  }
}

std::vector<c10::IValue> AtenSequence::run(std::vector<c10::IValue> values) const {
  TESSERA_CHECK(values.size() == inputs_.size())
      << "ATen sequence: " << values.size() << " inputs given, " << inputs_.size() << " expected";
  std::vector<c10::IValue> slots(num_slots_);
  for (size_t i = 0; i < inputs_.size(); ++i) slots[inputs_[i]] = std::move(values[i]);
  for (const AtenStep& step : steps_) {
    c10::IValue v = execute(step, slots);
    if (step.out >= 0) slots[step.out] = std::move(v);
    for (int s : step.dead_after) slots[s] = c10::IValue();
  }
  std::vector<c10::IValue> out;
  out.reserve(outputs_.size());
  for (int s : outputs_) out.push_back(slots[s]);
  return out;
}

c10::OperatorHandle find_operator(const std::string& name, const std::string& overload) {
  std::optional<c10::OperatorHandle> op =
      c10::Dispatcher::singleton().findSchema(c10::OperatorName(name, overload));
  TESSERA_CHECK(op.has_value()) << "no operator " << name << (overload.empty() ? "" : ".")
                                << overload;
  return *op;
}

}  // namespace tessera::python
