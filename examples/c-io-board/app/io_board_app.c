/*
 * The I/O board example application: examples/io-board/src/lib.rs in C, statement for
 * statement where the order matters (it decides which frames go out when). See
 * io_board_app.h.
 */
#include "io_board_app.h"

#include <stddef.h>

/* The application of the node a handler runs for: the generated handlers get the node,
 * whose callbacks' `user` pointer is the application (io_board_app_init sets it). No
 * global, so several boards may run in one program, on several threads. */
static io_board_app_t *app_of(fcan_node_t *node)
{
    return (io_board_app_t *)fcan_node_user(node);
}

/* `now` has reached `deadline` on the wrapping µs clock (fcan_core::timing::reached):
 * deadlines are within 2^31 µs of now. */
static bool reached(uint32_t now, uint32_t deadline)
{
    return (now - deadline) < 0x80000000u;
}

/* Rust's `f32 as i16`: truncation toward zero, saturating at the i16 range, NaN to 0
 * (in C an out-of-range conversion is undefined). */
static int16_t saturate_i16(float x)
{
    if (x != x) {
        return 0;
    }
    if (x >= 32767.0f) {
        return 32767;
    }
    if (x <= -32768.0f) {
        return -32768;
    }
    return (int16_t)x;
}

/* The schema defaults of the analog sensor's params (AnalogSensorParams::default). */
static void analog_defaults(fcan_io_board_analog_sensor_params_t *p)
{
    int ch;
    for (ch = 0; ch < IO_BOARD_CHANNELS; ch++) {
        p->gain[ch] = 1.0f;
        p->offset[ch] = 0.0f;
    }
    p->rate_hz = 100;
}

/* ---- handlers the generated code calls (from inside fcan_node_poll) ---------------- */

int32_t fcan_io_board_digital_out_set(fcan_node_t *node, uint8_t block,
                                      const fcan_io_board_digital_out_set_request_t *request,
                                      fcan_io_board_digital_out_set_response_t *response,
                                      const fcan_deferred_t *token)
{
    io_board_app_t *app = app_of(node);
    io_board_pending_set_t *slot;
    uint16_t min_on_ms = 0;
    uint16_t settle_ms;
    int instance = (int)block - (int)FCAN_IO_BOARD_OUT(0);

    (void)response; /* deferred: answered by fcan_io_board_digital_out_set_complete */
    if (app == NULL || instance < 0 || instance >= IO_BOARD_OUTPUTS) {
        return FCAN_REPLY_FAILED;
    }
    slot = &app->pending[instance];
    if (slot->pending) {
        /* One switch in flight per output; the master may retry. */
        return FCAN_REPLY_BUSY;
    }
    /* The relay's settling time is the output's `min_on_ms` param, read when needed. */
    if (fcan_io_board_digital_out_param_min_on_ms(node, block, &min_on_ms) < 0 ||
        min_on_ms == 0) {
        settle_ms = IO_BOARD_SETTLE_MS;
    } else {
        settle_ms = min_on_ms;
    }
    slot->pending = true;
    slot->token = *token;
    slot->on = request->on;
    slot->settle_ms = settle_ms;
    slot->due_us = app->now_us + (uint32_t)settle_ms * 1000u;
    /* The reply goes out when the relay has settled (outputs()). */
    return FCAN_REPLY_ACCEPTED;
}

void fcan_io_board_digital_out_params_changed(fcan_node_t *node, uint8_t block,
                                              uint32_t changed)
{
    (void)node;
    (void)block;
    (void)changed;
}

void fcan_io_board_digital_in_params_changed(fcan_node_t *node, uint8_t block,
                                             uint32_t changed)
{
    (void)node;
    (void)block;
    (void)changed;
}

int32_t fcan_io_board_analog_sensor_configure(
    fcan_node_t *node, uint8_t block,
    const fcan_io_board_analog_sensor_configure_request_t *request,
    fcan_io_board_analog_sensor_configure_response_t *response, const fcan_deferred_t *token)
{
    io_board_app_t *app = app_of(node);
    bool accepted;

    (void)block;
    (void)token;
    if (app == NULL) {
        return FCAN_REPLY_FAILED;
    }
    accepted = request->channel_mask != 0 && request->averaging <= 64;
    if (accepted) {
        app->channel_mask = request->channel_mask;
    }
    response->accepted = accepted;
    return FCAN_REPLY_OK;
}

int32_t fcan_io_board_analog_sensor_calibrate(
    fcan_node_t *node, uint8_t block,
    const fcan_io_board_analog_sensor_calibrate_request_t *request,
    fcan_io_board_analog_sensor_calibrate_response_t *response, const fcan_deferred_t *token)
{
    io_board_app_t *app = app_of(node);

    (void)block;
    (void)request;
    (void)response;
    (void)token;
    if (app == NULL) {
        return FCAN_REPLY_FAILED;
    }
    app->calibrations++;
    return FCAN_REPLY_OK;
}

