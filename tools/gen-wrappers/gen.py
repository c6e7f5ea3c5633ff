#!/usr/bin/env python3
"""Generate rtrace's CUDA driver wrappers (inject/src/generated/) from the CUDA headers.

Parses cuda.h with `__CUDA_API_VERSION_INTERNAL` defined, under which it declares every function
libcuda.so.1 exports under its exported name (`_v2` names, the legacy pre-v2 names and the
`_ptds`/`_ptsz` per-thread variants), together with cudaGL.h, cudaEGL.h, cudaVDPAU.h and the
profiler API. Every external `cu*` function gets an id (its index in the sorted list of names) and
an exported Rust wrapper with the C ABI of its declaration. The driver exports no header declares
(`unwrappable.txt`, their ABI unknown) get ids too and an exported assembly stub that enters the
ABI-agnostic recording trampoline of `inject/src/generic.rs`. See README.md beside this file.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from textwrap import dedent

import clang.cindex as ci

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SHIM_LIBC = HERE / "shim" / "libc"
SHIM_GFX = HERE / "shim" / "gfx"
DEFAULT_OUT = REPO / "inject" / "src" / "generated"
# Driver exports no header declares: wrapped by the ABI-agnostic trampoline (exact names).
OPAQUE_LIST = HERE / "unwrappable.txt"
# The `cu*` exports of the driver the headers are checked against (nm -D on the GPU machine).
DRIVER_EXPORTS = HERE / "driver-exports-580.159.04.txt"
REGENERATE = "tools/setup-cuda.sh && .venv/bin/python3 tools/gen-wrappers/gen.py"
TARGET = "x86_64-unknown-linux-gnu"

# What the generator parses, in this order (cudaVDPAU.h expects vdpau.h's types to be declared).
INPUT_HEADERS = [
    "cuda.h",
    "cudaGL.h",
    "cudaEGL.h",
    "vdpau/vdpau.h",
    "cudaVDPAU.h",
    "cudaProfilerTypedefs.h",
]

# Written by hand in crate::procaddr; they keep their ids but get no generated body and no
# entry in the generated wrapper table (procaddr::wrapper_address adds them).
HANDWRITTEN = ("cuGetProcAddress", "cuGetProcAddress_v2")
# The entry points that launch one kernel, its handle in parameter `f`: their wrappers run the
# real call through `crate::hook::launch`, which profiles it when kernel profiling chooses it.
LAUNCHES = (
    "cuLaunch",
    "cuLaunchCooperativeKernel",
    "cuLaunchCooperativeKernel_ptsz",
    "cuLaunchGrid",
    "cuLaunchGridAsync",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuLaunchKernelEx_ptsz",
    "cuLaunchKernel_ptsz",
)

# Wrapper modules by name prefix; the longest matching prefix wins, `context` takes the rest.
MODULES = [
    (
        "context",
        "Initialisation, devices, contexts, green contexts, checkpoints, logs, profiler.",
        [],
    ),
    ("graph", "CUDA graphs.", ["cuGraph", "cuUserObject"]),
    (
        "interop",
        "Graphics (GL, EGL, VDPAU) and external resource interoperability.",
        [
            "cuGraphics",
            "cuGL",
            "cuWGL",
            "cuEGL",
            "cuVDPAU",
            "cuExternal",
            "cuImport",
            "cuDestroyExternal",
            "cuSignalExternal",
            "cuWaitExternal",
        ],
    ),
    ("memcpy", "Copies and memsets.", ["cuMemcpy", "cuMemset"]),
    (
        "memory",
        "Allocation, virtual memory, pools, arrays, pointers, multicast, IPC.",
        ["cuMem", "cuArray", "cuMipmapped", "cuPointer", "cuMulticast", "cuIpc"],
    ),
    (
        "module",
        "Modules, libraries, kernels, functions, linking, occupancy, textures, surfaces.",
        [
            "cuModule",
            "cuLibrary",
            "cuKernel",
            "cuFunc",
            "cuLink",
            "cuOccupancy",
            "cuParam",
            "cuTex",
            "cuSurf",
            "cuTensor",
        ],
    ),
    ("stream", "Streams, events and launches.", ["cuStream", "cuEvent", "cuLaunch"]),
]
MODULE_SOFT_LIMIT_LINES = 3000

RUST_KEYWORDS = set(
    "as async await break const continue crate dyn else enum extern false fn for gen if impl in "
    "let loop match mod move mut pub ref return self Self static struct super trait true try type "
    "unsafe use where while abstract become box do final macro override priv typeof unsized "
    "virtual yield".split()
)
# Local names of a wrapper body; a parameter of the same name is renamed.
WRAPPER_LOCALS = {"real", "func", "token", "ret"}

TK = ci.TypeKind
SIGNED_INTS = {TK.CHAR_S, TK.SCHAR, TK.SHORT, TK.INT, TK.LONG, TK.LONGLONG}
UNSIGNED_INTS = {TK.CHAR_U, TK.UCHAR, TK.USHORT, TK.UINT, TK.ULONG, TK.ULONGLONG}
ARRAYS = {TK.CONSTANTARRAY, TK.INCOMPLETEARRAY, TK.VARIABLEARRAY, TK.DEPENDENTSIZEDARRAY}


class GenError(Exception):
    """Something the generator cannot handle faithfully; it stops rather than guess."""


# --- Locating the inputs ---------------------------------------------------------------------


def find_include_dir():
    env = os.environ.get("CUDA_INCLUDE")
    if env:
        candidates = [Path(env)]
    else:
        candidates = sorted(REPO.glob(".venv/lib/python3*/site-packages/nvidia/cu13/include"))
    for path in candidates:
        if (path / "cuda.h").is_file():
            return path.resolve()
    raise GenError(
        "no cuda.h: set CUDA_INCLUDE or run tools/setup-cuda.sh "
        f"(looked in {', '.join(map(str, candidates)) or REPO / '.venv'})"
    )


def load_libclang():
    """Use the shared library shipped inside the `clang` package (the PyPI `libclang` wheel)."""
    native = Path(ci.__file__).resolve().parent / "native"
    libs = sorted(native.glob("libclang*.so*"))
    if not libs:
        raise GenError(f"no libclang shared library in {native}; pip install libclang==18.1.1")
    ci.Config.set_library_file(str(libs[0]))


def cuda_version(include_dir):
    text = (include_dir / "cuda.h").read_text()
    match = re.search(r"^#define\s+CUDA_VERSION\s+(\d+)", text, re.M)
    if not match:
        raise GenError("cuda.h does not define CUDA_VERSION")
    value = int(match.group(1))
    return f"CUDA {value // 1000}.{value % 1000 // 10} (CUDA_VERSION {value})"


def parse(include_dir):
    source = "".join(f"#include <{h}>\n" for h in INPUT_HEADERS)
    args = [
        "-x",
        "c",
        "-std=c11",
        f"--target={TARGET}",
        # Hermetic: the shim stands in for the C library, so the host's headers do not matter.
        "-nostdinc",
        "-D__CUDA_API_VERSION_INTERNAL",
        f"-I{include_dir}",
        f"-I{SHIM_GFX}",
        f"-I{SHIM_LIBC}",
    ]
    tu = ci.Index.create().parse(
        "rtrace_gen_input.c", args=args, unsaved_files=[("rtrace_gen_input.c", source)]
    )
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        raise GenError("the headers do not parse:\n" + "\n".join(map(str, errors)))
    return tu


# --- Types -----------------------------------------------------------------------------------


def strip_sugar(t):
    while t.kind == TK.ELABORATED:
        t = t.get_named_type()
    return t


def is_size_t(t):
    """`size_t` maps to `usize` (the same ABI as `u64` here, but it says what it is)."""
    t = strip_sugar(t)
    while t.kind == TK.TYPEDEF:
        decl = t.get_declaration()
        if decl.spelling == "size_t":
            return True
        t = strip_sugar(decl.underlying_typedef_type)
    return False


@dataclass
class RecordField:
    name: str  # Rust field name
    rust_type: str
    c_decl: str  # for the doc comment
    c_name: str  # the C member name ('' for an anonymous member)
    offset: int  # bytes


@dataclass
class Record:
    rust_name: str
    is_union: bool
    c_type: str | None  # a C type expression naming it, for the C-side check
    c_spelling: str  # for the doc comment
    header: str
    size: int
    align: int
    repr: str
    fields: list = field(default_factory=list)
    users: list = field(default_factory=list)  # functions that take it by value


class TypeMapper:
    """Maps canonical clang types to Rust types with the same ABI on x86-64 Linux."""

    def __init__(self):
        self.records = {}  # USR -> Record, in dependency order (members before their parents)
        self.by_name = {}  # Rust name -> Record

    def scalar(self, t, where):
        """A non-aggregate type, or None for a record or array."""
        if is_size_t(t):
            return "usize"
        c = t.get_canonical()
        kind = c.kind
        if kind == TK.VOID:
            return "()"
        if kind in SIGNED_INTS or kind in UNSIGNED_INTS:
            bits = c.get_size() * 8
            if bits not in (8, 16, 32, 64):
                raise GenError(f"{where}: {bits}-bit integer {t.spelling}")
            return ("i" if kind in SIGNED_INTS else "u") + str(bits)
        if kind == TK.BOOL:
            return "bool"
        if kind == TK.FLOAT:
            return "f32"
        if kind == TK.DOUBLE:
            return "f64"
        if kind == TK.ENUM:
            return self.scalar(c.get_declaration().enum_type, where)
        if kind == TK.POINTER:
            const = c.get_pointee().is_const_qualified()
            return "*const c_void" if const else "*mut c_void"
        return None

    def param(self, t, where):
        """A parameter or return type; arrays decay to pointers, records pass by value."""
        rust = self.scalar(t, where)
        if rust is not None:
            return rust
        c = t.get_canonical()
        if c.kind in ARRAYS:
            const = c.element_type.is_const_qualified()
            return "*const c_void" if const else "*mut c_void"
        if c.kind == TK.RECORD:
            return self.record(c, where, name_hint=None, c_expr=None)
        raise GenError(f"{where}: cannot map {t.spelling!r} (canonical {c.spelling!r}, {c.kind})")

    def member(self, t, where, name_hint, c_expr):
        """A struct or union member: arrays keep their length, records are laid out inline."""
        rust = self.scalar(t, where)
        if rust is not None:
            return rust
        c = t.get_canonical()
        if c.kind == TK.CONSTANTARRAY:
            elem = self.member(c.element_type, where, name_hint, f"{c_expr}[0]")
            return f"[{elem}; {c.element_count}]"
        if c.kind == TK.RECORD:
            return self.record(c, where, name_hint, c_expr)
        raise GenError(
            f"{where}: cannot map member {t.spelling!r} (canonical {c.spelling!r}, {c.kind})"
        )

    def record(self, c, where, name_hint, c_expr):
        """The Rust name of a record type, generating it (and the records inside it) once.

        `c_expr` is a C expression of this type for the C-side check (unnamed records only)."""
        decl = c.get_declaration()
        usr = decl.get_usr()
        if usr in self.records:
            return self.records[usr].rust_name
        is_union = decl.kind == ci.CursorKind.UNION_DECL
        keyword = "union" if is_union else "struct"
        named = not decl.is_anonymous() and bool(decl.spelling) and "(" not in decl.spelling
        if named:
            rust_name = decl.spelling
            c_type = f"{keyword} {decl.spelling}"
            c_spelling = f"`{c_type}`"
            c_expr = f"(*({c_type} *)0)"
        elif name_hint:
            rust_name = name_hint
            c_type = f"__typeof__({c_expr})" if c_expr else None  # None: an anonymous member
            c_spelling = f"The unnamed {keyword} `{name_hint.replace('__', '.')}`"
        else:
            raise GenError(f"{where}: unnamed {keyword} passed by value")
        size, align = c.get_size(), c.get_align()
        if size <= 0 or align <= 0:
            raise GenError(f"{where}: incomplete {c.spelling} passed by value")
        fields = []
        for i, f in enumerate(decl.type.get_fields()):
            fwhere = f"{where}: {c.spelling}.{f.spelling or '<anonymous>'}"
            if f.is_bitfield():
                raise GenError(f"{fwhere}: bit-fields are not supported")
            fname = rust_ident(f.spelling) if f.spelling else f"anon{i}"
            member_expr = f"{c_expr}.{f.spelling}" if f.spelling and c_expr else None
            rust_type = self.member(f.type, fwhere, f"{rust_name}__{fname}", member_expr)
            offset_bits = f.get_field_offsetof()
            if offset_bits < 0 or offset_bits % 8:
                raise GenError(f"{fwhere}: unexpected offset {offset_bits} bits")
            c_decl = declarator(f.type.spelling, f.spelling)
            fields.append(RecordField(fname, rust_type, c_decl, f.spelling, offset_bits // 8))
        natural = max((f.type.get_align() for f in decl.type.get_fields()), default=1)
        if align > natural:
            repr_ = f"C, align({align})"
        elif align < natural:
            repr_ = f"C, packed({align})"
        else:
            repr_ = "C"
        header = Path(decl.location.file.name).name if decl.location.file else "?"
        rec = Record(rust_name, is_union, c_type, c_spelling, header, size, align, repr_, fields)
        if rust_name in self.by_name:
            raise GenError(f"{where}: two records named {rust_name}")
        self.records[usr] = self.by_name[rust_name] = rec
        return rust_name


def rust_ident(name):
    return name + "_" if name in RUST_KEYWORDS else name


def declarator(type_spelling, name):
    """A C declarator for the docs: (`int`, `x`) -> `int x`; (`int [3]`, `x`) -> `int x[3]`;
    (`void (*)(void *)`, `f`) -> `void (*f)(void *)`."""
    # clang spells an unnamed record with its location: `union (unnamed union at /path/x.h:1:2)`.
    type_spelling = re.sub(
        r"\((?:unnamed|anonymous) (struct|union) at [^)]*\)", "{ ... }", type_spelling
    )
    if not name:
        return type_spelling
    if "(*)" in type_spelling:
        return type_spelling.replace("(*)", f"(*{name})", 1)
    base, bracket, dims = type_spelling.partition("[")
    base = base.rstrip()
    sep = "" if base.endswith("*") else " "
    return f"{base}{sep}{name}{bracket}{dims}"


# --- Functions -------------------------------------------------------------------------------


@dataclass
class Param:
    name: str
    rust_type: str


@dataclass
class Function:
    name: str
    prototype: str | None  # the C prototype, for the doc comment (None: opaque)
    header: str | None
    params: list
    ret: str | None
    opaque: bool = False  # declared by no header: the ABI-agnostic trampoline records it


def in_dirs(cursor, dirs):
    f = cursor.location.file
    return f is not None and any(Path(f.name).resolve().is_relative_to(d) for d in dirs)


def collect(tu, include_dir, mapper):
    """Every external `cu*` function the headers declare, sorted by name, and the names skipped."""
    decls = {}
    for cursor in tu.cursor.get_children():
        if cursor.kind != ci.CursorKind.FUNCTION_DECL or not cursor.spelling.startswith("cu"):
            continue
        if not in_dirs(cursor, [include_dir, SHIM_GFX]):
            continue
        decls.setdefault(cursor.spelling, []).append(cursor)

    functions, skipped = [], {}
    for name in sorted(decls):
        cursors = decls[name]
        if not name.isascii():
            raise GenError(f"{name}: non-ASCII name")
        if any(
            c.is_definition()
            or c.storage_class == ci.StorageClass.STATIC
            or c.linkage != ci.LinkageKind.EXTERNAL
            for c in cursors
        ):
            skipped[name] = "defined in the header (static inline), not exported by the driver"
            continue
        signatures = {c.type.get_canonical().spelling for c in cursors}
        if len(signatures) > 1:
            raise GenError(f"{name}: declared with different signatures: {sorted(signatures)}")
        functions.append(function(cursors[0], mapper))
    check_shim_prototypes(tu, functions, decls)
    return functions, skipped


def function(cursor, mapper):
    name = cursor.spelling
    ftype = cursor.type.get_canonical()
    if ftype.kind != TK.FUNCTIONPROTO:
        raise GenError(f"{name}: declared without a prototype")
    if ftype.is_function_variadic():
        raise GenError(f"{name}: variadic, its arguments cannot be forwarded")
    params, c_params, used = [], [], set()
    for i, arg in enumerate(cursor.get_arguments()):
        where = f"{name}({arg.spelling or f'#{i}'})"
        rust_name = rust_ident(arg.spelling) if arg.spelling else f"arg{i}"
        while rust_name in WRAPPER_LOCALS or rust_name in used:
            rust_name += "_"
        used.add(rust_name)
        rust_type = mapper.param(arg.type, where)
        if rust_type == "()":
            raise GenError(f"{where}: void parameter")
        if rust_type in mapper.by_name:
            mapper.by_name[rust_type].users.append(f"{name}({arg.spelling})")
        params.append(Param(rust_name, rust_type))
        c_params.append(declarator(arg.type.spelling, arg.spelling))
    ret = mapper.param(cursor.result_type, f"{name} result")
    if ret.startswith("*") or ret in mapper.by_name:
        raise GenError(
            f"{name}: returns {cursor.result_type.spelling}; only integers and void are handled"
        )
    prototype = f"{cursor.result_type.spelling} {name}({', '.join(c_params) or 'void'})"
    header = Path(cursor.location.file.name).name
    return Function(name, prototype, header, params, ret)


def names_from_file(path):
    """One name per line; blank lines and `#` comments are skipped (as tools/check-coverage.py)."""
    names = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


def opaque_functions(declared):
    """The exports of `unwrappable.txt`, checked against the headers and the driver's exports.

    Every `cu*` export of the driver must be declared by the headers or listed there, and every
    name listed must be an export the headers do not declare."""
    rel = OPAQUE_LIST.relative_to(REPO)
    names = names_from_file(OPAQUE_LIST)
    for name in names:
        if not re.fullmatch(r"cu[A-Za-z0-9_]*", name):
            raise GenError(f"{rel}: {name!r} is not a `cu*` name (exact names only, no patterns)")
    if len(set(names)) != len(names):
        raise GenError(f"{rel}: listed twice: {sorted({n for n in names if names.count(n) > 1})}")
    now_declared = sorted(set(names) & declared)
    if now_declared:
        raise GenError(
            f"{rel}: declared by the headers, so wrapped with their ABI; remove {now_declared}"
        )
    exports = {n for n in names_from_file(DRIVER_EXPORTS) if n.startswith("cu")}
    not_exported = sorted(set(names) - exports)
    if not_exported:
        raise GenError(f"{rel}: not exported by the driver ({DRIVER_EXPORTS.name}): {not_exported}")
    uncovered = sorted(exports - declared - set(names))
    if uncovered:
        raise GenError(
            f"driver exports ({DRIVER_EXPORTS.name}) that no header declares and {rel} does not "
            f"list: {uncovered}"
        )
    return [Function(n, None, None, [], None, opaque=True) for n in sorted(names)]


def check_shim_prototypes(tu, functions, decls):
    """Functions the shim declares must match a `PFN_<name>_v<N>` typedef of NVIDIA's headers."""
    pfn = {}
    for cursor in tu.cursor.get_children():
        match = re.fullmatch(r"PFN_(cu\w+?)_v\d+", cursor.spelling)
        if cursor.kind == ci.CursorKind.TYPEDEF_DECL and match:
            pointee = cursor.underlying_typedef_type.get_canonical().get_pointee()
            pfn.setdefault(match.group(1), set()).add(pointee.spelling)
    for f in functions:
        cursor = decls[f.name][0]
        if not in_dirs(cursor, [SHIM_GFX]):
            continue
        if cursor.type.get_canonical().spelling not in pfn.get(f.name, set()):
            raise GenError(f"{f.name}: the shim's prototype matches no PFN_{f.name}_v* typedef")


