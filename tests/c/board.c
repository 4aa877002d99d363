/*
 * The C I/O board (examples/c-io-board/app + the code fcan-codegen c generates) packaged
 * for the Rust tests: one opaque struct holding the node's RAM and the application, and
 * functions with plain arguments, so the tests need no C struct layout (tests/src/c_board.rs).
 */
#include <stddef.h>
#include <string.h>

#include "io_board_app.h"

typedef struct {
    fcan_io_board_ram_t ram;
    io_board_app_t app;
} c_board_t;

uint32_t c_board_size(void) { return (uint32_t)sizeof(c_board_t); }

int32_t c_board_boot(c_board_t *b, uint8_t node_id, uint8_t controller, uint32_t boot_id,
                     const uint8_t counts[FCAN_IO_BOARD_ARRAYS], fcan_transmit_fn transmit,
                     void *user) {
    fcan_io_board_config_t config;
    memset(b, 0, sizeof *b);
    memset(&config, 0, sizeof config);
    config.node_id = node_id;
    config.controller = controller;
    config.boot_id = boot_id;
    memcpy(config.counts, counts, FCAN_IO_BOARD_ARRAYS);
    config.transmit = transmit;
    config.user = user;
    return io_board_app_init(&b->app, &b->ram, &config);
}

int32_t c_board_receive(c_board_t *b, const fcan_frame_t *f, uint32_t now_us) {
    return io_board_app_receive(&b->app, f, now_us);
}

int32_t c_board_poll(c_board_t *b, uint32_t now_us) { return io_board_app_poll(&b->app, now_us); }

fcan_node_t *c_board_node(c_board_t *b) { return b->app.node; }

int c_board_output(const c_board_t *b, uint32_t i) { return io_board_app_output(&b->app, i); }

uint32_t c_board_calibrations(const c_board_t *b) { return b->app.calibrations; }