void fcan_io_board_analog_sensor_params_changed(fcan_node_t *node, uint8_t block,
                                                uint32_t changed)
{
    io_board_app_t *app = app_of(node);
    fcan_io_board_analog_sensor_params_t p;

    (void)changed;
    if (app != NULL && fcan_io_board_analog_sensor_params(node, block, &p) >= 0) {
        app->analog = p;
    }
}

/* ---- callbacks (user = the app) ---------------------------------------------------- */

static int32_t on_transmit(void *user, const fcan_frame_t *frame)
{
    io_board_app_t *app = (io_board_app_t *)user;
    return app->transmit(app->user, frame);
}

static void on_event(void *user, fcan_node_t *node, uint32_t event)
{
    io_board_app_t *app = (io_board_app_t *)user;
    switch (event) {
    case FCAN_EVENT_STARTED:
        app->master_present = true;
        break;
    case FCAN_EVENT_MASTER_LOST:
    case FCAN_EVENT_PLAN_RESET:
        /* Safety: outputs go off when the master is lost (outputs()). */
        app->master_present = false;
        break;
    default:
        break;
    }
    if (app->event != NULL) {
        app->event(app->user, node, event);
    }
}

/* ---- the board ------------------------------------------------------------------- */

int32_t io_board_app_init(io_board_app_t *app, fcan_io_board_ram_t *ram,
                          const fcan_io_board_config_t *config)
{
    fcan_io_board_config_t cfg;
    fcan_io_board_analog_sensor_params_t p;
    int32_t error = FCAN_ERR_ARG;
    int i;

    if (app == NULL || ram == NULL || config == NULL || config->transmit == NULL) {
        return FCAN_ERR_ARG;
    }
    for (i = 0; i < IO_BOARD_OUTPUTS; i++) {
        app->outputs[i] = false;
        app->pending[i].pending = false;
        app->pending[i].on = false;
        app->pending[i].settle_ms = 0;
        app->pending[i].due_us = 0;
        app->published_outputs[i] = -1;
    }
    for (i = 0; i < IO_BOARD_INPUTS; i++) {
        app->inputs[i] = false;
        app->edges[i] = 0;
    }
    for (i = 0; i < FCAN_IO_BOARD_ARRAYS; i++) {
        app->counts[i] = config->counts[i];
    }
    app->calibrations = 0;
    app->channel_mask = 0xFFFF;
    app->master_present = false;
    app->next_sample_us = 0;
    app->sequence = 0;
    app->now_us = 0;
    app->transmit = config->transmit;
    app->event = config->event;
    app->user = config->user;

    cfg = *config;
    cfg.transmit = on_transmit;
    cfg.event = on_event;
    cfg.user = app;
    app->node = fcan_io_board_init(ram, &cfg, &error);
    if (app->node == NULL) {
        return error != FCAN_OK ? error : FCAN_ERR_ARG;
    }
    /* The analog params as the node holds them at boot; the defaults when no sensor is
     * wired. */
    analog_defaults(&app->analog);
    if (fcan_io_board_analog_sensor_params(app->node, FCAN_IO_BOARD_ANALOG(0), &p) >= 0) {
        app->analog = p;
    }
    return FCAN_OK;
}

int32_t io_board_app_receive(io_board_app_t *app, const fcan_frame_t *frame, uint32_t now_us)
{
    if (app == NULL || app->node == NULL) {
        return FCAN_ERR_ARG;
    }
    return fcan_node_ingest(app->node, frame, now_us);
}

/* Completes the switches whose relay has settled and publishes each output's level once
 * per change. */
static void outputs(io_board_app_t *app, uint32_t now_us)
{
    int i;
    for (i = 0; i < IO_BOARD_OUTPUTS; i++) {
        io_board_pending_set_t *p = &app->pending[i];
        bool level;
        /* Master lost: every output off (the application's safe state). */
        if (!app->master_present) {
            app->outputs[i] = false;
        }
        if (p->pending && reached(now_us, p->due_us)) {
            fcan_io_board_digital_out_set_response_t response;
            fcan_deferred_t token = p->token;
            p->pending = false;
            response.success = app->master_present;
            if (response.success) {
                app->outputs[i] = p->on;
            }
            response.settle_ms = p->settle_ms;
            (void)fcan_io_board_digital_out_set_complete(app->node, &token, &response);
        }
        level = app->outputs[i];
        if (i >= app->counts[0]) {
            continue;
        }
        /* Commit-triggered: one frame per change. */
        if (app->published_outputs[i] != (int8_t)level) {
            fcan_io_board_digital_out_state_t state;
            state.on = level;
            state.fault = false;
            if (fcan_io_board_digital_out_publish_state(app->node, FCAN_IO_BOARD_OUT(i),
                                                        &state) == FCAN_OK) {
                app->published_outputs[i] = (int8_t)level;
            }
        }
    }
}