def module_of(name):
    best, best_len = "context", 0
    for module, _, prefixes in MODULES:
        for prefix in prefixes:
            if name.startswith(prefix) and len(prefix) > best_len:
                best, best_len = module, len(prefix)
    return best


# --- Rust output -----------------------------------------------------------------------------
#
# The templates are filled in and then run through rustfmt, so they need not be laid out.


def file_header(version, what):
    return dedent(f"""\
        //! GENERATED by tools/gen-wrappers/gen.py from cuda.h of {version} — do not edit.
        //! Regenerate from the repository root: `{REGENERATE}`
        //!
        //! {what}
        """)


MOD_TEMPLATE = """\
//!
//! cuda.h, cudaGL.h, cudaEGL.h, cudaVDPAU.h and the profiler API, parsed with
//! `__CUDA_API_VERSION_INTERNAL` so that each function appears under the name the driver exports
//! (`_v2` names, the legacy names, the `_ptds`/`_ptsz` variants). A function's id is its index in
//! [`id::FUNCTION_NAMES`] (sorted, byte order; the id table is a leaf, `id.rs`, so that the code
//! below the wrappers reads it without importing them). Each wrapper looks up the real function with
//! `crate::hook::real(id)`, brackets the call with `crate::hook::begin`/`end` and returns the
//! driver's result unchanged; [`HANDWRITTEN`] functions live in `crate::procaddr` instead.
//!
//! [`OPAQUE`] functions are driver exports no header declares (listed in
//! tools/gen-wrappers/unwrappable.txt): their ABI is unknown, so each is an exported
//! two-instruction stub in `generic_stubs` that enters the ABI-agnostic recording trampoline of
//! `crate::generic` (x86-64 only). They have ids and names here like every other function.

// The driver's C names, parameter names and types are kept as cuda.h spells them.
#![allow(non_snake_case, non_camel_case_types, non_upper_case_globals)]
// The wrappers are `unsafe extern "C"` with the driver's own contract (cuda.h), not a Rust one.
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use core::ffi::c_void;

pub mod id;
pub mod types;

{modules}
#[cfg(target_arch = "x86_64")]
mod generic_stubs;

/// The functions written by hand in `crate::procaddr` rather than generated here.
#[allow(dead_code)] // for tests and tools; the hand-written code need not name it
pub const HANDWRITTEN: [&str; {handwritten_count}] = [{handwritten}];

/// The driver exports no header declares, recorded by the ABI-agnostic trampoline
/// (`crate::generic`) through the stubs in `generic_stubs`.
#[allow(dead_code)] // for tests and tools
pub const OPAQUE: [&str; {opaque_count}] = [{opaque}];

/// The address of the exported wrapper for function `id` (what cuGetProcAddress/dlsym hand
/// out), or null for an id out of range or a [`HANDWRITTEN`] function, whose address
/// `crate::procaddr::wrapper_address` adds (so that this table names nothing above it).
pub fn wrapper_address(id: usize) -> *mut c_void {{
    match id {{
{arms}
        _ => core::ptr::null_mut(),
    }}
}}

#[cfg(test)]
mod tests {{
    use super::id::{{function_id, FUNCTION_COUNT, FUNCTION_NAMES}};
    use super::*;

    #[test]
    fn names_are_sorted_and_ids_round_trip() {{
        assert!(FUNCTION_NAMES.windows(2).all(|w| w[0].as_bytes() < w[1].as_bytes()));
        for (i, name) in FUNCTION_NAMES.iter().enumerate() {{
            assert_eq!(function_id(name.as_bytes()), Some(i as u32), "{{name}}");
            let stub = cfg!(target_arch = "x86_64") || !OPAQUE.contains(name);
            let here = stub && !HANDWRITTEN.contains(name);
            assert_eq!(wrapper_address(i).is_null(), !here, "{{name}}");
        }}
        assert_eq!(function_id(b"cuNoSuchFunction"), None);
        assert_eq!(function_id(b""), None);
        assert!(wrapper_address(FUNCTION_COUNT).is_null());
        assert_eq!(id::cuInit, function_id(b"cuInit").unwrap());
        for name in HANDWRITTEN {{
            assert!(function_id(name.as_bytes()).is_some(), "{{name}}");
        }}
        for name in OPAQUE {{
            assert!(function_id(name.as_bytes()).is_some(), "{{name}}");
            assert!(!HANDWRITTEN.contains(&name), "{{name}}");
        }}
    }}
}}
"""


