/*
 * The C I/O-board firmware without its self-test (the build the size report measures):
 * the application of examples/c-io-board/app on the MPS2-AN386, polled from an endless
 * loop, with SysTick as the µs clock.
 *
 * The board has no CAN controller; like the Rust firmware (examples/firmware/src/
 * mailbox.rs) this one reads and writes two rings in RAM standing in for a controller's
 * receive FIFO (filled by its interrupt on a real board) and transmit mailboxes, with
 * volatile accesses so the compiler cannot assume the receive ring stays empty. The
 * outputs' levels go to a GPIO register stand-in.
 */
#include <stdint.h>
#include <string.h>

#include "clock.h"
#include "io_board_app.h"

/* This board's node id (on a real board: address switches). */
#define NODE_ID 2u
/* Frames per ring (as the Rust firmware's mailbox rings). */
#define RING 32u

typedef struct {
    volatile uint32_t head; /* next slot written */
    volatile uint32_t tail; /* next slot read */
    fcan_frame_t slot[RING];
} ring_t;

/* Not static: the controller (its interrupt, its DMA) writes them too, so the compiler
 * may not treat a ring it never sees written as empty. */
ring_t can_rx; /* controller -> node */
ring_t can_tx; /* node -> controller */
volatile uint32_t gpio_out;

static fcan_io_board_ram_t ram;
static io_board_app_t app;

static int rx_pop(fcan_frame_t *f)
{
    uint32_t tail = can_rx.tail;
    if (tail == can_rx.head) {
        return 0;
    }
    memcpy(f, (const void *)&can_rx.slot[tail % RING], sizeof *f);
    can_rx.tail = tail + 1u;
    return 1;
}

/* The transmit callback: a full ring refuses the frame; the node keeps it and offers it
 * again at a later poll. */
static int32_t transmit(void *user, const fcan_frame_t *frame)
{
    (void)user;
    uint32_t head = can_tx.head;
    if (head - can_tx.tail >= RING) {
        return 1;
    }
    memcpy((void *)&can_tx.slot[head % RING], frame, sizeof *frame);
    can_tx.head = head + 1u;
    return 0;
}

/* A boot id: random per boot on a real board (a TRNG); here SysTick's phase after the
 * clock check, mixed with a constant. */
static uint32_t boot_id(void)
{
    uint32_t t = *(volatile uint32_t *)0xE000E018u;
    return 0x9E3779B9u * (t ^ 0xA5A55A5Au) ^ 0x12345678u;
}

int main(void)
{
    (void)clock_init();
    fcan_io_board_config_t config;
    memset(&config, 0, sizeof config);
    config.node_id = NODE_ID;
    config.controller = FCAN_CONTROLLER_FD;
    config.boot_id = boot_id();
    config.counts[0] = FCAN_IO_BOARD_OUT_MAX_COUNT;
    config.counts[1] = FCAN_IO_BOARD_IN_MAX_COUNT;
    config.counts[2] = FCAN_IO_BOARD_ANALOG_MAX_COUNT;
    config.transmit = transmit;
    if (io_board_app_init(&app, &ram, &config) != FCAN_OK) {
        for (;;) {
            /* Cannot happen with generated tables; stop (a watchdog resets the board). */
        }
    }
    for (;;) {
        fcan_frame_t f;
        while (rx_pop(&f)) {
            (void)io_board_app_receive(&app, &f, clock_now_us());
        }
        /* Read after taking the frames: none was stamped later than the time polled at. */
        (void)io_board_app_poll(&app, clock_now_us());
        uint32_t levels = 0;
        for (uint32_t i = 0; i < IO_BOARD_OUTPUTS; i++) {
            if (io_board_app_output(&app, i) == 1) {
                levels |= 1u << i;
            }
        }
        gpio_out = levels;
    }
}
