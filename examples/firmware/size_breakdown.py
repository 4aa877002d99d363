#!/usr/bin/env python3
"""Attributes the flash and static RAM of the firmware ELF to its parts.

Usage: size_breakdown.py ELF MARKDOWN_OUT

Flash (.text): every byte is charged to the source of the innermost function that covers
it in the DWARF debug info (DW_TAG_subprogram and DW_TAG_inlined_subroutine ranges), skipping
frames from Rust's own library (core, compiler-builtins): with LTO nearly everything is
inlined into `main`, so symbol names alone would charge the whole node to `main`; the
inline tree still knows which crate each instruction came from, and a core helper
(an iterator, a slice copy) inlined into runtime code is charged to the runtime.
Bytes with no debug info fall back to the symbol table (llvm-nm's view).

.rodata: by symbol (the blob, the generated tables, switch tables named after their
function); anonymous constants have no owner in the ELF and are listed as such.

Static RAM (.data + .bss): by symbol, and the node's static is split by its type's
members as the debug info gives them (sizes as laid out on the target).

Only pyelftools is needed (pip install pyelftools).
"""
import re
import sys
from collections import defaultdict

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

ELF_PATH, MD_OUT = sys.argv[1], sys.argv[2]

RUNTIME = "fcan-runtime-nostd"
CORE = "fcan-core"
GEN = "generated code (fcan_gen.rs)"
APP = "application (motor-driver lib + physics)"
FW = "firmware: main loop, mailbox driver, clock"
RT = "cortex-m-rt / cortex-m (startup, vectors, SysTick access)"
LIB = "Rust core + compiler-builtins (memcpy, float compare, panics)"
HEAPLESS = "heapless (the runtime's queues)"
OTHER = "other crates"
UNK = "padding / unattributed"
ORDER = [RUNTIME, CORE, GEN, HEAPLESS, APP, FW, RT, LIB, OTHER, UNK]


def classify_path(path):
    p = path.replace("\\", "/")
    if p.endswith("fcan_gen.rs"):
        return GEN
    if "/fcan-runtime-nostd/" in p:
        return RUNTIME
    if "/fcan-core/" in p:
        return CORE
    if "/examples/motor-driver/" in p:
        return APP
    if "/examples/firmware/" in p:
        return FW
    if "/cortex-m-rt" in p or "/cortex-m-" in p or "/cortex-m/" in p:
        return RT
    if "/library/" in p or "compiler-builtins" in p or "compiler_builtins" in p:
        return LIB
    if "/heapless-" in p:
        return HEAPLESS
    return OTHER


def classify_symbol(name):
    """For bytes the debug info does not cover, and for rodata symbols (mangled names)."""
    if "fcan_gen" in name or "motor_driver3gen" in name or "motor_driver::gen" in name:
        return GEN
    if "fcan_runtime_nostd" in name:
        return RUNTIME
    if "fcan_core" in name:
        return CORE
    if "fcan_example_motor_driver" in name:
        return APP
    if "fcan_example_firmware" in name:
        return FW
    if name in ("Reset", "__pre_init", "DefaultPreInit", "DefaultHandler_", "HardFault_",
                "__EXCEPTIONS", "__INTERRUPTS", "__RESET_VECTOR", "main",
                "HardFaultTrampoline", "__stext") or "cortex_m" in name:
        return RT
    if (name.startswith("__aeabi") or name.startswith("mem") or "compiler_builtins" in name
            or name.startswith("_ZN4core") or "core.." in name or name.startswith("__")):
        return LIB
    return OTHER


elf = ELFFile(open(ELF_PATH, "rb"))
sections = {s.name: s for s in elf.iter_sections()}


def sec_range(name):
    s = sections.get(name)
    if s is None:
        return (0, 0)
    return (s["sh_addr"], s["sh_addr"] + s["sh_size"])


def sec_size(name):
    s = sections.get(name)
    return s["sh_size"] if s is not None else 0


text_lo, text_hi = sec_range(".text")
owner = [None] * (text_hi - text_lo)

# ---- symbols -------------------------------------------------------------------------
symbols = []
for s in elf.iter_sections():
    if isinstance(s, SymbolTableSection):
        for sym in s.iter_symbols():
            if sym["st_size"] > 0 and sym["st_shndx"] not in ("SHN_UNDEF", "SHN_ABS"):
                symbols.append((sym["st_value"] & ~1, sym["st_size"], sym.name,
                                elf.get_section(sym["st_shndx"]).name))
