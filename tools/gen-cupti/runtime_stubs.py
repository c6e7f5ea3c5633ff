"""The runtime functions librtrace.so interposes in libcudart.so (docs/runtime-api.md): the
exports named `cuda*` of `cudart-exports-13.0.88.txt` that have a CUPTI runtime callback id.
Imported by gen.py, which writes the two files rendered here:

- `inject/src/generated/runtime_ids.rs`: each stub's name, its callback id and whether the
  function returns a `cudaError_t` (from clang's parse of cuda_runtime_api.h), a leaf table;
- `inject/src/generated/runtime_stubs.rs`: one exported two-instruction stub per function, into
  the ABI-agnostic trampoline of `inject/src/generic.rs` (r11d = RUNTIME_STUB_BIT | index).

The two `__cudaLaunchKernel` entries nvcc's launch stubs call are interposed too, recorded as
the `cudaLaunchKernel` they implement (`ALIASES`). A function's callback id is the one whose name is the export's name with CUPTI's ABI suffix
(`_v7000`) dropped; where two ids share a name (`cudaStreamDestroy_v3020` and `_v5050`), the
higher, the newest ABI, which is the one a current libcudart exports.
"""

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPORTS = HERE / "cudart-exports-13.0.88.txt"
REPO = HERE.parent.parent
IDS_OUT = REPO / "inject" / "src" / "generated" / "runtime_ids.rs"
STUBS_OUT = REPO / "inject" / "src" / "generated" / "runtime_stubs.rs"
STUB_BIT = 0x8000_0000
NO_RESULT = 0x8000
# libcudart's internal entries that nvcc's host stubs call for `kernel<<<...>>>`, recorded as the
# function they implement: CUPTI reports their calls under that function's callback id
# (measured on the H200: vector_add's seven launches are seven cudaLaunchKernel_v7000 callbacks).
ALIASES = {
    "__cudaLaunchKernel": "cudaLaunchKernel",
    "__cudaLaunchKernel_ptsz": "cudaLaunchKernel_ptsz",
}


def exports():
    names = []
    for line in EXPORTS.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.append(line)
    return names


def stubs(cbid_names, result_types, error):
    """[(name, cbid, returns_error)] sorted by name: every `cuda*` export with a callback id.
    `result_types`: declared function name -> result type spelling (cuda_runtime_api.h)."""
    by_base = {}
    for cbid, name in enumerate(cbid_names):
        if name:
            base = re.sub(r"_v\d+$", "", name)
            by_base[base] = max(by_base.get(base, 0), cbid)
    out = []
    for name in sorted(set(exports()), key=lambda n: n.encode()):
        if not name.startswith("cuda") and name not in ALIASES:
            continue
        cbid = by_base.get(ALIASES.get(name, name))
        if cbid is None:
            raise error(f"{EXPORTS.name}: {name} has no CUPTI runtime callback id")
        base = re.sub(r"_(ptsz|ptds)$", "", ALIASES.get(name, name))
        result = result_types.get(name, result_types.get(base, "cudaError_t"))
        out.append((name, cbid, result == "cudaError_t"))
    if len(out) >= NO_RESULT:
        raise error("too many runtime stubs for a 15-bit index")
    return out


def render_ids(header, entries, rustfmt):
    out = [
        header,
        "//!\n",
        "//! The runtime functions librtrace.so interposes: libcudart.so.13's exports named `cuda*`\n",
        f"//! (tools/gen-cupti/{EXPORTS.name}), each with its CUPTI runtime callback id. A leaf\n",
        "//! table: `crate::generic` and `crate::cudart` read it without the stubs.\n\n",
        "// Unit tests run the trampoline against stand-ins that read only part of it.\n",
        "#![cfg_attr(test, allow(dead_code))]\n\n",
        "/// How many runtime functions there are; stub indexes run from 0 to `RUNTIME_STUB_COUNT - 1`.\n",
        f"pub const RUNTIME_STUB_COUNT: usize = {len(entries)};\n\n",
        "/// Bit 31 of a trampoline id (r11d): a runtime stub, its index in the bits below; driver\n",
        "/// function ids are far below it.\n",
        f"pub const RUNTIME_STUB_BIT: u32 = {STUB_BIT:#x};\n\n",
        "/// Set in a [`RUNTIME_STUB_CBIDS`] entry whose function returns no `cudaError_t`\n",
        "/// (`cudaGetErrorString`): its record's result is 0.\n",
        f"pub const NO_RESULT: u16 = {NO_RESULT:#x};\n\n",
        "/// Each stub's function name, NUL-terminated, by stub index (byte order).\n",
        f"pub static RUNTIME_STUB_NAMES: [&core::ffi::CStr; {len(entries)}] = [\n",
    ]
    out.extend(f'c"{n}",\n' for n, _, _ in entries)
    out.append("];\n\n")
    out.append("/// Each stub's CUPTI runtime callback id, with [`NO_RESULT`] where it applies.\n")
    out.append(f"pub static RUNTIME_STUB_CBIDS: [u16; {len(entries)}] = [\n")
    out.extend(f"{c | (0 if ok else NO_RESULT)},\n" for _, c, ok in entries)
    out.append("];\n")
    return rustfmt("".join(out), IDS_OUT.name)


