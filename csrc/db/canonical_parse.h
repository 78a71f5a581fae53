#pragma once
// Parser of the canonical text (canonical_text.h): the compute DAG back from its text, so that a
// workload can travel to another process (a measurement worker, maybe on another machine).
//
// Round trip: for every DAG, canonicalize(parse_canonical(text)).text == text, where text is
// canonicalize(dag).text. The parsed DAG names its tensors as the text does (t<k>, so a schedule
// in canonical names, "$<k>", translates by schedule_from_canonical with those names), its
// iterators a<k>/r<k> and its sizes n<k>.
//
// The canonical text leaves out what does not change the computed values: tensor names and the
// ops' tags, and the order of summation iterators. Stage planning reads two of them (the "pad"
// tag decides whether a pad op is materialised; lowering nests summation loops in reduce_axes
// order), so a DAG sent for measurement carries them as plan hints: lines after the canonical
// text, not part of the records key. Without hints the parsed DAG has the default tags and the
// canonical summation order.
#include <string>
#include <vector>

#include "db/canonical_text.h"
#include "ir/tensor.h"

namespace tessera::db {

struct ParsedDag {
  std::vector<ir::Tensor> outputs;
  std::vector<ir::Tensor> inputs;   // the kernel's argument order, as the text lists them
  std::vector<ir::Tensor> tensors;  // canonical id -> tensor
  std::string canonical;            // the text without its plan hints
};

// Throws tessera::Error naming the line and column on malformed text. Never crashes on any
// input.
ParsedDag parse_canonical(const std::string& text);

// The plan hints of a DAG ("hint t<k> tag=<tag> [reduce=<perm>]" lines, one per compute op;
// perm[i] = canonical position of the op's i-th summation iterator, left out when the orders
// agree): form.text + plan_hints(form) parses back to a DAG that plans and lowers like the
// original. A tag that is not an identifier ([A-Za-z0-9_.-]) travels as the default tag.
std::string plan_hints(const CanonicalForm& form);

}  // namespace tessera::db