seen_addr = {}
for addr, size, name, sec in symbols:
    key = (addr, sec)
    if key not in seen_addr or len(name) > len(seen_addr[key][2]):
        seen_addr[key] = (addr, size, name, sec)
symbols = sorted(seen_addr.values())

# ---- DWARF inline tree over .text ------------------------------------------------------
dwarf = elf.get_dwarf_info()
file_cache = {}


def file_name(cu, index):
    key = (cu.cu_offset, index)
    if key in file_cache:
        return file_cache[key]
    name = ""
    lp = dwarf.line_program_for_CU(cu)
    if lp is not None and index > 0:
        entries = lp["file_entry"]
        if index - 1 < len(entries):
            fe = entries[index - 1]
            d = fe.dir_index
            dirs = lp["include_directory"]
            cd = cu.get_top_DIE().attributes.get("DW_AT_comp_dir")
            comp_dir = cd.value.decode() if cd is not None else ""
            base = dirs[d - 1].decode() if 0 < d <= len(dirs) else ""
            name = fe.name.decode()
            if not name.startswith("/") and base:
                name = base + "/" + name
            if not name.startswith("/") and comp_dir:
                name = comp_dir + "/" + name
    file_cache[key] = name
    return name


def decl_file(die, depth=0):
    if depth > 8:
        return ""
    if "DW_AT_decl_file" in die.attributes:
        return file_name(die.cu, die.attributes["DW_AT_decl_file"].value)
    for a in ("DW_AT_abstract_origin", "DW_AT_specification"):
        if a in die.attributes:
            try:
                return decl_file(die.get_DIE_from_attribute(a), depth + 1)
            except Exception:
                return ""
    return ""


def die_ranges(die, cu):
    at = die.attributes
    if "DW_AT_low_pc" in at and "DW_AT_high_pc" in at:
        lo = at["DW_AT_low_pc"].value
        hi = at["DW_AT_high_pc"]
        hi = lo + hi.value if hi.form != "DW_FORM_addr" else hi.value
        return [(lo, hi)]
    if "DW_AT_ranges" in at:
        out = []
        base = cu.get_top_DIE().attributes.get("DW_AT_low_pc")
        base = base.value if base is not None else 0
        rl = dwarf.range_lists()
        if rl is None:
            return out
        for e in rl.get_range_list_at_offset(at["DW_AT_ranges"].value, cu=cu):
            if hasattr(e, "base_address"):
                base = e.base_address
            elif getattr(e, "is_absolute", False):
                out.append((e.begin_offset, e.end_offset))
            else:
                out.append((base + e.begin_offset, base + e.end_offset))
        return out
    return []


frames = []  # (depth, ranges, class)


def walk(die, cu, depth):
    for child in die.iter_children():
        tag = child.tag
        if tag in ("DW_TAG_subprogram", "DW_TAG_inlined_subroutine"):
            rs = [(lo, hi) for lo, hi in die_ranges(child, cu)
                  if lo != 0 and text_lo <= lo < text_hi]
            if rs:
                path = decl_file(child)
                frames.append((depth, rs, classify_path(path), tag == "DW_TAG_subprogram",
                               path))
            walk(child, cu, depth + 1)
        elif tag in ("DW_TAG_namespace", "DW_TAG_structure_type", "DW_TAG_lexical_block",
                     "DW_TAG_enumeration_type", "DW_TAG_union_type", "DW_TAG_variant_part",
                     "DW_TAG_variant"):
            walk(child, cu, depth + (1 if tag == "DW_TAG_lexical_block" else 0))


for cu in dwarf.iter_CUs():
    walk(cu.get_top_DIE(), cu, 0)

# Outer frames first; a deeper frame overrides unless it is library code inlined into
# ours (then the caller keeps it). A library function standing on its own keeps LIB.
frames.sort(key=lambda f: f[0])
owner_file = [None] * (text_hi - text_lo)
for depth, rs, cls, concrete, path in frames:
    for lo, hi in rs:
        for a in range(max(lo, text_lo), min(hi, text_hi)):
            cur = owner[a - text_lo]
            if cls == LIB and cur is not None and not concrete:
                continue
            if cls == LIB and cur is not None and cur != LIB:
                continue
            owner[a - text_lo] = cls
            owner_file[a - text_lo] = path

# Fallback: symbols for bytes without debug info.
for addr, size, name, sec in symbols:
    if sec != ".text":
        continue
    cls = classify_symbol(name)
    for a in range(max(addr, text_lo), min(addr + size, text_hi)):
        if owner[a - text_lo] is None:
            owner[a - text_lo] = cls