def render_mod(version, functions, modules):
    what = (
        "The CUDA driver API as libcuda.so.1 exports it: one exported wrapper per `cu*` function."
    )
    arms = []
    for i, f in enumerate(functions):
        if f.opaque:
            arms.append(
                f'#[cfg(target_arch = "x86_64")]\n{i} => generic_stubs::{f.name} as *mut c_void,'
            )
            continue
        if f.name in HANDWRITTEN:
            continue
        arms.append(f"{i} => {module_of(f.name)}::{f.name} as *mut c_void,")
    opaque = [f.name for f in functions if f.opaque]
    return file_header(version, what) + MOD_TEMPLATE.format(
        modules="\n".join(f"mod {m};" for m, _, _ in MODULES if m in modules),
        handwritten_count=len(HANDWRITTEN),
        handwritten=", ".join(f'"{h}"' for h in sorted(HANDWRITTEN)),
        opaque_count=len(opaque),
        opaque=", ".join(f'"{n}"' for n in opaque),
        arms="\n".join(arms),
    )


IDS_TEMPLATE = """\
/// How many functions there are; ids run from 0 to `FUNCTION_COUNT - 1`.
pub const FUNCTION_COUNT: usize = {count};

/// The exported name of each function, sorted in byte order; the index is the id.
pub static FUNCTION_NAMES: [&str; FUNCTION_COUNT] = [
{names}
];

/// The id of the function exported as `name`, if it is one of ours (binary search, no allocation).
pub fn function_id(name: &[u8]) -> Option<u32> {{
    FUNCTION_NAMES.binary_search_by(|probe| probe.as_bytes().cmp(name)).ok().map(|id| id as u32)
}}

"""


