#!/usr/bin/env python3
"""Flash and static RAM of the C I/O-board firmware, by part, from the linker map.

    size_report.py ELF MAP

(size_compare.py imports breakdown() from here.)

Every input section the linker placed in .vectors / .text / .rodata / .ARM.exidx / .data /
.bss is charged to the file it came from (GNU ld's map names it: an object of ours, or
an archive member such as libfcan_node.a(fcan_node-....o)); padding between sections
(*fill*) and alignment gaps are their own row. Flash = .vectors + .text + .rodata +
.ARM.exidx + the .data load image; static RAM = .data + .bss (the stack is not static:
the self-test measures it). The schema blob (fcan_io_board_schema_blob, in the generated
file's .rodata) gets its own row, as in the Rust firmware's report.

Also prints the largest symbols (arm-none-eabi-nm --size-sort -S) and the static RAM by
symbol (-fdata-sections gives every C static its own section, named after it).
"""
import re
import subprocess
import sys
from collections import defaultdict

RUNTIME = "libfcan_node.a: the runtime (fcan-runtime-nostd + fcan-core + the C ABI), one LTO object"
BUILTINS = "libfcan_node.a: compiler builtins (memcpy/memset, soft double, integer helpers)"
LIBGCC = "libgcc"
GEN = "generated code (fcan_io_board.c: descriptor tables, typed glue), blob excluded"
BLOB = "generated: schema blob (fcan_io_board_schema_blob)"
APP = "application (io_board_app.c)"
BOARD = "board: main loop, CAN ring stand-ins, SysTick clock (main.c, clock.c)"
STARTUP = "startup: vector table (16 + 32 IRQ), reset handler (startup.c)"
NODE_RAM = "the node's RAM area (`static fcan_io_board_ram_t ram`, main.c / dut_app.c)"
APP_STATE = "application state (`static io_board_app_t app`, main.c / dut_app.c)"
SELFTEST = "self-test: player, semihosting, vectors (selftest.c, dut_app.c, vectors.c)"
PAD = "padding / alignment"
MERGED = "duplicate strings merged by the linker (the map lists them before merging)"
OTHER = "other"
ORDER = [RUNTIME, GEN, BLOB, APP, BUILTINS, LIBGCC, BOARD, STARTUP, NODE_RAM, APP_STATE, SELFTEST,
         PAD, MERGED, OTHER]

FLASH_OUT = {".vectors": "text", ".text": "text", ".rodata": "rodata", ".ARM.exidx": "rodata"}
RAM_OUT = {".data": "data", ".bss": "bss"}


def part_of(path, section):
    p = path.replace("\\", "/")
    if "libfcan_node.a(" in p:
        return RUNTIME if "(fcan_node-" in p else BUILTINS
    if "libgcc.a(" in p:
        return LIBGCC
    base = p.rsplit("/", 1)[-1]
    if base in ("main.o", "dut_app.o") and section in (".bss.ram", ".data.ram"):
        return NODE_RAM
    if base in ("main.o", "dut_app.o") and section in (".bss.app", ".data.app"):
        return APP_STATE
    if base == "fcan_io_board.o":
        return BLOB if "schema_blob" in section else GEN
    if base == "io_board_app.o":
        return APP
    if base in ("main.o", "clock.o"):
        return BOARD
    if base == "startup.o":
        return STARTUP
    if base in ("selftest.o", "dut_app.o", "vectors.o", "semihosting.o"):
        return SELFTEST
    return OTHER


