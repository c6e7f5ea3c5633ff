#!/usr/bin/env python3
"""Generate inject/src/generated/cupti.rs: CUPTI 13 constants and activity-record layouts.

Parses cupti_activity.h (with cupti_result.h, cupti_version.h and cupti_driver_cbid.h) with
libclang, as tools/gen-wrappers/gen.py parses cuda.h, and writes plain Rust constants: the values
of the enums and macros rtrace needs, the driver API callback ids, and, for each activity record
rtrace reads, its size and every field's byte offset and width, taken from clang's layout of the
`packed, aligned(8)` structs (not from Rust's layout rules). gcc then checks every number against
the real headers (`_Static_assert`s, plus a small program run for the bit-fields). The output has
no dependencies, so any crate can `include!` it or reach it with `#[path]`. See README.md beside
this file.
"""

import argparse
import ctypes
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_OUT = REPO / "inject" / "src" / "generated" / "cupti.rs"
# The runtime API's function names by callback id, in the format crate (the collector names
# runtime API records from it).
RUNTIME_OUT = REPO / "inject" / "format" / "src" / "generated" / "runtime_api.rs"
REGENERATE = "tools/setup-cuda.sh && .venv/bin/python3 tools/gen-cupti/gen.py"
# Headers the CUPTI headers include that tools/gen-wrappers/shim/libc lacks (limits.h, string.h).
SHIM = HERE / "shim"