def render_ids(version, functions):
    what = "The id of each function, by its exported name: its index in `FUNCTION_NAMES`."
    out = [file_header(version, what)]
    out.append("\n// For hand-written code and tests; the wrappers use the numbers.\n")
    out.append("#![allow(dead_code)]\n\n")
    out.append(IDS_TEMPLATE.format(
        count=len(functions),
        names="\n".join(f'"{f.name}",' for f in functions),
    ))
    out.extend(f"/// `{f.name}`\npub const {f.name}: u32 = {i};\n" for i, f in enumerate(functions))
    return "".join(out)


def render_types(version, records):
    what = "The structs and unions the driver API passes by value, laid out as clang lays them out."
    out = [file_header(version, what), "\n"]
    if any("c_void" in f.rust_type for rec in records for f in rec.fields):
        out.append("use core::ffi::c_void;\n\n")
    for rec in records:
        name = rec.rust_name
        out.append(
            f"/// {rec.c_spelling} ({rec.header}), {rec.size} bytes, aligned to {rec.align}.\n"
        )
        if rec.users:
            out.append(f"/// Passed by value to {', '.join(f'`{u}`' for u in rec.users)}.\n")
        out.append(f"#[repr({rec.repr})]\n#[derive(Clone, Copy)]\n")
        out.append(f"pub {'union' if rec.is_union else 'struct'} {name} {{\n")
        out.extend(f"/// `{f.c_decl}`\npub {f.name}: {f.rust_type},\n" for f in rec.fields)
        out.append("}\n\n")
        out.append(f"const _: () = assert!(core::mem::size_of::<{name}>() == {rec.size});\n")
        out.append(f"const _: () = assert!(core::mem::align_of::<{name}>() == {rec.align});\n")
        if not rec.is_union:
            out.extend(
                f"const _: () = assert!(core::mem::offset_of!({name}, {f.name}) == {f.offset});\n"
                for f in rec.fields
            )
        out.append("\n")
    return "".join(out)


