/*
 * Hostile frames through the C API, from C: the io_board node (generated tables, the C
 * application) fed frames a C program builds from a PRNG — any identifier, any length
 * byte, any flags, any payload — interleaved with polls. Nothing may crash or hang; an
 * illegal frame is refused with FCAN_ERR_FRAME and changes nothing; every legal one is
 * counted by the node (handled, malformed, ignored or refused for its state).
 * tests/tests/c_node.rs runs it and checks what it reports.
 */
#include <string.h>

#include "io_board_app.h"

typedef struct {
    uint32_t legal;
    uint32_t illegal;
    uint32_t bad_returns;
    fcan_counters_t counters;
    int32_t state;
} c_hostile_report_t;

static uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *s = x;
    return x;
}

static int32_t sink(void *user, const fcan_frame_t *frame)
{
    (void)user;
    (void)frame;
    return 0;
}

static fcan_io_board_ram_t ram;
static io_board_app_t app;

int32_t c_hostile_run(uint32_t seed, uint32_t frames, c_hostile_report_t *out)
{
    fcan_io_board_config_t cfg;
    uint32_t now = 0, i, s = seed | 1u;
    int32_t rc;

    memset(&cfg, 0, sizeof cfg);
    memset(out, 0, sizeof *out);
    cfg.node_id = 9;
    cfg.controller = FCAN_CONTROLLER_FD;
    cfg.boot_id = seed;
    cfg.counts[0] = 8;
    cfg.counts[1] = 8;
    cfg.counts[2] = 1;
    cfg.transmit = sink;
    rc = io_board_app_init(&app, &ram, &cfg);
    if (rc != FCAN_OK) {
        return rc;
    }
    for (i = 0; i < frames; i++) {
        fcan_frame_t f;
        uint32_t r = xorshift(&s), k;
        memset(&f, 0, sizeof f);
        /* Half aimed at this node's configuration plane (extended, node 9 in bits 16..22),
         * the rest anything: standard ids, ids too wide, lengths up to 255, any flags. */
        if ((r & 1u) != 0u) {
            f.id = (xorshift(&s) & 0x1FF80FFFu) | (9u << 16);
            f.flags = FCAN_FRAME_EXTENDED;
            f.len = (uint8_t)(xorshift(&s) % 9u);
        } else {
            f.id = xorshift(&s);
            f.flags = (uint8_t)xorshift(&s);
            f.len = (uint8_t)xorshift(&s);
        }
        for (k = 0; k < 64u; k++) {
            f.data[k] = (uint8_t)xorshift(&s);
        }
        now += xorshift(&s) % 3000u;
        rc = io_board_app_receive(&app, &f, now);
        if (rc == FCAN_OK) {
            out->legal++;
        } else if (rc == FCAN_ERR_FRAME) {
            out->illegal++;
        } else {
            out->bad_returns++;
        }
        if (io_board_app_poll(&app, now) != FCAN_OK) {
            out->bad_returns++;
        }
    }
    fcan_node_counters(app.node, &out->counters);
    out->state = fcan_node_state(app.node);
    return FCAN_OK;
}