def _load_wrappers_gen():
    """tools/gen-wrappers/gen.py as a module (the libclang setup, the hermetic parse arguments,
    rustfmt and the error type are shared)."""
    path = REPO / "tools" / "gen-wrappers" / "gen.py"
    spec = importlib.util.spec_from_file_location("rtrace_gen_wrappers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


W = _load_wrappers_gen()
sys.path.insert(0, str(HERE))
import runtime_stubs  # noqa: E402  (beside this file)

ci = W.ci
TK = ci.TypeKind
GenError = W.GenError

INPUT_HEADERS = [
    "cupti_activity.h",
    "cupti_version.h",
    "cupti_driver_cbid.h",
    "cupti_runtime_cbid.h",
    # The runtime functions' result types, for the interposed runtime's stubs (runtime_stubs.py).
    "cuda_runtime_api.h",
]

# The records rtrace reads: (C typedef name, Rust module name).
RECORDS = [
    ("CUpti_Activity", "activity"),
    ("CUpti_ActivityKernel10", "kernel10"),
    ("CUpti_ActivityMemcpy6", "memcpy6"),
    ("CUpti_ActivityMemset4", "memset4"),
    ("CUpti_ActivityExternalCorrelation", "external_correlation"),
    ("CUpti_ActivityAPI", "api"),
    ("CUpti_ActivityMemory4", "memory4"),
    ("CUpti_ActivitySynchronization2", "synchronization2"),
    ("CUpti_ActivityMemcpyPtoP4", "memcpy_ptop4"),
    ("CUpti_ActivityContext3", "context3"),
    ("CUpti_ActivityStream", "stream"),
    ("CUpti_ActivityFunction", "function"),
    ("CUpti_ActivityModule", "module"),
    # What a callback-API subscriber receives for a driver call (cupti_callbacks.h).
    ("CUpti_CallbackData", "callback_data"),
    # ... and for a resource callback (context, stream, module), with a module's own data.
    ("CUpti_ResourceData", "resource_data"),
    ("CUpti_ModuleResourceData", "module_resource_data"),
]

# Enums by typedef name: None emits every enumerator (but `*_FORCE_INT`), a list only those.
ENUMS = [
    (
        "CUpti_ActivityKind",
        [
            "CUPTI_ACTIVITY_KIND_INVALID",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET",
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_DRIVER",
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            "CUPTI_ACTIVITY_KIND_CONTEXT",
            "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL",
            "CUPTI_ACTIVITY_KIND_MEMCPY2",
            "CUPTI_ACTIVITY_KIND_FUNCTION",
            "CUPTI_ACTIVITY_KIND_MODULE",
            "CUPTI_ACTIVITY_KIND_STREAM",
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
            "CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION",
            "CUPTI_ACTIVITY_KIND_MEMORY2",
            "CUPTI_ACTIVITY_KIND_COUNT",
        ],
    ),
    ("CUpti_ActivityMemcpyKind", None),
    ("CUpti_ActivityMemoryKind", None),
    ("CUpti_ActivityMemoryOperationType", None),
    ("CUpti_ActivityMemoryPoolType", None),
    ("CUpti_ActivitySynchronizationType", None),
    ("CUpti_ExternalCorrelationKind", None),
    ("CUpti_ActivityFlag", None),
    ("CUpti_ChannelType", None),
    ("CUpti_ActivityPartitionedGlobalCacheConfig", None),
    ("CUpti_ActivityLaunchType", None),
    ("CUpti_FuncShmemLimitConfig", None),
    ("CUptiResult", None),
    ("CUpti_ActivityComputeApiKind", None),
    ("CUpti_ActivityStreamFlag", None),
    ("CUpti_ContextCigMode", None),
    ("CUpti_CallbackDomain", None),
    ("CUpti_ApiCallbackSite", None),
    ("CUpti_CallbackIdResource", None),
]

# Macros: (name, Rust type).
MACROS = [
    ("CUPTI_API_VERSION", "u32"),
    ("CUPTI_TIMESTAMP_UNKNOWN", "u64"),
    ("CUPTI_INVALID_CONTEXT_ID", "u32"),
    ("CUPTI_INVALID_STREAM_ID", "u32"),
    ("CUPTI_SYNCHRONIZATION_INVALID_VALUE", "u32"),
]

# The enum whose enumerator names become a lookup table (cuptiGetResultString needs them).
NAMED_ENUM = "CUptiResult"
# The driver API callback ids, as a table sorted by function name.
CBID_ENUM = "CUpti_driver_api_trace_cbid"
CBID_PREFIX = "CUPTI_DRIVER_TRACE_CBID_"
CBID_SKIP = {"CUPTI_DRIVER_TRACE_CBID_INVALID", "CUPTI_DRIVER_TRACE_CBID_SIZE"}
RUNTIME_CBID_ENUM = "CUpti_runtime_api_trace_cbid"
RUNTIME_CBID_PREFIX = "CUPTI_RUNTIME_TRACE_CBID_"

RUST_INTS = {(1, False): "u8", (2, False): "u16", (4, False): "u32", (8, False): "u64"}
RUST_INTS.update({(1, True): "i8", (2, True): "i16", (4, True): "i32", (8, True): "i64"})


# --- Parsing ---------------------------------------------------------------------------------


def find_include_dir():
    include = W.find_include_dir()
    if not (include / "cupti_activity.h").is_file():
        raise GenError(
            f"no cupti_activity.h in {include}: run tools/setup-cuda.sh (it installs "
            "nvidia-cuda-cupti) or point CUDA_INCLUDE at a directory holding the CUPTI headers"
        )
    return include


def macro_probe_name(name):
    return f"rtrace_macro_{name}"


def parse(include_dir):
    source = "".join(f"#include <{h}>\n" for h in INPUT_HEADERS)
    # Each macro's value becomes a variable initialiser that clang can evaluate.
    source += "".join(
        f"static const unsigned long long {macro_probe_name(m)} = (unsigned long long)({m});\n"
        for m, _ in MACROS
    )
    args = [
        "-x",
        "c",
        "-std=c11",
        f"--target={W.TARGET}",
        "-nostdinc",
        f"-I{include_dir}",
        f"-I{SHIM}",
        f"-I{W.SHIM_LIBC}",
    ]
    tu = ci.Index.create().parse(
        "rtrace_gen_cupti.c", args=args, unsaved_files=[("rtrace_gen_cupti.c", source)]
    )
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        raise GenError("the headers do not parse:\n" + "\n".join(map(str, errors)))
    return tu


def evaluate_unsigned(cursor):
    """The value of a variable's constant initialiser (clang_Cursor_Evaluate)."""
    lib = ci.conf.lib
    lib.clang_Cursor_Evaluate.argtypes = [ci.Cursor]
    lib.clang_Cursor_Evaluate.restype = ctypes.c_void_p
    lib.clang_EvalResult_getKind.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getKind.restype = ctypes.c_int
    lib.clang_EvalResult_getAsUnsigned.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsUnsigned.restype = ctypes.c_ulonglong
    lib.clang_EvalResult_dispose.argtypes = [ctypes.c_void_p]
    result = lib.clang_Cursor_Evaluate(cursor)
    if not result:
        raise GenError(f"{cursor.spelling}: not a constant")
    try:
        if lib.clang_EvalResult_getKind(result) != 1:  # CXEval_Int
            raise GenError(f"{cursor.spelling}: not an integer constant")
        return lib.clang_EvalResult_getAsUnsigned(result)
    finally:
        lib.clang_EvalResult_dispose(result)


# --- Enums and macros ------------------------------------------------------------------------


@dataclass
class Enum:
    c_name: str
    rust_type: str
    values: list  # (enumerator name, value)


def typedefs(tu):
    return {
        c.spelling: c
        for c in tu.cursor.get_children()
        if c.kind == ci.CursorKind.TYPEDEF_DECL
    }


def enum_of(typedef_cursor):
    t = W.strip_sugar(typedef_cursor.underlying_typedef_type).get_canonical()
    if t.kind != TK.ENUM:
        raise GenError(f"{typedef_cursor.spelling} is not an enum")
    return t.get_declaration()


def collect_enum(tds, c_name, wanted):
    if c_name not in tds:
        raise GenError(f"no typedef {c_name}")
    decl = enum_of(tds[c_name])
    underlying = decl.enum_type.get_canonical()
    signed = underlying.kind in W.SIGNED_INTS
    rust_type = RUST_INTS[(underlying.get_size(), signed)]
    values = [
        (e.spelling, e.enum_value)
        for e in decl.get_children()
        if e.kind == ci.CursorKind.ENUM_CONSTANT_DECL
    ]
    if wanted is None:
        values = [(n, v) for n, v in values if not n.endswith("_FORCE_INT")]
    else:
        known = dict(values)
        missing = [n for n in wanted if n not in known]
        if missing:
            raise GenError(f"{c_name} lacks {missing}")
        values = [(n, known[n]) for n in wanted]
    for name, value in values:
        if value < 0 and not signed:
            raise GenError(f"{name} = {value} in an unsigned enum")
    return Enum(c_name, rust_type, values)


def collect_macros(tu):
    found = {}
    for cursor in tu.cursor.get_children():
        if cursor.kind == ci.CursorKind.VAR_DECL and cursor.spelling.startswith("rtrace_macro_"):
            found[cursor.spelling] = evaluate_unsigned(cursor)
    out = []
    for name, rust_type in MACROS:
        value = found[macro_probe_name(name)]
        bits = int(rust_type[1:])
        if value >= 1 << bits:
            raise GenError(f"{name} = {value} does not fit {rust_type}")
        out.append((name, rust_type, value))
    return out


# --- Record layouts --------------------------------------------------------------------------


@dataclass
class Field:
    const: str  # Rust constant name (offset); `<const>_LEN` is the width
    c_path: str  # member designator for offsetof, e.g. `cacheConfig.both`
    c_decl: str  # the C declaration, for the doc comment
    offset: int  # bytes from the start of the record
    length: int  # bytes
    bit_shift: int | None = None  # bit-fields: first bit within [offset, offset + length)
    bit_width: int | None = None


@dataclass
class RecordLayout:
    c_name: str
    module: str
    size: int
    align: int
    fields: list


def screaming(name):
    """`registersPerThread` -> `REGISTERS_PER_THREAD`, `channelID` -> `CHANNEL_ID`,
    `localMemoryTotal_v2` -> `LOCAL_MEMORY_TOTAL_V2`."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    s = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", s)
    return s.upper()


def join_name(prefix, component):
    """Appends a path component, dropping it where the name already ends with it
    (`cacheConfig.config` -> `CACHE_CONFIG`, not `CACHE_CONFIG_CONFIG`)."""
    if not prefix:
        return component
    if prefix == component or prefix.endswith("_" + component):
        return prefix
    return f"{prefix}_{component}"


def walk(record_type, where, base_bits, prefix, c_prefix, out):
    """Appends every field of `record_type` (recursively), with offsets from clang."""
    for f in record_type.get_fields():
        fwhere = f"{where}.{f.spelling or '<anonymous>'}"
        bits = base_bits + f.get_field_offsetof()
        if f.spelling:
            name = join_name(prefix, screaming(f.spelling))
            c_path = f"{c_prefix}.{f.spelling}" if c_prefix else f.spelling
        else:  # an anonymous struct/union member: its fields belong to the parent
            name, c_path = prefix, c_prefix
        ftype = f.type.get_canonical()
        if f.is_bitfield():
            width = f.get_bitfield_width()
            first, last = bits // 8, (bits + width - 1) // 8
            out.append(
                Field(
                    name,
                    c_path,
                    W.declarator(f.type.spelling, f.spelling) + f" : {width}",
                    first,
                    last - first + 1,
                    bits - first * 8,
                    width,
                )
            )
            continue
        if bits % 8:
            raise GenError(f"{fwhere}: offset {bits} bits is not a whole byte")
        size = ftype.get_size()
        if size <= 0:
            raise GenError(f"{fwhere}: incomplete type {f.type.spelling}")
        if f.spelling:
            out.append(
                Field(name, c_path, W.declarator(f.type.spelling, f.spelling), bits // 8, size)
            )
        if ftype.kind == TK.RECORD:
            walk(ftype, fwhere, bits, name, c_path, out)


def collect_record(tds, c_name, module):
    if c_name not in tds:
        raise GenError(f"no typedef {c_name}")
    t = W.strip_sugar(tds[c_name].underlying_typedef_type).get_canonical()
    if t.kind != TK.RECORD:
        raise GenError(f"{c_name} is not a struct")
    fields = []
    walk(t, c_name, 0, "", "", fields)
    # Cross-check the top-level offsets with clang_Type_getOffsetOf.
    for f in fields:
        if "." not in f.c_path and f.bit_width is None:
            if t.get_offset(f.c_path) != f.offset * 8:
                raise GenError(f"{c_name}.{f.c_path}: offsets disagree")
    # Names must be unique; a repeated name must describe the same bytes (the union and its
    # struct member in `cacheConfig.config`), and only its first occurrence is kept.
    unique, seen = [], {}
    reserved = {"SIZE", "ALIGN"}
    for f in fields:
        if f.const in reserved:
            raise GenError(f"{c_name}.{f.c_path}: constant name {f.const} is reserved")
        prev = seen.get(f.const)
        if prev is None:
            seen[f.const] = f
            unique.append(f)
        elif (prev.offset, prev.length, prev.bit_width) != (f.offset, f.length, f.bit_width):
            raise GenError(f"{c_name}: {prev.c_path} and {f.c_path} would both be {f.const}")
    names = {f.const for f in unique}
    for f in unique:
        for suffix in ("_LEN", "_SHIFT", "_BITS"):
            if f.const + suffix in names:
                raise GenError(f"{c_name}: {f.const}{suffix} is both a field and a width")
    return RecordLayout(c_name, module, t.get_size(), t.get_align(), unique)


def collect_cbids(tds):
    enum = collect_enum(tds, CBID_ENUM, None)
    table = []
    for name, value in enum.values:
        if name in CBID_SKIP:
            continue
        if not name.startswith(CBID_PREFIX):
            raise GenError(f"{CBID_ENUM}: unexpected enumerator {name}")
        table.append((name[len(CBID_PREFIX) :], value))
    table.sort(key=lambda nv: nv[0].encode())
    names = [n for n, _ in table]
    if len(set(names)) != len(names):
        raise GenError(f"{CBID_ENUM}: a function has two ids")
    return table


def collect_runtime_cbids(tds):
    """Every runtime callback id's function name (`cudaMalloc_v3020`), indexed by id from 0
    (`INVALID`, named ""); ids are dense up to `SIZE`."""
    enum = collect_enum(tds, RUNTIME_CBID_ENUM, None)
    values = dict(enum.values)
    size = values.pop(RUNTIME_CBID_PREFIX + "SIZE")
    names = [""] * size
    for name, value in values.items():
        if not name.startswith(RUNTIME_CBID_PREFIX):
            raise GenError(f"{RUNTIME_CBID_ENUM}: unexpected enumerator {name}")
        if name == RUNTIME_CBID_PREFIX + "INVALID":
            continue
        if not 0 < value < size or names[value]:
            raise GenError(f"{RUNTIME_CBID_ENUM}: {name} = {value} out of order")
        names[value] = name[len(RUNTIME_CBID_PREFIX) :]
    return names


def render_runtime(version, names):
    out = [
        "// GENERATED by tools/gen-cupti/gen.py — do not edit.\n",
        f"// From the CUPTI headers of {version}.\n",
        f"// Regenerate from the repository root: `{REGENERATE}`\n",
        "\n",
        f"/// The runtime API's callback ids (`{RUNTIME_CBID_ENUM}` of cupti_runtime_cbid.h,\n",
        "/// `CUPTI_RUNTIME_TRACE_CBID_<name>`): the function name of each id, as CUPTI writes it\n",
        "/// (`cudaMalloc_v3020`), indexed by id; id 0 (`INVALID`) is empty. Ids are stable across\n",
        "/// CUPTI versions (new functions get new ids).\n",
        f"pub static RUNTIME_API_CBID_NAMES: [&str; {len(names)}] = [\n",
    ]
    out.extend(f'"{n}",\n' for n in names)
    out.append("];\n")
    return W.rustfmt("".join(out), RUNTIME_OUT.name)


# --- Rust output -----------------------------------------------------------------------------


def header_text(version):
    return f"""\
// GENERATED by tools/gen-cupti/gen.py — do not edit.
// From the CUPTI headers of {version}.
// Regenerate from the repository root: `{REGENERATE}`
//
// CUPTI constants and record layouts, as plain items with no dependencies, so that a crate can
// `include!` this file or reach it with `#[path]`: enum and macro values under their C names,
// the driver API callback ids (`DRIVER_API_CBIDS`), and one module per record (the activity
// records rtrace reads, and the callback API's `CUpti_CallbackData`). Layouts come from clang's
// layout of the structs (the activity records are `__attribute__((packed, aligned(8)))`), for
// x86-64 Linux, and every number is checked with gcc against the headers: for each record,
// `SIZE` and `ALIGN`, and for every field `<NAME>` (byte offset) and `<NAME>_LEN` (width in
// bytes). Nested unions and structs are flattened (`cacheConfig.both` -> `CACHE_CONFIG_BOTH`); a
// bit-field also has `<NAME>_SHIFT` and `<NAME>_BITS`: its value is
// `(little-endian integer of bytes [NAME, NAME + NAME_LEN)) >> NAME_SHIFT`, masked to `NAME_BITS`.
"""


def render_enum(enum):
    out = [f"\n// `{enum.c_name}`\n"]
    for name, value in enum.values:
        out.append(f"pub const {name}: {enum.rust_type} = {value};\n")
    return "".join(out)


def render_record(rec):
    out = [f"\n/// `{rec.c_name}`: {rec.size} bytes, aligned to {rec.align}.\n"]
    out.append(f"pub mod {rec.module} {{\n")
    out.append("/// Size of the record in bytes.\n")
    out.append(f"pub const SIZE: usize = {rec.size};\n")
    out.append("/// Alignment of the record.\n")
    out.append(f"pub const ALIGN: usize = {rec.align};\n")
    for f in rec.fields:
        where = f" (`{f.c_path}`)" if "." in f.c_path else ""
        out.append(f"/// `{f.c_decl}`{where}\n")
        out.append(f"pub const {f.const}: usize = {f.offset};\n")
        out.append(f"pub const {f.const}_LEN: usize = {f.length};\n")
        if f.bit_width is not None:
            out.append(f"pub const {f.const}_SHIFT: u32 = {f.bit_shift};\n")
            out.append(f"pub const {f.const}_BITS: u32 = {f.bit_width};\n")
    out.append("}\n")
    return "".join(out)


def render(version, enums, macros, records, cbids, result_names):
    out = [header_text(version)]
    out.append("\n// Macros.\n")
    for name, rust_type, value in macros:
        out.append(f"pub const {name}: {rust_type} = {value};\n")
    out.extend(render_enum(e) for e in enums)
    out.append(
        f"\n/// Every `{NAMED_ENUM}` value with its enumerator name, in the header's order.\n"
    )
    out.append(f"pub static CUPTI_RESULT_NAMES: [(u32, &str); {len(result_names)}] = [\n")
    out.extend(f'({value}, "{name}"),\n' for name, value in result_names)
    out.append("];\n")
    out.append(
        "\n/// The driver API callback ids of cupti_driver_cbid.h "
        "(`CUPTI_DRIVER_TRACE_CBID_<name>`), by\n/// function name, sorted in byte order "
        "(binary-searchable): the `cbid` of a\n/// `CUPTI_ACTIVITY_KIND_DRIVER` record.\n"
    )
    out.append(f"pub static DRIVER_API_CBIDS: [(&str, u32); {len(cbids)}] = [\n")
    out.extend(f'("{name}", {value}),\n' for name, value in cbids)
    out.append("];\n")
    out.extend(render_record(r) for r in records)
    return W.rustfmt("".join(out), DEFAULT_OUT.name)


# --- C-side check ----------------------------------------------------------------------------


def c_check(include_dir, enums, macros, records, cbids):
    """Compiles the numbers against the headers with gcc; bit-fields are checked by running it."""
    gcc = shutil.which("gcc")
    if gcc is None:
        print("note: gcc not found, skipped the C-side check", file=sys.stderr)
        return
    lines = ["#include <stddef.h>", "#include <stdint.h>", "#include <string.h>"]
    lines += [f"#include <{h}>" for h in INPUT_HEADERS]
    n = 0

    def sa(cond, what):
        nonlocal n
        n += 1
        lines.append(f'_Static_assert({cond}, "{what}");')

    for name, _, value in macros:
        sa(f"(unsigned long long)({name}) == {value}ull", name)
    for e in enums:
        for name, value in e.values:
            sa(f"{name} == {value}", name)
    for name, value in cbids:
        sa(f"{CBID_PREFIX}{name} == {value}", name)
    bit_checks = []
    for rec in records:
        t = rec.c_name
        sa(f"sizeof({t}) == {rec.size}", f"size of {t}")
        sa(f"_Alignof({t}) == {rec.align}", f"alignment of {t}")
        for f in rec.fields:
            if f.bit_width is None:
                sa(f"offsetof({t}, {f.c_path}) == {f.offset}", f"{t}.{f.c_path}")
                sa(f"sizeof((({t} *)0)->{f.c_path}) == {f.length}", f"width of {t}.{f.c_path}")
            else:
                bit_checks.append((t, f))
    # Bit-fields: set one to all ones in a zeroed record and look at which bits changed.
    lines.append("int main(void) {")
    lines.append("    int bad = 0;")
    for t, f in bit_checks:
        mask = ((1 << f.bit_width) - 1) << f.bit_shift
        lines.append("    {")
        lines.append(f"        {t} r;")
        lines.append("        unsigned char b[sizeof r];")
        lines.append("        unsigned long long got = 0;")
        lines.append("        memset(&r, 0, sizeof r);")
        lines.append(f"        r.{f.c_path} = ~0u;")
        lines.append("        memcpy(b, &r, sizeof r);")
        lines.append("        for (size_t i = 0; i < sizeof r; i++) {")
        lines.append(f"            if (i >= {f.offset} && i < {f.offset + f.length})")
        lines.append(f"                got |= (unsigned long long)b[i] << (8 * (i - {f.offset}));")
        lines.append("            else if (b[i]) bad = 1;")
        lines.append("        }")
        lines.append(f"        if (got != {mask}ull) bad = 1;")
        lines.append("    }")
        n += 1
    lines.append("    return bad;")
    lines.append("}")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "check.c"
        exe = Path(tmp) / "check"
        src.write_text("\n".join(lines) + "\n")
        cmd = [gcc, "-std=gnu11", f"-I{include_dir}", str(src), "-o", str(exe)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise GenError(f"gcc disagrees with the numbers clang gave:\n{proc.stderr}")
        if subprocess.run([str(exe)]).returncode != 0:
            raise GenError("a bit-field is not where clang put it")
    return n


# --- Main ------------------------------------------------------------------------------------


def cupti_version(include_dir, macros):
    api = dict((n, v) for n, _, v in macros)["CUPTI_API_VERSION"]
    return f"{W.cuda_version(include_dir)}, CUPTI_API_VERSION {api}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="output file (default: %(default)s)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if --out is not what would be generated",
    )
    args = parser.parse_args()

    include_dir = find_include_dir()
    W.load_libclang()
    tu = parse(include_dir)
    tds = typedefs(tu)
    enums = [collect_enum(tds, name, wanted) for name, wanted in ENUMS]
    macros = collect_macros(tu)
    records = [collect_record(tds, c_name, module) for c_name, module in RECORDS]
    cbids = collect_cbids(tds)
    result_names = collect_enum(tds, NAMED_ENUM, None).values
    checked = c_check(include_dir, enums, macros, records, cbids)
    version = cupti_version(include_dir, macros)
    text = render(version, enums, macros, records, cbids, result_names)
    runtime = collect_runtime_cbids(tds)
    outputs = [(args.out, text), (RUNTIME_OUT, render_runtime(version, runtime))]
    outputs += runtime_stubs.outputs(version, REGENERATE, runtime, tu, ci, GenError, W.rustfmt)

    if args.check:
        stale = [p for p, t in outputs if not p.is_file() or p.read_text() != t]
        for p in stale:
            print(f"out of date: {p}; run `{REGENERATE}`")
        if stale:
            return 1
        print("up to date: " + ", ".join(str(p) for p, _ in outputs))
        return 0
    for path, t in outputs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(t)
    fields = sum(len(r.fields) for r in records)
    print(
        f"{len(records)} records ({fields} fields), {sum(len(e.values) for e in enums)} enum "
        f"values, {len(macros)} macros, {len(cbids)} driver cbids -> {args.out}; "
        f"{sum(1 for n in runtime if n)} runtime cbids -> {RUNTIME_OUT}; runtime stubs -> "
        f"{runtime_stubs.STUBS_OUT}, {runtime_stubs.IDS_OUT}"
        + (f" ({checked} gcc checks)" if checked else "")
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GenError as e:
        print(f"gen-cupti: error: {e}", file=sys.stderr)
        sys.exit(1)