WRAPPER_TEMPLATE = """\
/// `{prototype}`
#[no_mangle]
pub unsafe extern "C" fn {name}({params}){ret_sig} {{
    let real = crate::hook::real({id});
    if real.is_null() {{
        {on_missing}
    }}
    // SAFETY: `real` is the driver's own `{name}`; this signature is its ABI as declared in \
{header}.
    let func: unsafe extern "C" fn({types}){ret_sig} = unsafe {{ core::mem::transmute(real) }};
    let token = crate::hook::begin({id});
    // SAFETY: the arguments are passed through unchanged from our caller.
    {bind}unsafe {{ func({args}) }};
    crate::hook::end(token, {recorded});
    {tail}
}}
"""


LAUNCH_TEMPLATE = """\
/// `{prototype}`
#[no_mangle]
pub unsafe extern "C" fn {name}({params}) -> u32 {{
    let real = crate::hook::real({id});
    if real.is_null() {{
        return crate::hook::MISSING_RESULT;
    }}
    // SAFETY: `real` is the driver's own `{name}`; this signature is its ABI as declared in \
{header}.
    let func: unsafe extern "C" fn({types}) -> u32 = unsafe {{ core::mem::transmute(real) }};
    let token = crate::hook::begin({id});
    // SAFETY: the arguments are passed through unchanged from our caller (exactly once).
    let ret = crate::hook::launch(&token, f, || unsafe {{ func({args}) }});
    crate::hook::end(token, ret);
    ret
}}
"""


