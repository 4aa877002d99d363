#!/usr/bin/env python3
"""The C I/O-board firmware beside the Rust one with the same main loop
(rust-io-board/), part by part.

    size_compare.py C_ELF C_MAP RUST_ELF

C: size_report.py's breakdown (the linker map). Rust: examples/firmware/size_breakdown.py
(the DWARF inline tree: with LTO the Rust node is inlined into `main`, so symbols and
the map cannot split it), and the sizes of the Rust node's types from the debug info.
Both builds: node id 2, every instance wired, CAN FD, two 32-frame rings standing in for
the CAN controller, SysTick clock, no self-test. Needs pyelftools.
"""
import os
import re
import subprocess
import sys
import tempfile

from elftools.elf.elffile import ELFFile

import size_report as c

C_ELF, C_MAP, RUST_ELF = sys.argv[1], sys.argv[2], sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
breakdown_py = os.path.join(here, "..", "..", "firmware", "size_breakdown.py")

table, _, _ = c.breakdown(C_ELF, C_MAP)


def cflash(*parts):
    return sum(table[p]["text"] + table[p]["rodata"] + table[p]["data"]
               for p in parts if p in table)


def cram(*parts):
    return sum(table[p]["data"] + table[p]["bss"] for p in parts if p in table)


with tempfile.TemporaryDirectory() as tmp:
    md_path = os.path.join(tmp, "rust.md")
    subprocess.run([sys.executable, breakdown_py, RUST_ELF, md_path], check=True,
                   stdout=subprocess.DEVNULL)
    md = open(md_path, encoding="utf-8").read()

rust = {}
for line in md.splitlines():
    cells = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(cells) == 4 and cells[3].strip("*").isdigit() and "Flash by part" not in line:
        rust.setdefault(cells[0], int(cells[3].strip("*")))
    m = re.match(r"\| \*\*total static RAM[^|]*\| *\| \*\*(\d+)\*\* \|", line)
    if m:
        rust["ram"] = int(m.group(1))


def r(prefix):
    hits = [v for k, v in rust.items() if k.startswith(prefix)]
    return hits[0] if hits else 0


def struct_sizes(elf, names):
    found = {}
    with open(elf, "rb") as f:
        dwarf = ELFFile(f).get_dwarf_info()
        for cu in dwarf.iter_CUs():
            for die in cu.iter_DIEs():
                if die.tag != "DW_TAG_structure_type" or "DW_AT_byte_size" not in die.attributes:
                    continue
                n = die.attributes.get("DW_AT_name")
                if n is not None and n.value.decode() in names:
                    found.setdefault(n.value.decode(), die.attributes["DW_AT_byte_size"].value)
            if len(found) == len(names):
                break
    return found


rs = struct_sizes(RUST_ELF, {"IoBoard", "Node", "IoApp"})
r_runtime = r("fcan-runtime-nostd") + r("fcan-core") + r("heapless")
r_gen = r("generated code")
r_anon = r("anonymous constants")
c_runtime = cflash(c.RUNTIME)
c_gen = cflash(c.GEN)
rows = [
    ("runtime: C `libfcan_node.a` (schema-agnostic, reads the descriptor tables) / Rust "
     "fcan-runtime-nostd + fcan-core (+ heapless), monomorphised for the schema",
     c_runtime, r_runtime),
    ("generated code, blob excluded (C: tables + typed glue; Rust: `fcan_gen.rs`)", c_gen, r_gen),
    ("Rust's anonymous constants (descriptor slices, panic locations; no owner in the ELF)",
     0, r_anon),
    ("**runtime + generated code** (+ anonymous constants)", c_runtime + c_gen,
     r_runtime + r_gen + r_anon),
    ("schema blob", cflash(c.BLOB), r("schema blob")),
    ("application + main loop + clock (C: io_board_app.c, main.c, clock.c; Rust: "
     "\"other crates\" = examples/io-board's logic and handlers, rust-io-board/src/main.rs)",
     cflash(c.APP, c.BOARD), r("other crates")),
    ("compiler builtins (C: from libfcan_node.a, libgcc) / Rust core + compiler-builtins",
     cflash(c.BUILTINS, c.LIBGCC), r("Rust core")),
    ("startup + vector table (C: 48 vectors; Rust: cortex-m-rt, 256 vectors)",
     cflash(c.STARTUP), r("cortex-m-rt") + r("vector table")),
    ("padding / unattributed", cflash(c.PAD, c.MERGED, c.OTHER), r("padding") + r(".data init")),
]
c_total = sum(cflash(p) for p in table)
print("Flash (bytes):")
print()
print("| part | C | Rust | C − Rust |")
print("|---|---:|---:|---:|")
for name, cv, rv in rows:
    print(f"| {name} | {cv} | {rv} | {cv - rv:+d} |")
r_total = r("**total flash**")
print(f"| **whole image** | **{c_total}** | **{r_total}** | **{c_total - r_total:+d}** |")
print()
print("Static RAM (bytes):")
print()
print("| part | C | Rust | C − Rust |")
print("|---|---:|---:|---:|")
node_r = rs.get("Node", 0)
app_r = rs.get("IoBoard", 0) - node_r
ram_rows = [
    ("the node (C: `fcan_io_board_ram_t`, FCAN_IO_BOARD_RAM_BYTES rounded to 8; Rust: `gen::Node`)",
     cram(c.NODE_RAM), node_r),
    ("application state (C: `io_board_app_t`; Rust: `IoBoard` without its node)", cram(c.APP_STATE),
     app_r),
]
for name, cv, rv in ram_rows:
    print(f"| {name} | {cv} | {rv} | {cv - rv:+d} |")
c_ram = sum(cram(p) for p in table)
print(f"| **whole image** (also the two 2,312 B rings, clock) | **{c_ram}** | **{rust.get('ram', 0)}** | "
      f"**{c_ram - rust.get('ram', 0):+d}** |")
