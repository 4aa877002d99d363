/*
 * The C I/O board (examples/c-io-board/app + the code fcan-codegen c generates) packaged
 * for the Rust tests: one opaque struct holding the node's RAM and the application, and
 * functions with plain arguments, so the tests need no C struct layout (tests/src/c_board.rs).
 */
#include <stddef.h>
#include <string.h>

#include "io_board_app.h"

/* The staging area of firmware updates: RAM standing in for the spare flash bank. */
#define C_BOARD_STAGING 8192u

typedef struct {
    fcan_io_board_ram_t ram;
    io_board_app_t app;
    fcan_update_t update;
    char version[33];
    uint8_t staging[C_BOARD_STAGING];
    uint32_t staged_size;
    uint8_t marked_sha256[32];
    int marked;
    int reboot_requested;
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

/* ---- firmware updates (fcan_node_set_update), written into `staging` ---------------- */

static int32_t up_begin(void *user, uint32_t size)
{
    c_board_t *b = (c_board_t *)user;
    if (size > C_BOARD_STAGING) {
        return 1;
    }
    memset(b->staging, 0xFF, sizeof b->staging);
    b->staged_size = 0;
    b->marked = 0;
    return 0;
}

static int32_t up_write(void *user, uint32_t offset, const uint8_t *data, uint32_t len)
{
    c_board_t *b = (c_board_t *)user;
    if (offset > C_BOARD_STAGING || len > C_BOARD_STAGING - offset) {
        return 1;
    }
    memcpy(b->staging + offset, data, len);
    return 0;
}

static int32_t up_read(void *user, uint32_t offset, uint8_t *buf, uint32_t len)
{
    c_board_t *b = (c_board_t *)user;
    if (offset > C_BOARD_STAGING || len > C_BOARD_STAGING - offset) {
        return 1;
    }
    memcpy(buf, b->staging + offset, len);
    return 0;
}

static int32_t up_mark(void *user, uint32_t size, const uint8_t *sha256)
{
    c_board_t *b = (c_board_t *)user;
    b->staged_size = size;
    memcpy(b->marked_sha256, sha256, 32);
    b->marked = 1;
    return 0;
}

static void up_reboot(void *user)
{
    /* A board resets here; the test host re-boots this board after the poll. */
    ((c_board_t *)user)->reboot_requested = 1;
}

/* The application's say: this board takes an offer in any state, if it is for its own
 * schema name (the runtime checked that already) and fits. */
static int32_t up_offered(void *user, const fcan_update_offer_t *offer, int32_t state)
{
    (void)user;
    (void)state;
    return offer->size <= C_BOARD_STAGING ? FCAN_UPDATE_ACCEPT : FCAN_UPDATE_REFUSED;
}

/* Takes updates into `staging`; `while_running`: take offers while RUNNING too (with
 * 0, the runtime's default: refused while RUNNING). */
int32_t c_board_enable_update(c_board_t *b, const char *version, int while_running)
{
    size_t n = strlen(version);
    if (n > 32) {
        n = 32;
    }
    memcpy(b->version, version, n);
    b->version[n] = 0;
    memset(&b->update, 0, sizeof b->update);
    b->update.user = b;
    b->update.capacity = C_BOARD_STAGING;
    b->update.version = b->version;
    b->update.offered = while_running ? up_offered : NULL;
    b->update.begin = up_begin;
    b->update.write = up_write;
    b->update.read = up_read;
    b->update.mark_bootable = up_mark;
    b->update.reboot = up_reboot;
    return fcan_node_set_update(b->app.node, &b->update);
}

/* Whether the node asked for a reboot; the staged image (its size, the hash it was
 * marked with) when one was marked bootable. */
int c_board_reboot_requested(const c_board_t *b) { return b->reboot_requested; }

int c_board_staged(const c_board_t *b, const uint8_t **image, uint32_t *size, const uint8_t **sha256)
{
    *image = b->staging;
    *size = b->staged_size;
    *sha256 = b->marked_sha256;
    return b->marked;
}