def wrapper(f, fid):
    if f.name in LAUNCHES:
        if f.ret != "u32" or not any(p.name == "f" for p in f.params):
            sys.exit(f"{f.name}: a launch must return CUresult and take the function as `f`")
        return LAUNCH_TEMPLATE.format(
            prototype=f.prototype,
            name=f.name,
            header=f.header,
            id=fid,
            params=", ".join(f"{p.name}: {p.rust_type}" for p in f.params),
            types=", ".join(p.rust_type for p in f.params),
            args=", ".join(p.name for p in f.params),
        )
    if f.ret == "()":
        on_missing, recorded, bind, tail = "return;", "0", "", ""
    elif f.ret == "u32":
        on_missing, recorded = "return crate::hook::MISSING_RESULT;", "ret"
        bind, tail = "let ret = ", "ret"
    elif re.fullmatch(r"[iu](8|16|32|64)|usize", f.ret):
        on_missing = f"return crate::hook::MISSING_RESULT as {f.ret};"
        recorded, bind, tail = "ret as u32", "let ret = ", "ret"
    else:
        on_missing, recorded = f"return 0 as {f.ret};", "0"
        bind, tail = "let ret = ", "ret"
    return WRAPPER_TEMPLATE.format(
        prototype=f.prototype,
        name=f.name,
        header=f.header,
        id=fid,
        params=", ".join(f"{p.name}: {p.rust_type}" for p in f.params),
        types=", ".join(p.rust_type for p in f.params),
        args=", ".join(p.name for p in f.params),
        ret_sig="" if f.ret == "()" else f" -> {f.ret}",
        on_missing=on_missing,
        recorded=recorded,
        bind=bind,
        tail=tail,
    )