/* Input k toggles every (k + 1) x 250 ms; one `edge` per change. */
static void inputs(io_board_app_t *app, uint32_t now_us)
{
    int k;
    for (k = 0; k < IO_BOARD_INPUTS; k++) {
        uint32_t period;
        bool level;
        if (k >= app->counts[1]) {
            continue;
        }
        period = ((uint32_t)k + 1u) * 250000u;
        level = (now_us / period) % 2u == 1u;
        if (level != app->inputs[k]) {
            fcan_io_board_digital_in_edge_t edge;
            app->inputs[k] = level;
            app->edges[k] += 1u;
            edge.level = level;
            edge.count = app->edges[k];
            (void)fcan_io_board_digital_in_publish_edge(app->node, FCAN_IO_BOARD_IN(k), &edge);
        }
    }
}

/* One sample of every enabled channel at `rate_hz`: a triangle wave per channel,
 * different phase each, scaled by gain and offset. */
static void analog(io_board_app_t *app, uint32_t now_us)
{
    const fcan_io_board_analog_sensor_params_t *p = &app->analog;
    fcan_io_board_analog_sensor_samples_t samples;
    uint32_t rate;
    int ch;

    if (!reached(now_us, app->next_sample_us)) {
        return;
    }
    if (app->counts[2] < 1) {
        return;
    }
    rate = p->rate_hz > 1 ? (uint32_t)p->rate_hz : 1u;
    app->next_sample_us = now_us + 1000000u / rate;
    app->sequence = (uint16_t)(app->sequence + 1u);
    for (ch = 0; ch < IO_BOARD_CHANNELS; ch++) {
        uint32_t phase;
        float tri, centred, value;
        /* Rust's f32 arithmetic rounds after every operation: the product goes through
         * memory, so no compiler fuses it with the addition into a multiply-add (GCC
         * does in its GNU modes on FPUs that have one, e.g. the Cortex-M4F's VFMA). */
        volatile float scaled;
        samples.raw[ch] = 0;
        if ((app->channel_mask & (1u << ch)) == 0) {
            continue;
        }
        phase = (now_us / 1000u + (uint32_t)ch * 97u) % 2000u;
        tri = (float)(phase < 1000u ? phase : 2000u - phase);
        centred = tri - 500.0f;
        scaled = centred * p->gain[ch];
        value = scaled + p->offset[ch];
        samples.raw[ch] = saturate_i16(value);
    }
    samples.sequence = app->sequence;
    (void)fcan_io_board_analog_sensor_publish_samples(app->node, FCAN_IO_BOARD_ANALOG(0),
                                                       &samples);
}

int32_t io_board_app_poll(io_board_app_t *app, uint32_t now_us)
{
    if (app == NULL || app->node == NULL) {
        return FCAN_ERR_ARG;
    }
    outputs(app, now_us);
    inputs(app, now_us);
    analog(app, now_us);
    app->now_us = now_us;
    return fcan_node_poll(app->node, now_us);
}

/* The earlier of two deadlines (relative to now on the wrapping clock). */
static uint32_t earlier(uint32_t now_us, uint32_t a, uint32_t b)
{
    return (a - now_us) <= (b - now_us) ? a : b;
}

int32_t io_board_app_poll_at(io_board_app_t *app, uint32_t now_us, uint32_t *deadline_us)
{
    uint32_t at = 0;
    int32_t have;
    int i;

    if (app == NULL || app->node == NULL || deadline_us == NULL) {
        return FCAN_ERR_ARG;
    }
    have = fcan_node_poll_at(app->node, now_us, &at);
    if (have < 0) {
        return have;
    }
    /* A deadline already passed means now. */
    if (have && reached(now_us, at)) {
        at = now_us;
    }
    for (i = 0; i < IO_BOARD_OUTPUTS; i++) {
        if (app->pending[i].pending) {
            uint32_t due = reached(now_us, app->pending[i].due_us) ? now_us : app->pending[i].due_us;
            at = have ? earlier(now_us, at, due) : due;
            have = 1;
        }
    }
    for (i = 0; i < IO_BOARD_INPUTS && i < app->counts[1]; i++) {
        /* The next multiple of the input's period, or the clock's wrap (where
         * now / period restarts at 0), whichever comes first. */
        uint32_t period = ((uint32_t)i + 1u) * 250000u;
        uint32_t to_edge = period - now_us % period;
        uint32_t to_wrap = 0u - now_us; /* 2^32 - now; 0 when now is 0 */
        uint32_t step = (to_wrap != 0u && to_wrap < to_edge) ? to_wrap : to_edge;
        uint32_t edge = now_us + step;
        at = have ? earlier(now_us, at, edge) : edge;
        have = 1;
    }
    if (app->counts[2] >= 1) {
        uint32_t due = reached(now_us, app->next_sample_us) ? now_us : app->next_sample_us;
        at = have ? earlier(now_us, at, due) : due;
        have = 1;
    }
    if (have) {
        *deadline_us = at;
    }
    return have ? 1 : 0;
}

int io_board_app_output(const io_board_app_t *app, uint32_t i)
{
    if (app == NULL || i >= IO_BOARD_OUTPUTS) {
        return -1;
    }
    return app->outputs[i] ? 1 : 0;
}