STUB = """\
/// `{name}` (CUPTI runtime callback id {cbid}).
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn {name}() {{
    core::arch::naked_asm!(
        "cmp byte ptr [rip + {{interposing}}], 0",
        "jne 2f",
        "mov r11d, dword ptr [rip + {{last}} + {{last_at}}]",
        "test r11d, r11d",
        "jz 2f",
        "push rax",
        "lea rax, [r11 + r11 * 2]",
        "lea r11, [rip + {{callers}}]",
        "lea rax, [r11 + rax * 8 - 24]",
        "mov r11, qword ptr [rsp + 8]",
        "cmp r11, qword ptr [rax]",
        "jb 3f",
        "cmp r11, qword ptr [rax + 8]",
        "jae 3f",
        "mov rax, qword ptr [rax + 16]",
        "lea r11, [rip + {{targets}} + {{targets_at}}]",
        "mov r11, qword ptr [r11 + rax * 8]",
        "pop rax",
        "test r11, r11",
        "jz 2f",
        "jmp r11",
        "3:",
        "pop rax",
        "2:",
        "mov r11d, {{id}}",
        "jmp {{trampoline}}",
        interposing = sym crate::runtime_api::INTERPOSING,
        last = sym crate::cudart::LAST_CALLER,
        last_at = const {last_at},
        callers = sym crate::cudart::CALLER_TABLE,
        targets = sym crate::cudart::TARGETS,
        targets_at = const {targets_at},
        id = const {id:#x}_u32,
        trampoline = sym crate::generic::rtrace_generic_trampoline,
    )
}}
"""


def render_stubs(header, entries, rustfmt):
    out = [
        header,
        "//!\n",
        "//! The exported runtime stubs. While the stubs do not record (`crate::runtime_api::INTERPOSING`\n",
        "//! clear), a stub called from the caller it was last called from (`crate::cudart::LAST_CALLER`:\n",
        "//! the return address within that caller's range) jumps straight to that caller's libcudart\n",
        "//! function (`crate::cudart::TARGETS`), with r11, rax (saved on the stack and restored) and\n",
        "//! the flags as its only scratch. Otherwise it puts its index with RUNTIME_STUB_BIT in r11\n",
        "//! (free at a SysV function's entry) and jumps to `crate::generic::rtrace_generic_trampoline`,\n",
        "//! which records the call (or not) and runs libcudart's function with the argument\n",
        "//! registers and the stack as the caller left them.\n\n",
        "#![allow(non_snake_case, clippy::missing_safety_doc)]\n\n",
    ]
    for k, (name, cbid, _) in enumerate(entries):
        out.append(
            STUB.format(name=name, cbid=cbid, id=STUB_BIT | k, last_at=4 * k, targets_at=32 * k)
        )
        out.append("\n")
    out.append("/// Each stub's address, by stub index.\n#[allow(dead_code)] // for tests\n")
    out.append(f"pub static RUNTIME_STUB_ADDRESSES: [unsafe extern \"C\" fn(); {len(entries)}] = [\n")
    out.extend(f"{n},\n" for n, _, _ in entries)
    out.append("];\n")
    return rustfmt("".join(out), STUBS_OUT.name)


def result_types(tu, ci):
    """Function name -> result type spelling, for every `cuda*` function the parse declares."""
    return {
        c.spelling: c.result_type.spelling
        for c in tu.cursor.get_children()
        if c.kind == ci.CursorKind.FUNCTION_DECL and c.spelling.startswith("cuda")
    }


def outputs(version, regenerate, cbid_names, tu, ci, error, rustfmt):
    """[(path, text)] of the two files."""
    header = (
        "//! GENERATED by tools/gen-cupti/gen.py — do not edit.\n"
        f"//! From cuda_runtime_api.h and the CUPTI headers of {version}.\n"
        f"//! Regenerate from the repository root: `{regenerate}`\n"
    )
    entries = stubs(cbid_names, result_types(tu, ci), error)
    return [
        (IDS_OUT, render_ids(header, entries, rustfmt)),
        (STUBS_OUT, render_stubs(header, entries, rustfmt)),
    ]