STUB_TEMPLATE = """\
/// `{name}`: exported by the driver, declared by no header.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn {name}() {{
    core::arch::naked_asm!(
        "mov r11d, {{id}}",
        "jmp {{trampoline}}",
        id = const {id},
        trampoline = sym crate::generic::rtrace_generic_trampoline,
    )
}}
"""


def render_stubs(version, entries):
    what = "Stubs for the driver exports no header declares (tools/gen-wrappers/unwrappable.txt)."
    more = dedent("""\
        //!
        //! Their ABI is unknown. Each stub puts its function id in r11 (free at a SysV function's
        //! entry) and jumps to `crate::generic::rtrace_generic_trampoline`, which records the call
        //! and runs the real function with the argument registers and the stack as the caller left
        //! them.
        """)
    out = [file_header(version, what), more, "\n"]
    out.append("\n".join(STUB_TEMPLATE.format(name=f.name, id=fid) for f, fid in entries))
    return "".join(out)


def render_module(version, doc, entries, records):
    rust_types = {t for f, _ in entries for t in [f.ret] + [p.rust_type for p in f.params]}
    out = [file_header(version, f"Wrappers: {doc}"), "\n"]
    if any("c_void" in t for t in rust_types):
        out.append("use core::ffi::c_void;\n\n")
    used_records = sorted(rust_types & {r.rust_name for r in records})
    if used_records:
        out.append(f"use super::types::{{{', '.join(used_records)}}};\n\n")
    out.append("\n".join(wrapper(f, fid) for f, fid in entries))
    return "".join(out)


