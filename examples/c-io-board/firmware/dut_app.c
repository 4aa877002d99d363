/*
 * The self-test's node under test: the C application (examples/c-io-board/app), booted
 * with each vector's configuration; its transmit callback is the player's collector.
 */
#include <string.h>

#include "dut.h"
#include "io_board_app.h"
#include "semihosting.h"

static fcan_io_board_ram_t ram;
static io_board_app_t app;

int32_t dut_boot(const vec_vector_t *v)
{
    fcan_io_board_config_t config;
    memset(&config, 0, sizeof config);
    config.node_id = v->node_id;
    config.controller = v->controller;
    config.boot_id = v->boot_id;
    memcpy(config.counts, v->wired, sizeof config.counts);
    config.transmit = selftest_transmit;
    config.event = NULL;
    config.user = NULL;
    /* The same RAM every time: init on it again reboots the node. */
    return io_board_app_init(&app, &ram, &config);
}

void dut_receive(const fcan_frame_t *frame, uint32_t now_us)
{
    (void)io_board_app_receive(&app, frame, now_us);
}

void dut_poll(uint32_t now_us)
{
    (void)io_board_app_poll(&app, now_us);
}

int32_t dut_topic(uint8_t block, uint8_t topic, uint8_t *out, uint32_t cap)
{
    return fcan_node_topic(app.node, block, topic, out, cap, NULL);
}

void dut_describe(void)
{
    out_str("  node RAM: fcan_node_ram_needed ");
    out_u32(fcan_node_ram_needed(&fcan_io_board_desc));
    out_str(" B, FCAN_IO_BOARD_RAM_BYTES ");
    out_u32((uint32_t)FCAN_IO_BOARD_RAM_BYTES);
    out_str(" B (fcan_io_board_ram_t ");
    out_u32((uint32_t)sizeof ram);
    out_str(" B); application state io_board_app_t ");
    out_u32((uint32_t)sizeof app);
    out_str(" B\n");
}
