# fcan for plain Makefiles: generates a node's C code from its schema and links the node
# runtime. Set the inputs, include this file, use the outputs:
#
#   FCAN_SCHEMA := schema/io_board.yaml
#   FCAN_OUT    := build/fcan
#   include path/to/fcan/fcan-node-c/make/fcan.mk
#
#   board: main.o $(FCAN_OBJS)
#   	$(CC) $(LDFLAGS) -o $@ $^ $(FCAN_LDLIBS)
#   main.o: $(FCAN_HDRS)
#   CFLAGS += $(FCAN_CFLAGS)
#
# Inputs:
#   FCAN_SCHEMA       the schema files forming the node (required)
#   FCAN_OUT          where the generated code goes (default: fcan-gen)
#   FCAN_NAME         the node name (default: the schema's `node:` line without `{i}`)
#   FCAN_LIB_DIR      a prebuilt layout from fcan-node-c/scripts/build-lib.sh
#                     (include/fcan.h, lib/<rust-target>/libfcan_node.a); empty (default):
#                     libfcan_node.a is built with cargo from FCAN_SOURCE_DIR
#   FCAN_RUST_TARGET  the image's Rust target (default: the host's, from rustc): set it
#                     for a cross build, e.g. thumbv7em-none-eabihf for a Cortex-M4F with
#                     -mfloat-abi=hard
#   FCAN_CODEGEN      the fcan-codegen binary (default: fcan-codegen on the PATH, else
#                     built with `cargo build -p fcan-codegen --release`)
#   FCAN_SOURCE_DIR   the fcan source tree (default: the one this file is in)
#   CARGO             cargo (default: cargo)
#
# Outputs:
#   FCAN_SRCS    the generated .c (compile and link it with the application)
#   FCAN_OBJS    its object, $(FCAN_SRCS:.c=.o)
#   FCAN_HDRS    the generated header (make the application's objects depend on it)
#   FCAN_CFLAGS  -I for the generated header and fcan.h
#   FCAN_LIB     libfcan_node.a
#   FCAN_LDLIBS  what to link: libfcan_node.a, nothing else (no -lpthread/-ldl/-lm)
# and the rules that make them (regenerated when a schema file or fcan-codegen changes).

# The including Makefile's default goal stays its own (restored at the end).
_fcan_default_goal := $(.DEFAULT_GOAL)

FCAN_SOURCE_DIR ?= $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/../..)
FCAN_OUT ?= fcan-gen
CARGO ?= cargo

ifeq ($(strip $(FCAN_SCHEMA)),)
$(error fcan.mk: set FCAN_SCHEMA to the node's schema files before including fcan.mk)
endif

# The node's name: the first `node:` line (io_board{i} -> io_board).
ifeq ($(origin FCAN_NAME),undefined)
FCAN_NAME := $(shell sed -n 's/^node:[[:space:]]*["'\'']\{0,1\}\([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' $(FCAN_SCHEMA) | head -n 1 | tr 'A-Z' 'a-z')
endif
ifeq ($(strip $(FCAN_NAME)),)
$(error fcan.mk: no `node:` line in $(FCAN_SCHEMA): set FCAN_NAME)
endif

# Cargo's target directory (CARGO_TARGET_DIR when set).
FCAN_CARGO_TARGET_DIR := $(if $(CARGO_TARGET_DIR),$(abspath $(CARGO_TARGET_DIR)),$(FCAN_SOURCE_DIR)/target)

ifeq ($(origin FCAN_RUST_TARGET),undefined)
FCAN_RUST_TARGET := $(shell cd $(FCAN_SOURCE_DIR) && rustc -vV 2>/dev/null | sed -n 's/^host: //p')
endif
ifeq ($(strip $(FCAN_RUST_TARGET)),)
$(error fcan.mk: set FCAN_RUST_TARGET (no rustc to tell the host's); shipped targets: thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabi thumbv7em-none-eabihf thumbv8m.main-none-eabihf riscv32imac-unknown-none-elf)
endif

ifneq ($(strip $(FCAN_LIB_DIR)),)
FCAN_INCLUDE := $(FCAN_LIB_DIR)/include
FCAN_LIB := $(FCAN_LIB_DIR)/lib/$(FCAN_RUST_TARGET)/libfcan_node.a
ifeq ($(wildcard $(FCAN_LIB)),)
$(error fcan.mk: no $(FCAN_LIB) (FCAN_LIB_DIR has: $(notdir $(wildcard $(FCAN_LIB_DIR)/lib/*))); build it with fcan-node-c/scripts/build-lib.sh --out $(FCAN_LIB_DIR) --target $(FCAN_RUST_TARGET))
endif
else
FCAN_INCLUDE := $(FCAN_SOURCE_DIR)/fcan-node-c/include
FCAN_LIB := $(FCAN_CARGO_TARGET_DIR)/$(FCAN_RUST_TARGET)/c-lib/libfcan_node.a
# Cargo decides whether anything changed; it leaves a fresh archive untouched, so what
# links it relinks only when it did change.
$(FCAN_LIB): fcan-force
	cd $(FCAN_SOURCE_DIR) && $(CARGO) rustc -p fcan-node-c --crate-type staticlib \
		--features panic-handler --profile c-lib --target $(FCAN_RUST_TARGET)
endif

ifeq ($(origin FCAN_CODEGEN),undefined)
FCAN_CODEGEN := $(shell command -v fcan-codegen 2>/dev/null)
ifeq ($(strip $(FCAN_CODEGEN)),)
FCAN_CODEGEN := $(FCAN_CARGO_TARGET_DIR)/release/fcan-codegen
$(FCAN_CODEGEN): fcan-force
	cd $(FCAN_SOURCE_DIR) && $(CARGO) build -p fcan-codegen --release
endif
endif

FCAN_SRCS := $(FCAN_OUT)/fcan_$(FCAN_NAME).c
FCAN_HDRS := $(FCAN_OUT)/fcan_$(FCAN_NAME).h
FCAN_OBJS := $(FCAN_SRCS:.c=.o)
FCAN_CFLAGS := -I$(FCAN_OUT) -I$(FCAN_INCLUDE)
FCAN_LDLIBS := $(FCAN_LIB)

# One run writes all four files; the .c stands for them (the header is made with it and
# stamped with it, so what includes it recompiles only after a regeneration).
$(FCAN_SRCS): $(FCAN_SCHEMA) $(FCAN_CODEGEN)
	$(FCAN_CODEGEN) c $(FCAN_SCHEMA) --out $(FCAN_OUT)
	@touch $@ $(FCAN_HDRS)
$(FCAN_HDRS) $(FCAN_OUT)/schema.bin $(FCAN_OUT)/schema.sha256: $(FCAN_SRCS)
	@test -f $@ || { echo "fcan.mk: fcan-codegen wrote no $@" >&2; exit 1; }

.PHONY: fcan-force fcan-clean
fcan-force:
fcan-clean:
	rm -f $(FCAN_SRCS) $(FCAN_HDRS) $(FCAN_OBJS) $(FCAN_OUT)/schema.bin $(FCAN_OUT)/schema.sha256

.DEFAULT_GOAL := $(_fcan_default_goal)
