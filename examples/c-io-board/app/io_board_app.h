/*
 * The I/O board example application in C: a port of examples/io-board (Rust) with the
 * same behaviour and timing, so for the same frames and clock the node sends the same
 * frames, byte for byte.
 *
 * - eight digital outputs switched by the `set` service, whose reply is deferred until
 *   the (simulated) relay has settled (the output's `min_on_ms` param, 20 ms when 0);
 *   each output's `state` topic is published once per change; every output goes off
 *   while no master runs the node (before START, after MASTER_LOST or a plan reset);
 * - eight digital inputs, simulated: input k toggles every (k + 1) x 250 ms; an `edge`
 *   topic per change;
 * - one 16-channel analog sensor: a triangle wave per channel, scaled by the `gain` and
 *   `offset` array params, sampled at `rate_hz`; `configure` picks the channels,
 *   `calibrate` counts.
 *
 * No OS calls, no allocation: the board's main loop (main_linux.c on a PC, a firmware's
 * main on a microcontroller) owns the clock and the CAN controller:
 *
 *     static fcan_io_board_ram_t ram;
 *     static io_board_app_t app;
 *     io_board_app_init(&app, &ram, &config);       // config.transmit sends a frame
 *     for (;;) {
 *         while (a frame f arrived) io_board_app_receive(&app, &f, now_us());
 *         io_board_app_poll(&app, now_us());
 *         io_board_app_poll_at(&app, now_us(), &deadline);  // sleep until then or a frame
 *     }
 *
 * The generated handlers (fcan_io_board_digital_out_set, ...) get the node, not the
 * application: they find it with fcan_node_user(node), the `user` pointer the
 * application gives its node (the board's own `user` is kept for its callbacks). No
 * global: several boards may run in one program, on several threads.
 *
 * The analog samples round as Rust's f32 arithmetic does, whatever the compiler's
 * -ffp-contract (no fused multiply-add: see analog() in io_board_app.c).
 */
#ifndef IO_BOARD_APP_H
#define IO_BOARD_APP_H

#include <stdbool.h>
#include <stdint.h>

#include "fcan_io_board.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Digital outputs on this board type. */
#define IO_BOARD_OUTPUTS FCAN_IO_BOARD_OUT_MAX_COUNT
/* Digital inputs on this board type. */
#define IO_BOARD_INPUTS FCAN_IO_BOARD_IN_MAX_COUNT
/* Analog channels of the sensor. */
#define IO_BOARD_CHANNELS 16
/* Relay settling time (ms) when an output's `min_on_ms` is 0. */
#define IO_BOARD_SETTLE_MS 20

/* An output switch waiting for its relay to settle before the reply goes out. */
typedef struct {
    bool pending;
    bool on;
    uint16_t settle_ms;
    uint32_t due_us;
    fcan_deferred_t token;
} io_board_pending_set_t;

/* The whole firmware: the node and the application. Read the fields, do not write
 * them. */
typedef struct {
    /* The node (in the RAM given to io_board_app_init); NULL before init. */
    fcan_node_t *node;
    /* Outputs, inputs and analog sensors wired (config.counts). */
    uint8_t counts[FCAN_IO_BOARD_ARRAYS];

    /* The level each output drives. */
    bool outputs[IO_BOARD_OUTPUTS];
    io_board_pending_set_t pending[IO_BOARD_OUTPUTS];
    /* The analog sensor's params (gain, offset, rate), as last committed. */
    fcan_io_board_analog_sensor_params_t analog;
    /* Times `calibrate` ran. */
    uint32_t calibrations;
    /* Last accepted `configure` channel mask (all 16 channels at boot). */
    uint16_t channel_mask;
    /* STARTED and no MASTER_LOST / PLAN_RESET since. */
    bool master_present;

    bool inputs[IO_BOARD_INPUTS];
    uint32_t edges[IO_BOARD_INPUTS];
    /* Each output's last published level: -1 none yet, else 0 or 1. */
    int8_t published_outputs[IO_BOARD_OUTPUTS];
    uint32_t next_sample_us;
    uint16_t sequence;

    /* The clock of the poll running (the handlers' now). */
    uint32_t now_us;
    /* The board's callbacks and their pointer (config). */
    fcan_transmit_fn transmit;
    fcan_event_fn event;
    void *user;
} io_board_app_t;

/*
 * Boots the node in `ram` and the application. `config` as for fcan_io_board_init:
 * node id, controller, boot id, the counts wired (outputs, inputs, analog sensors),
 * `transmit` (required) and `event` (optional: told every event after the application
 * has handled it; it must not call the node), both called with `config->user`.
 * Returns FCAN_OK or the FCAN_ERR_* of fcan_io_board_init.
 */
int32_t io_board_app_init(io_board_app_t *app, fcan_io_board_ram_t *ram,
                          const fcan_io_board_config_t *config);

/* A frame from the bus, received at `now_us` (µs, wrapping). FCAN_OK or FCAN_ERR_*. */
int32_t io_board_app_receive(io_board_app_t *app, const fcan_frame_t *frame, uint32_t now_us);

/* Runs the board's logic (outputs, inputs, analog sensor), then the node. FCAN_OK or
 * FCAN_ERR_*. Call it after receiving frames and at least by io_board_app_poll_at. */
int32_t io_board_app_poll(io_board_app_t *app, uint32_t now_us);

/* When io_board_app_poll is next due if no frame arrives first (the node's deadline and
 * the application's: a settling relay, an input edge, the next analog sample): writes
 * it to `*deadline_us` and returns 1, or returns 0 when nothing is scheduled. */
int32_t io_board_app_poll_at(io_board_app_t *app, uint32_t now_us, uint32_t *deadline_us);

/* The level output `i` drives: 0 or 1, or -1 when `i` is out of range. */
int io_board_app_output(const io_board_app_t *app, uint32_t i);

#ifdef __cplusplus
}
#endif

#endif /* IO_BOARD_APP_H */