def rustfmt(text, name):
    exe = shutil.which("rustfmt")
    if exe is None:
        raise GenError("rustfmt not found; the generated files are kept rustfmt-clean")
    proc = subprocess.run(
        [exe, "--edition", "2021", "--emit", "stdout"], input=text, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise GenError(f"rustfmt failed on {name}:\n{proc.stderr}")
    return proc.stdout


def render(version, functions, records):
    ids = {f.name: i for i, f in enumerate(functions)}
    by_module, opaque = {}, []
    for f in functions:
        if f.opaque:
            opaque.append((f, ids[f.name]))
        elif f.name not in HANDWRITTEN:
            by_module.setdefault(module_of(f.name), []).append((f, ids[f.name]))
    files = {
        "mod.rs": render_mod(version, functions, by_module),
        "id.rs": render_ids(version, functions),
        "types.rs": render_types(version, records),
    }
    for module, doc, _ in MODULES:
        if module in by_module:
            files[f"{module}.rs"] = render_module(version, doc, by_module[module], records)
    if opaque:
        files["generic_stubs.rs"] = render_stubs(version, opaque)
    return {name: rustfmt(text, name) for name, text in files.items()}


# --- C-side layout check ---------------------------------------------------------------------


def c_layout_check(include_dir, records):
    """Compile the records' sizes, alignments and offsets against the headers with gcc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        print("note: gcc not found, skipped the C-side layout check", file=sys.stderr)
        return
    lines = ["#include <stddef.h>"] + [f"#include <{h}>" for h in INPUT_HEADERS]
    for rec in records:
        t = rec.c_type
        if t is None:
            continue  # the type of an anonymous member has no C name; its parent's checks cover it
        lines.append(f'_Static_assert(sizeof({t}) == {rec.size}, "size of {rec.rust_name}");')
        lines.append(
            f'_Static_assert(_Alignof({t}) == {rec.align}, "alignment of {rec.rust_name}");'
        )
        for f in rec.fields:
            if f.c_name:
                lines.append(
                    f"_Static_assert(offsetof({t}, {f.c_name}) == {f.offset}, "
                    f'"offset of {rec.rust_name}.{f.name}");'
                )
    with tempfile.NamedTemporaryFile("w", suffix=".c") as src:
        src.write("\n".join(lines) + "\n")
        src.flush()
        # The GL/EGL/VDPAU shim stands in for headers the host may lack; the C library is the
        # host's.
        cmd = [
            gcc,
            "-std=gnu11",
            "-fsyntax-only",
            "-D__CUDA_API_VERSION_INTERNAL",
            f"-I{include_dir}",
            f"-I{SHIM_GFX}",
            src.name,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise GenError(f"gcc disagrees with the layouts clang gave:\n{proc.stderr}")


# --- Main ------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="output directory (default: inject/src/generated)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the files in --out are not what would be generated",
    )
    args = parser.parse_args()

    include_dir = find_include_dir()
    load_libclang()
    version = cuda_version(include_dir)
    tu = parse(include_dir)
    mapper = TypeMapper()
    functions, skipped = collect(tu, include_dir, mapper)
    missing_handwritten = set(HANDWRITTEN) - {f.name for f in functions}
    if missing_handwritten:
        raise GenError(
            f"hand-written functions not declared by the headers: {sorted(missing_handwritten)}"
        )
    functions = sorted(
        functions + opaque_functions({f.name for f in functions}),
        key=lambda f: f.name.encode(),
    )
    records = list(mapper.records.values())
    c_layout_check(include_dir, records)
    files = render(version, functions, records)

    for name, text in files.items():
        lines = text.count("\n")
        if lines > MODULE_SOFT_LIMIT_LINES:
            print(f"note: {name} has {lines} lines; consider splitting MODULES", file=sys.stderr)

    if args.check:
        stale = [
            n
            for n, t in files.items()
            if not (args.out / n).is_file() or (args.out / n).read_text() != t
        ]
        # Files another generator wrote (tools/gen-cupti writes cupti.rs here) are not ours.
        extra = [
            p.name
            for p in args.out.glob("*.rs")
            if p.name not in files
            and p.read_text().startswith("//! GENERATED by tools/gen-wrappers/gen.py")
        ]
        if stale or extra:
            print(f"out of date: {', '.join(sorted(stale + extra))}; run `{REGENERATE}`")
            return 1
        print(f"up to date: {len(functions)} functions")
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.rs"):
        if old.name not in files and old.read_text().startswith(
            "//! GENERATED by tools/gen-wrappers/gen.py"
        ):
            old.unlink()
    for name, text in files.items():
        (args.out / name).write_text(text)

    per_thread = sum(f.name.endswith(("_ptds", "_ptsz")) for f in functions)
    opaque = sum(f.opaque for f in functions)
    print(
        f"{len(functions)} functions ({per_thread} _ptds/_ptsz, {len(HANDWRITTEN)} hand-written, "
        f"{opaque} opaque) from {version} -> {args.out}"
    )
    for rec in records:
        if rec.users:
            print(f"by value: {rec.c_spelling} ({rec.size} bytes): {', '.join(rec.users)}")
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GenError as e:
        print(f"gen.py: error: {e}", file=sys.stderr)
        sys.exit(1)
