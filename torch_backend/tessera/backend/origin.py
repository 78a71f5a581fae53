"""Which user code a compiled graph came from, so that tessera.explain(compiled) can find the
graphs of one torch.compile'd model or function among all those compiled in the process.

Dynamo calls the backend while it translates one Python frame; that frame's code object (and
its `self`, when it is a module's method) is recorded on every CompiledGraph the call creates.
A graph break resumes in a code object dynamo generates ("torch_dynamo_resume_in_f_at_N");
`codes_of` follows dynamo's table of those back from the original code, so they count too.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import weakref
from typing import Any, Optional, Set


@dataclasses.dataclass(frozen=True)
class Origin:
    code: Optional[types.CodeType]
    module: Optional["weakref.ref"] = None  # the frame's `self` when it is an nn.Module

    def module_obj(self) -> Any:
        return self.module() if self.module is not None else None


def current_origin() -> Origin:
    """The frame dynamo is translating now (an empty Origin outside dynamo, e.g. when a test
    calls the backend directly)."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator
        tx = InstructionTranslator.current_tx()
    except Exception:  # private dynamo API: its absence only makes explain less precise
        return Origin(None)
    if tx is None:
        return Origin(None)
    import torch
    code = tx.f_code
    local = tx.f_locals if isinstance(tx.f_locals, dict) else {}
    owner = local.get("self")
    if _is_dynamo_wrapper(code):
        # torch.compile(module) and some functions enter through dynamo's wrap_inline frame,
        # whose free variable `fn` is the module or function compiled.
        fn = local.get("fn")
        owner = fn
        if not isinstance(fn, torch.nn.Module):
            code = getattr(inspect.unwrap(fn), "__code__", code) if callable(fn) else code
    module = weakref.ref(owner) if isinstance(owner, torch.nn.Module) else None
    return Origin(code, module)


def _is_dynamo_wrapper(code: types.CodeType) -> bool:
    return code.co_name == "inner" and code.co_filename.replace("\\", "/").endswith(
        "torch/_dynamo/external_utils.py")


def _resume_codes(code: types.CodeType) -> Set[types.CodeType]:
    """Code objects dynamo generated to resume `code` after graph breaks (transitively)."""
    try:
        from torch._dynamo.resume_execution import ContinueExecutionCache
        table = ContinueExecutionCache.cache
    except Exception:
        return set()
    out: Set[types.CodeType] = set()
    todo = [code]
    while todo:
        c = todo.pop()
        for generated in list(table.get(c, {}).values()):
            if generated not in out:
                out.add(generated)
                todo.append(generated)
    return out


def codes_of(code: types.CodeType) -> Set[types.CodeType]:
    return {code} | _resume_codes(code)


__all__ = ["Origin", "current_origin", "codes_of"]