def parse_map(path):
    """-> list of (output section, input section, size, file)"""
    rows = []
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    try:
        start = lines.index("Linker script and memory map")
    except ValueError:
        sys.exit(f"{path}: not a GNU ld map file")
    out = None
    pending = None  # an input section name whose address/size/file is on the next line
    head = re.compile(r"^(\.[^\s]+|/DISCARD/)(?:\s+0x([0-9a-f]+)\s+0x([0-9a-f]+))?")
    inp_full = re.compile(r"^ (\.[^\s]+|COMMON)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")
    inp_name = re.compile(r"^ (\.[^\s]+|COMMON)\s*$")
    cont = re.compile(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")
    fill = re.compile(r"^ \*fill\*\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)")
    for line in lines[start + 1 :]:
        if pending is not None:
            m = cont.match(line)
            if m:
                rows.append((out, pending, int(m.group(2), 16), m.group(3).strip()))
            pending = None
            continue
        m = head.match(line)
        if m:
            out = m.group(1)
            continue
        m = fill.match(line)
        if m:
            rows.append((out, "*fill*", int(m.group(2), 16), ""))
            continue
        m = inp_full.match(line)
        if m:
            rows.append((out, m.group(1), int(m.group(3), 16), m.group(4).strip()))
            continue
        m = inp_name.match(line)
        if m:
            pending = m.group(1)
    return rows


def section_sizes(elf):
    """Output section sizes from the ELF (the map's rows must add up to them)."""
    out = subprocess.run(["arm-none-eabi-size", "-A", elf], capture_output=True, text=True,
                         check=True).stdout
    sizes = {}
    for line in out.splitlines():
        w = line.split()
        if len(w) >= 2 and w[0].startswith(".") and w[1].isdigit():
            sizes[w[0]] = int(w[1])
    return sizes


def breakdown(elf, map_path):
    """-> (table: part -> {text, rodata, data, bss}, RAM symbols, ELF section sizes);
    exits when the map's rows do not add up to the ELF's sections."""
    rows = parse_map(map_path)
    sizes = section_sizes(elf)
    table = defaultdict(lambda: defaultdict(int))
    ram_syms = []
    for out, sec, size, path in rows:
        kind = FLASH_OUT.get(out) or RAM_OUT.get(out)
        if kind is None or size == 0:
            continue
        part = PAD if sec == "*fill*" else part_of(path, sec)
        table[part][kind] += size
        if out in RAM_OUT and sec != "*fill*":
            name = re.sub(r"^\.(bss|data)\.?", "", sec) or "(" + path.rsplit("/", 1)[-1] + ")"
            ram_syms.append((size, name, out, part))

    # Alignment gaps between input sections that ld does not print as *fill*; mergeable
    # string sections (.rodata.str1.1) are listed at their size before merging.
    for out, kind in list(FLASH_OUT.items()) + list(RAM_OUT.items()):
        counted = sum(s for o, _, s, _ in rows if o == out)
        gap = sizes.get(out, 0) - counted
        if gap > 0:
            table[PAD][kind] += gap
        elif gap < 0:
            table[MERGED][kind] += gap
    tflash = sum(t["text"] + t["rodata"] + t["data"] for t in table.values())
    tram = sum(t["data"] + t["bss"] for t in table.values())
    want_flash = sum(sizes.get(s, 0) for s in FLASH_OUT) + sizes.get(".data", 0)
    want_ram = sizes.get(".data", 0) + sizes.get(".bss", 0)
    if (tflash, tram) != (want_flash, want_ram):
        sys.exit(f"size_report.py: the map's rows add up to {tflash} / {tram} B, the ELF's "
                 f"sections to {want_flash} / {want_ram} B")
    return table, ram_syms, sizes


def main():
    elf, map_path = sys.argv[1], sys.argv[2]
    table, ram_syms, _ = breakdown(elf, map_path)
    print("Flash and static RAM by part (bytes; flash = text + rodata + data, RAM = data + bss):")
    print()
    print("| part | .text | .rodata | .data | .bss | flash | RAM |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    tot = defaultdict(int)
    for part in ORDER:
        if part not in table:
            continue
        t = table[part]
        flash = t["text"] + t["rodata"] + t["data"]
        ram = t["data"] + t["bss"]
        for k in ("text", "rodata", "data", "bss"):
            tot[k] += t[k]
        print(f"| {part} | {t['text']} | {t['rodata']} | {t['data']} | {t['bss']} | {flash} | {ram} |")
    tflash = tot["text"] + tot["rodata"] + tot["data"]
    tram = tot["data"] + tot["bss"]
    print(f"| **total** | {tot['text']} | {tot['rodata']} | {tot['data']} | {tot['bss']} | "
          f"**{tflash}** | **{tram}** |")

    print()
    print("Static RAM by symbol (bytes):")
    print()
    print("| symbol | section | part | bytes |")
    print("|---|---|---|---:|")
    for size, name, out, part in sorted(ram_syms, reverse=True):
        print(f"| `{name}` | {out} | {part.split(':')[0].split(' (')[0]} | {size} |")

    print()
    print("Largest symbols (arm-none-eabi-nm --size-sort -S -C, bytes):")
    print()
    nm = subprocess.run(["arm-none-eabi-nm", "--size-sort", "-S", "-C", elf],
                        capture_output=True, text=True, check=True).stdout.splitlines()
    print("| symbol | type | bytes |")
    print("|---|---|---:|")
    for line in list(reversed(nm))[:20]:
        w = line.split(None, 3)
        if len(w) == 4:
            name = w[3] if len(w[3]) <= 90 else w[3][:87] + "..."
            print(f"| `{name}` | {w[2]} | {int(w[1], 16)} |")


if __name__ == "__main__":
    main()