flash = defaultdict(int)
by_file = defaultdict(int)
for o, f in zip(owner, owner_file):
    flash[o or UNK] += 1
    if o in (RUNTIME, CORE, GEN, HEAPLESS) and f:
        by_file[re.sub(r"^.*/(fcan-runtime-nostd|fcan-core|heapless-[0-9.]+)/", r"\1/", re.sub(r"^.*/out/fcan_gen.rs$", "fcan_gen.rs (OUT_DIR)", f))] += 1

# ---- rodata -----------------------------------------------------------------------------
ro_lo, ro_hi = sec_range(".rodata")
rodata = defaultdict(int)
ro_named = 0
blob = 0
for addr, size, name, sec in symbols:
    if sec != ".rodata":
        continue
    ro_named += size
    if re.search(r"gen4BLOB|gen::BLOB", name):
        blob += size
        continue
    if name.startswith(".Lanon") or name.startswith("anon."):
        rodata["anonymous constants (tables, strings, panic locations)"] += size
    else:
        rodata[classify_symbol(name)] += size
rodata[UNK] += sec_size(".rodata") - ro_named

vt = sec_size(".vector_table")
data_sz = sec_size(".data")
bss_sz = sec_size(".bss")
uninit_sz = sec_size(".uninit")

# ---- RAM --------------------------------------------------------------------------------
ram = []
for addr, size, name, sec in symbols:
    if sec in (".bss", ".data", ".uninit"):
        ram.append((size, name, sec))
ram.sort(reverse=True)


def find_type(pred):
    for cu in dwarf.iter_CUs():
        for die in cu.iter_DIEs():
            if die.tag == "DW_TAG_structure_type" and "DW_AT_byte_size" in die.attributes:
                n = die.attributes.get("DW_AT_name")
                if n is not None and pred(n.value.decode()):
                    return die
    return None


def members(die):
    out = []
    for m in die.iter_children():
        if m.tag != "DW_TAG_member":
            continue
        name = m.attributes["DW_AT_name"].value.decode()
        t = m.get_DIE_from_attribute("DW_AT_type")
        out.append((name, type_size(t), type_name(t)))
    return out


def type_size(t):
    if "DW_AT_byte_size" in t.attributes:
        return t.attributes["DW_AT_byte_size"].value
    if t.tag == "DW_TAG_array_type":
        n = 1
        for sub in t.iter_children():
            c = sub.attributes.get("DW_AT_count")
            if c is not None:
                n *= c.value
        return type_size(t.get_DIE_from_attribute("DW_AT_type")) * n
    if "DW_AT_type" in t.attributes:
        return type_size(t.get_DIE_from_attribute("DW_AT_type"))
    return 0


def type_name(t):
    if t.tag == "DW_TAG_array_type":
        dims = []
        for sub in t.iter_children():
            c = sub.attributes.get("DW_AT_count")
            if c is not None:
                dims.append(c.value)
        inner = type_name(t.get_DIE_from_attribute("DW_AT_type"))
        for n in reversed(dims):
            inner = f"[{inner}; {n}]"
        return inner
    n = t.attributes.get("DW_AT_name")
    return n.value.decode() if n is not None else t.tag


def demangle(name):
    """Legacy Rust mangling `_ZN<len><ident>...E`, hash dropped."""
    m = re.match(r"_ZN(.*)E(\.\d+)?$", name)
    if not m:
        return name
    rest, parts = m.group(1), []
    while rest:
        k = re.match(r"(\d+)", rest)
        if not k:
            break
        n = int(k.group(1))
        start = len(k.group(1))
        parts.append(rest[start:start + n])
        rest = rest[start + n:]
    if parts and re.fullmatch(r"h[0-9a-f]{16}", parts[-1]):
        parts.pop()
    return "::".join(parts)


def size_of(die):
    return die.attributes["DW_AT_byte_size"].value


driver_t = find_type(lambda n: n == "MotorDriver")
rawnode_t = find_type(lambda n: n.startswith("Node<fcan_runtime_nostd::storage::Buffers<"))
buffers_t = find_type(lambda n: n.startswith("Buffers<"))
gennode_t = find_type(lambda n: n == "Node")
app_t = find_type(lambda n: n == "MotorApp")

# ---- report -----------------------------------------------------------------------------
lines = []


def out(s=""):
    lines.append(s)


text_sz = sec_size(".text")
ro_sz = sec_size(".rodata")
total_flash = vt + text_sz + ro_sz + data_sz
out("Flash by part (bytes):")
out("")
out("| part | .text | .rodata | flash |")
out("|---|---:|---:|---:|")
rows = []
for k in ORDER + sorted(set(rodata) - set(ORDER)):
    t = flash.get(k, 0)
    r = rodata.get(k, 0)
    if t or r:
        rows.append((k, t, r))
for k, t, r in rows:
    out(f"| {k} | {t} | {r} | {t + r} |")
out(f"| schema blob (`gen::BLOB`) | 0 | {blob} | {blob} |")
out(f"| vector table (cortex-m-rt: 16 exceptions + 240 IRQ slots, no device crate) | | | {vt} |")
out(f"| .data initialisers | | | {data_sz} |")
out(f"| **total flash** | {text_sz} | {ro_sz} | **{total_flash}** |")
out("")

# heapless is charged to the runtime: its queues are the runtime's, only written elsewhere.
rt_gen = (flash.get(RUNTIME, 0) + flash.get(CORE, 0) + flash.get(GEN, 0) + flash.get(HEAPLESS, 0)
          + rodata.get(RUNTIME, 0) + rodata.get(CORE, 0) + rodata.get(GEN, 0)
          + rodata.get(HEAPLESS, 0))
anon = rodata.get("anonymous constants (tables, strings, panic locations)", 0)
unk = flash.get(UNK, 0) + rodata.get(UNK, 0)
libc = flash.get(LIB, 0) + rodata.get(LIB, 0)
no_blob = total_flash - blob

out("Runtime, fcan-core and generated code by source file (.text bytes):")
out("")
out("| file | bytes |")
out("|---|---:|")
for f, n in sorted(by_file.items(), key=lambda kv: -kv[1]):
    out(f"| `{f}` | {n} |")
out("")

out("Static RAM by symbol (bytes):")
out("")
out("| symbol | section | bytes |")
out("|---|---|---:|")
for size, name, sec in ram:
    out(f"| `{demangle(name)}` | {sec} | {size} |")
static_ram = data_sz + bss_sz + uninit_sz
out(f"| **total static RAM (.data + .bss + .uninit)** | | **{static_ram}** |")
out("")

node_ram = None
if driver_t is not None:
    out(f"The node static `DRIVER: MotorDriver` ({size_of(driver_t)} B), by member:")
    out("")
    out("| member | type | bytes |")
    out("|---|---|---:|")
    for n, s, t in members(driver_t):
        out(f"| `MotorDriver.{n}` | `{t}` | {s} |")
    if gennode_t is not None:
        node_ram = size_of(gennode_t)
    if rawnode_t is not None:
        for n, s, t in members(rawnode_t):
            out(f"| `  node.raw.{n}` | `{t}` | {s} |")
    if buffers_t is not None:
        for n, s, t in members(buffers_t):
            out(f"| `    node.raw.buffers.{n}` | `{t}` | {s} |")
    out("")

out("Against the target (runtime + generated code of the eight-motor node, blob excluded):")
out("")
out("| measure | bytes | target | met |")
out("|---|---:|---:|---|")
out(f"| flash: fcan-runtime-nostd + fcan-core + generated code + heapless (attributed) | {rt_gen} | 16384 | {'yes' if rt_gen <= 16384 else 'NO'} |")
upper = rt_gen + anon + unk + libc
out(f"| flash: the same + all anonymous constants + core/compiler-builtins + unattributed (upper bound) | {upper} | 16384 | {'yes' if upper <= 16384 else 'NO'} |")
out(f"| flash: whole image except the blob (also application, driver, startup, vector table) | {no_blob} | — | — |")
if node_ram is not None:
    out(f"| static RAM: the node (`gen::Node` = runtime + schema-sized `Buffers`) | {node_ram} | 4096 | {'yes' if node_ram <= 4096 else 'NO'} |")
# The unconfigured node is all zero bytes, so its `static` is in .bss: no initialiser
# image in flash, nothing copied at boot.
driver_data = sum(size for size, name, sec in ram if "DRIVER" in name and sec == ".data")
out(f"| flash: the node's initialiser image (`.data`; 0 = the node static is in `.bss`) | {driver_data} | 0 | {'yes' if driver_data == 0 else 'NO'} |")
out(f"| static RAM: whole image (node, application, mailbox rings) | {static_ram} | — | — |")

text = "\n".join(lines) + "\n"
open(MD_OUT, "w").write(text)
print(text)
