/*
 * The glue with the real node: libfcan_node.a (the Rust runtime behind fcan.h), the
 * generated I/O-board code (fcan-codegen c schema/examples/io_board.yaml) and the
 * example's application (examples/c-io-board/app/io_board_app.c), on the fake HAL
 * (fake/stm32_hal_fdcan_fake.c). The board's code is what a CubeMX project writes: the
 * two HAL callbacks calling the glue, fcan_stm32_fdcan_init + HAL_FDCAN_Start, the node's
 * transmit = fcan_stm32_fdcan_transmit, and a loop of ingest + poll.
 *
 *   transmit: every CAN FD length, standard / extended, Classical / FD / FD+BRS, to the
 *     HAL header field by field; illegal frames dropped and counted; a full Tx FIFO (free
 *     level 0, or the HAL call failing in queue mode) refuses and the node offers the
 *     frame again;
 *   end to end: conformance/boot-io-board-fd.txt replayed through the glue and the fake
 *     HAL, as tests/tests/conformance.rs replays it (poll at each tick; the frames the
 *     bus took from the fake Tx FIFO must be the `N` lines of the tick, exactly and in
 *     order; then the tick's `M` frames arrive in the Rx FIFO 0, the interrupt runs, the
 *     loop ingests; the `topic` lines checked): with a large Tx FIFO, with the G4's
 *     3-element Tx FIFO / queue (the loop polling again within the tick while frames
 *     were refused), and with bus-offs in the middle (counted, the peripheral restarted,
 *     the transcript still matched exactly);
 *   bus-off: counting, leaving bus-off not counted, refusals until the loop restarts,
 *     a failed restart tried again.
 *
 *   test_glue TRANSCRIPT      (tests/run.sh passes conformance/boot-io-board-fd.txt)
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fcan_stm32_fdcan.h"
#include "io_board_app.h"

#include "check.h"

/* ---- the board ---------------------------------------------------------------------- */

static FDCAN_GlobalTypeDef inst;
static FDCAN_HandleTypeDef hfdcan1;
static fcan_stm32_fdcan_t can;
static fcan_io_board_ram_t ram;
static io_board_app_t app;
static uint32_t now_us;

void HAL_FDCAN_RxFifo0Callback(FDCAN_HandleTypeDef *hfdcan, uint32_t RxFifo0ITs)
{
    fcan_stm32_fdcan_on_rx_fifo0(&can, hfdcan, RxFifo0ITs, now_us);
}

void HAL_FDCAN_ErrorStatusCallback(FDCAN_HandleTypeDef *hfdcan, uint32_t ErrorStatusITs)
{
    fcan_stm32_fdcan_on_error_status(&can, hfdcan, ErrorStatusITs);
}

static fcan_stm32_fdcan_counters_t glue_counters(void)
{
    fcan_stm32_fdcan_counters_t c;
    memset(&c, 0xEE, sizeof c);
    CHECK_EQ(fcan_stm32_fdcan_counters(&can, &c), 0);
    return c;
}

static fcan_counters_t node_counters(void)
{
    fcan_counters_t c;
    memset(&c, 0, sizeof c);
    CHECK_EQ(fcan_node_counters(app.node, &c), FCAN_OK);
    return c;
}

/* The peripheral as MX_FDCAN1_Init leaves it, then the glue's init and HAL_FDCAN_Start. */
static void hal_setup(uint32_t tx_fifo, uint32_t rx_fifo, int queue_mode)
{
    fake_fdcan_init(&hfdcan1, &inst);
    fake_fdcan_set_tx_size(&inst, tx_fifo);
    fake_fdcan_set_rx_size(&inst, rx_fifo);
    if (queue_mode) {
        hfdcan1.Init.TxFifoQueueMode = FDCAN_TX_QUEUE_OPERATION;
    }
    CHECK_EQ(HAL_FDCAN_ConfigGlobalFilter(&hfdcan1, FDCAN_ACCEPT_IN_RX_FIFO0,
                                          FDCAN_ACCEPT_IN_RX_FIFO0, FDCAN_REJECT_REMOTE,
                                          FDCAN_REJECT_REMOTE),
             HAL_OK);
    CHECK_EQ(fcan_stm32_fdcan_init(&can, &hfdcan1), 0);
    CHECK_EQ(HAL_FDCAN_Start(&hfdcan1), HAL_OK);
}

/* A frame the bus took, decoded from the HAL header independently of the glue. */
static const uint8_t dlc_bytes[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64};

typedef struct {
    uint32_t id;
    int ext, fd, brs;
    uint32_t len;
    uint8_t data[64];
} wire_frame_t;

static wire_frame_t from_tx(const fake_fdcan_tx_t *t)
{
    wire_frame_t w;
    uint32_t dlc = t->header.DataLength >> FAKE_HAL_DLC_SHIFT;
    memset(&w, 0, sizeof w);
    w.id = t->header.Identifier;
    w.ext = t->header.IdType == FDCAN_EXTENDED_ID;
    w.fd = t->header.FDFormat == FDCAN_FD_CAN;
    w.brs = t->header.BitRateSwitch == FDCAN_BRS_ON;
    w.len = dlc < 16u ? dlc_bytes[dlc] : 0xFFu;
    memcpy(w.data, t->data, w.len <= 64u ? w.len : 64u);
    return w;
}

static void print_frame(FILE *to, const wire_frame_t *f)
{
    uint32_t i;
    fprintf(to, f->ext ? "%08lX" : "%03lX", (unsigned long)f->id);
    fprintf(to, f->fd ? "##%d" : "#", f->brs);
    for (i = 0; i < f->len && i < 64u; i++) {
        fprintf(to, "%02X", f->data[i]);
    }
}

static int same_frame(const wire_frame_t *a, const wire_frame_t *b)
{
    return a->id == b->id && a->ext == b->ext && a->fd == b->fd && a->brs == b->brs &&
           a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

/* ---- the transcript (conformance/README.md) ---------------------------------------- */

enum { EV_MASTER, EV_NODE, EV_TOPIC };

typedef struct {
    uint32_t t;
    int kind;
    uint32_t line;
    wire_frame_t frame; /* topic: id = block << 8 | topic, data / len the bytes */
} event_t;

typedef struct {
    uint8_t node_id;
    int fd_capable;
    uint32_t boot_id;
    uint8_t wired[FCAN_IO_BOARD_ARRAYS];
    uint32_t tick_us, end_us;
    event_t *ev;
    size_t n_ev;
} transcript_t;

static int parse_hex_bytes(const char *s, uint8_t *out, uint32_t *len)
{
    size_t n = strlen(s), i;
    *len = 0;
    if (strcmp(s, "-") == 0) {
        return 0;
    }
    if (n % 2u != 0u || n / 2u > 64u) {
        return -1;
    }
    for (i = 0; i < n; i += 2) {
        char b[3] = {s[i], s[i + 1], 0};
        char *end;
        if (!isxdigit((unsigned char)b[0]) || !isxdigit((unsigned char)b[1])) {
            return -1;
        }
        out[i / 2u] = (uint8_t)strtoul(b, &end, 16);
    }
    *len = (uint32_t)(n / 2u);
    return 0;
}

/* candump -L: ID#DATA (Classical) or ID##<flags>DATA (FD, flags bit 0 = BRS); a 3-digit
 * ID is standard. */
static int parse_frame(const char *s, wire_frame_t *f)
{
    const char *hash = strchr(s, '#');
    char idtext[16];
    size_t idlen;
    memset(f, 0, sizeof f[0]);
    if (hash == NULL || (idlen = (size_t)(hash - s)) == 0u || idlen >= sizeof idtext) {
        return -1;
    }
    memcpy(idtext, s, idlen);
    idtext[idlen] = 0;
    f->id = (uint32_t)strtoul(idtext, NULL, 16);
    f->ext = idlen != 3u;
    if (hash[1] == '#') {
        char flag[2] = {hash[2], 0};
        if (!isxdigit((unsigned char)flag[0])) {
            return -1;
        }
        f->fd = 1;
        f->brs = (strtoul(flag, NULL, 16) & 1u) != 0u;
        return parse_hex_bytes(hash + 3, f->data, &f->len);
    }
    return parse_hex_bytes(hash + 1, f->data, &f->len);
}

static int load_transcript(const char *path, transcript_t *t)
{
    FILE *in = fopen(path, "r");
    char line[1024];
    uint32_t lineno = 0;
    size_t cap = 0;
    memset(t, 0, sizeof *t);
    if (in == NULL) {
        perror(path);
        return -1;
    }
    while (fgets(line, sizeof line, in) != NULL) {
        char *w[6];
        int nw = 0;
        char *p = line, *cut;
        lineno++;
        /* Comments: a line starting with '#', or whitespace then '#'. */
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        if (*p == '#') {
            continue;
        }
        for (cut = p; *cut; cut++) {
            if ((*cut == ' ' || *cut == '\t') && cut[1] == '#') {
                *cut = 0;
                break;
            }
        }
        for (w[nw] = strtok(p, " \t\r\n"); w[nw] != NULL && nw < 5;
             w[++nw] = strtok(NULL, " \t\r\n")) {
        }
        if (nw == 0) {
            continue;
        }
        if (!isdigit((unsigned char)w[0][0])) {
            if (strcmp(w[0], "node_id") == 0 && nw > 1) {
                t->node_id = (uint8_t)strtoul(w[1], NULL, 10);
            } else if (strcmp(w[0], "boot_id") == 0 && nw > 1) {
                t->boot_id = (uint32_t)strtoul(w[1], NULL, 0);
            } else if (strcmp(w[0], "fd_capable") == 0 && nw > 1) {
                t->fd_capable = strcmp(w[1], "true") == 0;
            } else if (strcmp(w[0], "tick_us") == 0 && nw > 1) {
                t->tick_us = (uint32_t)strtoul(w[1], NULL, 10);
            } else if (strcmp(w[0], "end_us") == 0 && nw > 1) {
                t->end_us = (uint32_t)strtoul(w[1], NULL, 10);
            } else if (strcmp(w[0], "wired") == 0 && nw == 1 + FCAN_IO_BOARD_ARRAYS) {
                int i;
                for (i = 0; i < FCAN_IO_BOARD_ARRAYS; i++) {
                    t->wired[i] = (uint8_t)strtoul(w[1 + i], NULL, 10);
                }
            }
            continue;
        }
        if (nw < 3) {
            fprintf(stderr, "%s:%lu: short event\n", path, (unsigned long)lineno);
            fclose(in);
            return -1;
        }
        if (strcmp(w[1], "publish") == 0) {
            continue; /* the master's application: not replayed against a node */
        }
        if (t->n_ev == cap) {
            event_t *grown;
            cap = cap ? cap * 2u : 64u;
            grown = (event_t *)realloc(t->ev, cap * sizeof *grown);
            if (grown == NULL) {
                fclose(in);
                return -1;
            }
            t->ev = grown;
        }
        {
            event_t *e = &t->ev[t->n_ev];
            memset(e, 0, sizeof *e);
            e->t = (uint32_t)strtoul(w[0], NULL, 10);
            e->line = lineno;
            if (strcmp(w[1], "M") == 0 || strcmp(w[1], "N") == 0) {
                e->kind = w[1][0] == 'M' ? EV_MASTER : EV_NODE;
                if (parse_frame(w[2], &e->frame) != 0) {
                    fprintf(stderr, "%s:%lu: bad frame %s\n", path, (unsigned long)lineno, w[2]);
                    fclose(in);
                    return -1;
                }
            } else if (strcmp(w[1], "topic") == 0 && nw == 5) {
                e->kind = EV_TOPIC;
                e->frame.id = ((uint32_t)strtoul(w[2], NULL, 10) << 8) |
                              (uint32_t)strtoul(w[3], NULL, 10);
                if (parse_hex_bytes(w[4], e->frame.data, &e->frame.len) != 0) {
                    fclose(in);
                    return -1;
                }
            } else {
                fprintf(stderr, "%s:%lu: unknown event %s\n", path, (unsigned long)lineno, w[1]);
                fclose(in);
                return -1;
            }
            t->n_ev++;
        }
    }
    fclose(in);
    /* Events in time order, file order within a time (the file is already so; checked). */
    {
        size_t i;
        for (i = 1; i < t->n_ev; i++) {
            if (t->ev[i].t < t->ev[i - 1].t || t->ev[i].t % t->tick_us != 0u) {
                fprintf(stderr, "%s:%lu: event out of order or off the tick grid\n", path,
                        (unsigned long)t->ev[i].line);
                return -1;
            }
        }
    }
    if (t->tick_us == 0u || t->n_ev == 0u) {
        fprintf(stderr, "%s: no tick_us or no events\n", path);
        return -1;
    }
    return 0;
}

/* ---- the player ------------------------------------------------------------------- */

static transcript_t tr;

typedef struct {
    const char *name;
    uint32_t tx_fifo, rx_fifo;
    int queue_mode;
    /* Poll again at the same µs while the glue refused frames (a small Tx FIFO: the loop
     * comes back as soon as the bus took some). */
    int repoll;
    /* Ticks after whose frames the controller goes bus-off. */
    const uint32_t *bus_off_at;
    size_t n_bus_off;
} variant_t;

typedef struct {
    size_t ev; /* first event of the next tick */
    uint32_t master_frames, node_frames, topics, polls;
} player_t;

static int32_t boot_board(void)
{
    fcan_io_board_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.node_id = tr.node_id;
    cfg.controller = tr.fd_capable ? FCAN_CONTROLLER_FD : FCAN_CONTROLLER_CLASSIC;
    cfg.boot_id = tr.boot_id;
    memcpy(cfg.counts, tr.wired, sizeof cfg.counts);
    cfg.transmit = fcan_stm32_fdcan_transmit;
    cfg.user = &can;
    return io_board_app_init(&app, &ram, &cfg);
}

/* Runs the node's side of one tick up to the frames it sends; the bus takes them. */
#define SENT_MAX 64u
static wire_frame_t sent[SENT_MAX];
static uint32_t n_sent;

static void bus_take_all(void)
{
    fake_fdcan_tx_t t;
    while (fake_fdcan_bus_take(&inst, &t)) {
        if (n_sent < SENT_MAX) {
            sent[n_sent] = from_tx(&t);
        }
        n_sent++;
    }
}

static void poll_node(player_t *p, const variant_t *v, uint32_t now)
{
    int polls;
    now_us = now;
    for (polls = 0; polls < 64; polls++) {
        uint32_t refused = can.tx_refused;
        CHECK_EQ(io_board_app_poll(&app, now), FCAN_OK);
        p->polls++;
        bus_take_all();
        if (!v->repoll || can.tx_refused == refused) {
            break;
        }
    }
}

/* The tick's events: [p->ev, *end). */
static size_t tick_end(const player_t *p, uint32_t now)
{
    size_t e = p->ev;
    while (e < tr.n_ev && tr.ev[e].t == now) {
        e++;
    }
    return e;
}

static int compare_sent(const player_t *p, size_t end, uint32_t now, const char *name)
{
    uint32_t k = 0;
    size_t e;
    int ok = n_sent <= SENT_MAX;
    for (e = p->ev; e < end && ok; e++) {
        if (tr.ev[e].kind == EV_NODE) {
            ok = k < n_sent && same_frame(&sent[k], &tr.ev[e].frame);
            k++;
        }
    }
    if (ok && k == n_sent) {
        return 1;
    }
    fprintf(stderr, "FAIL %s: the frames sent at %lu us differ\n", name, (unsigned long)now);
    for (e = p->ev; e < end; e++) {
        if (tr.ev[e].kind == EV_NODE) {
            fprintf(stderr, "    want ");
            print_frame(stderr, &tr.ev[e].frame);
            fprintf(stderr, "   (line %lu)\n", (unsigned long)tr.ev[e].line);
        }
    }
    for (k = 0; k < n_sent && k < SENT_MAX; k++) {
        fprintf(stderr, "    sent ");
        print_frame(stderr, &sent[k]);
        fprintf(stderr, "\n");
    }
    check_failures++;
    return 0;
}

static void run_interrupt_if_pending(void)
{
    if ((inst.IR & inst.IE) != 0u) {
        HAL_FDCAN_IRQHandler(&hfdcan1);
    }
}

/* After the node ran at `now`: the master's frames arrive, the loop ingests, the topics
 * are checked. */
static int deliver_and_ingest(player_t *p, const variant_t *v, size_t end, uint32_t now,
                              const char *name)
{
    size_t e, i;
    now_us = now;
    for (e = p->ev; e < end; e++) {
        const wire_frame_t *f = &tr.ev[e].frame;
        if (tr.ev[e].kind != EV_MASTER) {
            continue;
        }
        /* The interrupt runs when the hardware FIFO is full; otherwise frames pile up
         * and one interrupt drains several. */
        if (inst.rx_fill == inst.rx_size) {
            HAL_FDCAN_IRQHandler(&hfdcan1);
        }
        CHECK_EQ(fake_fdcan_receive_frame(&inst, f->id, f->ext, f->fd, f->brs, f->data, f->len),
                 0);
        p->master_frames++;
    }
    run_interrupt_if_pending();
    for (i = 0; i < v->n_bus_off; i++) {
        if (v->bus_off_at[i] == now) {
            fake_fdcan_enter_bus_off(&inst);
            HAL_FDCAN_IRQHandler(&hfdcan1);
        }
    }
    CHECK(fcan_stm32_fdcan_ingest(&can, app.node) >= 0);
    run_interrupt_if_pending(); /* e.g. the bus-off status change the restart caused */
    for (e = p->ev; e < end; e++) {
        uint8_t topic[64];
        int32_t n;
        const event_t *ev = &tr.ev[e];
        if (ev->kind != EV_TOPIC) {
            continue;
        }
        n = fcan_node_topic(app.node, (uint8_t)(ev->frame.id >> 8), (uint8_t)ev->frame.id,
                            topic, sizeof topic, NULL);
        if (n != (int32_t)ev->frame.len || memcmp(topic, ev->frame.data, ev->frame.len) != 0) {
            fprintf(stderr, "FAIL %s: topic %lu.%lu at %lu us (line %lu)\n", name,
                    (unsigned long)(ev->frame.id >> 8), (unsigned long)(ev->frame.id & 0xFFu),
                    (unsigned long)now, (unsigned long)ev->line);
            check_failures++;
            return 0;
        }
        p->topics++;
    }
    p->ev = end;
    return 1;
}

static int play_tick(player_t *p, const variant_t *v, uint32_t now)
{
    size_t end = tick_end(p, now);
    n_sent = 0;
    poll_node(p, v, now);
    if (!compare_sent(p, end, now, v->name)) {
        return 0;
    }
    p->node_frames += n_sent;
    return deliver_and_ingest(p, v, end, now, v->name);
}

static int begin(player_t *p, const variant_t *v)
{
    memset(p, 0, sizeof *p);
    hal_setup(v->tx_fifo, v->rx_fifo, v->queue_mode);
    CHECK_EQ(boot_board(), FCAN_OK);
    return app.node != NULL;
}

/* Plays ticks from `from` to `to` inclusive. */
static int play(player_t *p, const variant_t *v, uint32_t from, uint32_t to)
{
    uint32_t now;
    for (now = from;; now += tr.tick_us) {
        if (!play_tick(p, v, now)) {
            return 0;
        }
        if (to - now < tr.tick_us) {
            return 1;
        }
    }
}

static uint32_t count_kind(int kind)
{
    size_t i;
    uint32_t n = 0;
    for (i = 0; i < tr.n_ev; i++) {
        n += tr.ev[i].kind == kind;
    }
    return n;
}

static void replay_whole(const variant_t *v)
{
    player_t p;
    fcan_stm32_fdcan_counters_t c;
    if (!begin(&p, v) || !play(&p, v, 0, tr.end_us)) {
        return;
    }
    c = glue_counters();
    CHECK_EQ(p.ev, tr.n_ev);
    CHECK_EQ(p.master_frames, count_kind(EV_MASTER));
    CHECK_EQ(p.node_frames, count_kind(EV_NODE));
    CHECK_EQ(p.topics, count_kind(EV_TOPIC));
    CHECK_EQ(c.rx_frames, p.master_frames);
    CHECK_EQ(c.tx_frames, p.node_frames);
    CHECK_EQ(c.rx_ring_full + c.rx_bad_length + c.rx_remote + c.rx_node_refused, 0);
    CHECK_EQ(c.tx_bad_frame, 0);
    CHECK_EQ(c.bus_off, v->n_bus_off);
    CHECK_EQ(c.restarts, v->n_bus_off);
    CHECK_EQ(inst.stops, v->n_bus_off);
    CHECK_EQ(inst.starts, 1u + v->n_bus_off);
    CHECK_EQ(c.restart_failed, 0);
    CHECK_EQ(inst.misuse, 0);
    CHECK_EQ(inst.rx_lost, 0);
    CHECK_EQ(inst.tx_discarded, 0);
    if (!v->repoll) {
        CHECK_EQ(c.tx_refused, 0);
    }
    CHECK_EQ(node_counters().tx_refused, c.tx_refused);
    CHECK_EQ(node_counters().tx_frames, p.node_frames);
    {
        fcan_counters_t n = node_counters();
        CHECK_EQ(n.rx_handled + n.rx_malformed + n.rx_ignored + n.rx_bad_state,
                 p.master_frames);
    }
    printf("     %s: %lu ticks, %lu node frames matched, %lu master frames through the Rx FIFO, "
           "%lu topic checks; %lu polls, %lu transmits refused and retried, %lu bus-off(s) "
           "recovered\n",
           v->name, (unsigned long)(tr.end_us / tr.tick_us + 1u),
           (unsigned long)p.node_frames, (unsigned long)p.master_frames,
           (unsigned long)p.topics, (unsigned long)p.polls, (unsigned long)c.tx_refused,
           (unsigned long)c.restarts);
}

/* ---- tests ---------------------------------------------------------------------- */

static const uint8_t fd_lengths[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64};

/* Every length, both id kinds, every format: the HAL header field by field. */
static void test_tx_every_length(void)
{
    static const uint32_t std_ids[] = {0x000u, 0x2A5u, 0x7FFu};
    static const uint32_t ext_ids[] = {0x00000000u, 0x12345678u, 0x1FFFFFFFu};
    uint32_t expected = 0;
    int format, ext;
    size_t li, ii;

    hal_setup(32, 3, 0);
    for (format = 0; format < 4; format++) {
        /* Classical, Classical with a stray BRS flag (never sent as BRS), FD, FD+BRS. */
        int fd = format >= 2, brs_flag = format == 1 || format == 3;
        for (ext = 0; ext < 2; ext++) {
            for (li = 0; li < sizeof fd_lengths; li++) {
                uint32_t len = fd_lengths[li];
                if (!fd && len > 8u) {
                    continue;
                }
                for (ii = 0; ii < 3; ii++) {
                    fcan_frame_t f;
                    fake_fdcan_tx_t t;
                    uint32_t i;
                    memset(&f, 0, sizeof f);
                    f.id = ext ? ext_ids[ii] : std_ids[ii];
                    f.len = (uint8_t)len;
                    f.flags = (uint8_t)((ext ? FCAN_FRAME_EXTENDED : 0) |
                                        (fd ? FCAN_FRAME_FD : 0) |
                                        (brs_flag ? FCAN_FRAME_BRS : 0));
                    for (i = 0; i < 64u; i++) {
                        f.data[i] = (uint8_t)(i < len ? 0x40u + i * 3u + ii : 0xEEu);
                    }
                    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 0);
                    CHECK_EQ(fake_fdcan_bus_take(&inst, &t), 1);
                    CHECK_EQ(t.header.Identifier, f.id);
                    CHECK_EQ(t.header.IdType, ext ? FDCAN_EXTENDED_ID : FDCAN_STANDARD_ID);
                    CHECK_EQ(t.header.TxFrameType, FDCAN_DATA_FRAME);
                    CHECK_EQ(t.header.DataLength, fake_fdcan_hal_code(fake_fdcan_dlc_of_len(len)));
                    CHECK_EQ(t.header.ErrorStateIndicator, FDCAN_ESI_ACTIVE);
                    CHECK_EQ(t.header.BitRateSwitch,
                             (fd && brs_flag) ? FDCAN_BRS_ON : FDCAN_BRS_OFF);
                    CHECK_EQ(t.header.FDFormat, fd ? FDCAN_FD_CAN : FDCAN_CLASSIC_CAN);
                    CHECK_EQ(t.header.TxEventFifoControl, FDCAN_NO_TX_EVENTS);
                    CHECK_EQ(t.header.MessageMarker, 0);
                    CHECK(memcmp(t.data, f.data, len) == 0);
                    expected++;
                }
            }
        }
    }
    CHECK_EQ(glue_counters().tx_frames, expected);
    CHECK_EQ(expected, 3u * 2u * (9u + 9u + 16u + 16u));
    CHECK_EQ(inst.misuse, 0);
    if (inst.misuse) {
        fprintf(stderr, "    fake HAL: %s\n", inst.misuse_what);
    }
}

/* Frames no controller could send: dropped (returns 0, the node moves on), counted, the
 * HAL never called. */
static void test_tx_illegal_dropped(void)
{
    static const struct {
        uint32_t id;
        uint8_t len, flags;
    } bad[] = {
        {0x100, 9, FCAN_FRAME_FD},       {0x100, 63, FCAN_FRAME_FD},
        {0x100, 65, FCAN_FRAME_FD},      {0x100, 12, 0},
        {0x100, 9, 0},                   {0x800, 8, 0},
        {0x20000000, 8, FCAN_FRAME_EXTENDED | FCAN_FRAME_FD},
        {0xFFFFFFFF, 0, FCAN_FRAME_EXTENDED},
    };
    size_t i;
    hal_setup(32, 3, 0);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fcan_frame_t f;
        memset(&f, 0, sizeof f);
        f.id = bad[i].id;
        f.len = bad[i].len;
        f.flags = bad[i].flags;
        CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 0);
    }
    CHECK_EQ(glue_counters().tx_bad_frame, sizeof bad / sizeof bad[0]);
    CHECK_EQ(glue_counters().tx_frames, 0);
    CHECK_EQ(inst.calls_add_message, 0);
    CHECK_EQ(fcan_stm32_fdcan_transmit(NULL, NULL), 1);
}

/* Full: FIFO mode, free level 0: refused before the HAL is asked (no HAL error code
 * raised); queue mode (free level reads 0 there): the HAL call fails and is refused. */
static void test_tx_full_refuses(void)
{
    fcan_frame_t f;
    fake_fdcan_tx_t taken;
    memset(&f, 0, sizeof f);
    f.id = 0x123;
    f.len = 8;
    f.flags = FCAN_FRAME_FD | FCAN_FRAME_BRS;

    hal_setup(2, 3, 0);
    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 0);
    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 0);
    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 1);
    CHECK_EQ(inst.calls_add_message, 2);
    CHECK_EQ(hfdcan1.ErrorCode, HAL_FDCAN_ERROR_NONE);
    inst.tx_free_level_override = 0; /* "full" while the HAL would still take one */
    CHECK_EQ(fake_fdcan_bus_take(&inst, &taken), 1);
    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 1);
    CHECK_EQ(inst.calls_add_message, 2);
    inst.tx_free_level_override = -1;
    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 0);
    CHECK_EQ(glue_counters().tx_refused, 2);
    CHECK_EQ(glue_counters().tx_frames, 3);

    hal_setup(2, 3, 1);
    CHECK_EQ(HAL_FDCAN_GetTxFifoFreeLevel(&hfdcan1), 0); /* queue mode: always 0 */
    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 0);
    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 0);
    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 1);
    CHECK_EQ(inst.calls_add_message, 3);
    CHECK((hfdcan1.ErrorCode & HAL_FDCAN_ERROR_FIFO_FULL) != 0u);
    CHECK_EQ(glue_counters().tx_refused, 1);
    CHECK_EQ(glue_counters().tx_frames, 2);
    CHECK_EQ(inst.misuse, 0);
}

/* The ANNOUNCE (three frames at 313000 us) meets a full Tx FIFO: the node keeps the frames
 * and offers them again; once the FIFO drains, one element at a time, they leave in
 * order, and the rest of the transcript matches exactly. */
static void test_tx_full_node_retries(void)
{
    static const variant_t v = {"tx full at the ANNOUNCE", 32, 3, 0, 0, NULL, 0};
    player_t p;
    size_t end;
    uint32_t polls = 0, node_refused_before, glue_refused_before;
    const uint32_t t_announce = 313000;

    if (!begin(&p, &v) || !play(&p, &v, 0, t_announce - tr.tick_us)) {
        return;
    }
    end = tick_end(&p, t_announce);
    node_refused_before = node_counters().tx_refused;
    glue_refused_before = glue_counters().tx_refused;
    /* Full: nothing leaves, the node counts the refusal. */
    inst.tx_free_level_override = 0;
    n_sent = 0;
    now_us = t_announce;
    CHECK_EQ(io_board_app_poll(&app, t_announce), FCAN_OK);
    bus_take_all();
    CHECK_EQ(n_sent, 0);
    CHECK(node_counters().tx_refused > node_refused_before);
    CHECK(glue_counters().tx_refused > glue_refused_before);
    /* A one-element FIFO: each poll gets one frame out; the bus takes it. */
    inst.tx_free_level_override = -1;
    fake_fdcan_set_tx_size(&inst, 1);
    while (n_sent < 3u && polls < 10u) {
        CHECK_EQ(io_board_app_poll(&app, t_announce), FCAN_OK);
        bus_take_all();
        polls++;
    }
    CHECK_EQ(polls, 3);
    if (!compare_sent(&p, end, t_announce, v.name)) {
        return;
    }
    CHECK(node_counters().tx_refused >= node_refused_before + 3u);
    if (!deliver_and_ingest(&p, &v, end, t_announce, v.name)) {
        return;
    }
    fake_fdcan_set_tx_size(&inst, 32);
    if (!play(&p, &v, t_announce + tr.tick_us, tr.end_us)) {
        return;
    }
    CHECK_EQ(p.ev, tr.n_ev);
    CHECK_EQ(inst.misuse, 0);
}

/* Bus-off, the ANNOUNCE due: the glue refuses while the restart is pending (the node
 * keeps the frames); the loop's ingest restarts the peripheral; the frames then leave in
 * order and the transcript goes on exactly. */
static void test_bus_off_node_frames_kept(void)
{
    static const variant_t v = {"bus-off before the ANNOUNCE", 32, 3, 0, 0, NULL, 0};
    player_t p;
    size_t end;
    const uint32_t t_announce = 313000;
    fcan_stm32_fdcan_counters_t c;

    if (!begin(&p, &v) || !play(&p, &v, 0, t_announce - tr.tick_us)) {
        return;
    }
    end = tick_end(&p, t_announce);
    fake_fdcan_enter_bus_off(&inst);
    HAL_FDCAN_IRQHandler(&hfdcan1);
    c = glue_counters();
    CHECK_EQ(c.bus_off, 1);
    CHECK_EQ(c.restarts, 0);
    n_sent = 0;
    now_us = t_announce;
    CHECK_EQ(io_board_app_poll(&app, t_announce), FCAN_OK);
    bus_take_all();
    CHECK_EQ(n_sent, 0);
    CHECK_EQ(inst.calls_add_message, p.node_frames); /* the HAL was not even asked */
    CHECK(glue_counters().tx_refused > 0u);
    /* The main loop: ingest restarts, then polls again. */
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, app.node), 0);
    CHECK_EQ(inst.stops, 1);
    CHECK_EQ(inst.starts, 2);
    CHECK_EQ(hfdcan1.State, HAL_FDCAN_STATE_BUSY);
    run_interrupt_if_pending(); /* "bus-off status changed" on leaving: not counted */
    CHECK_EQ(glue_counters().bus_off, 1);
    CHECK_EQ(glue_counters().restarts, 1);
    CHECK_EQ(io_board_app_poll(&app, t_announce), FCAN_OK);
    bus_take_all();
    if (!compare_sent(&p, end, t_announce, v.name)) {
        return;
    }
    if (!deliver_and_ingest(&p, &v, end, t_announce, v.name) ||
        !play(&p, &v, t_announce + tr.tick_us, tr.end_us)) {
        return;
    }
    CHECK_EQ(p.ev, tr.n_ev);
    CHECK_EQ(glue_counters().bus_off, 1);
    CHECK_EQ(inst.misuse, 0);
}

/* The error-status callback's cases one by one. */
static void test_bus_off_cases(void)
{
    fcan_frame_t f;
    memset(&f, 0, sizeof f);
    f.id = 0x10;
    f.len = 1;

    hal_setup(3, 3, 0);
    CHECK_EQ(boot_board(), FCAN_OK);
    /* Error-warning / error-passive changes: ignored. */
    fcan_stm32_fdcan_on_error_status(&can, &hfdcan1,
                                     FDCAN_FLAG_ERROR_WARNING | FDCAN_FLAG_ERROR_PASSIVE);
    /* The bus-off flag while PSR.BO is clear (leaving bus-off): ignored. */
    fcan_stm32_fdcan_on_error_status(&can, &hfdcan1, FDCAN_FLAG_BUS_OFF);
    CHECK_EQ(glue_counters().bus_off, 0);
    /* Entering: counted; transmit refused until the loop restarts. */
    fake_fdcan_enter_bus_off(&inst);
    HAL_FDCAN_IRQHandler(&hfdcan1);
    CHECK_EQ(glue_counters().bus_off, 1);
    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 1);
    /* The restart fails (the handle in HAL_FDCAN_STATE_ERROR, as after a Stop timeout):
     * counted, still pending, tried at every ingest. */
    hfdcan1.State = HAL_FDCAN_STATE_ERROR;
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, app.node), 0);
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, app.node), 0);
    CHECK_EQ(glue_counters().restart_failed, 2);
    CHECK_EQ(glue_counters().restarts, 0);
    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 1);
    /* READY again (say the application re-ran HAL_FDCAN_Init): Stop refuses (not BUSY),
     * Start succeeds: restarted. */
    hfdcan1.State = HAL_FDCAN_STATE_READY;
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, app.node), 0);
    CHECK_EQ(glue_counters().restarts, 1);
    CHECK_EQ(hfdcan1.State, HAL_FDCAN_STATE_BUSY);
    run_interrupt_if_pending();
    CHECK_EQ(glue_counters().bus_off, 1);
    CHECK_EQ(fcan_stm32_fdcan_transmit(&can, &f), 0);
    /* Twice more: each counted once, each restarted once. */
    fake_fdcan_enter_bus_off(&inst);
    HAL_FDCAN_IRQHandler(&hfdcan1);
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, app.node), 0);
    run_interrupt_if_pending();
    fake_fdcan_enter_bus_off(&inst);
    HAL_FDCAN_IRQHandler(&hfdcan1);
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, app.node), 0);
    run_interrupt_if_pending();
    CHECK_EQ(glue_counters().bus_off, 3);
    CHECK_EQ(glue_counters().restarts, 3);
    CHECK_EQ(inst.stops, 2);
    CHECK_EQ(inst.starts, 4);
}

static void test_e2e_large_fifo(void)
{
    static const variant_t v = {"Tx FIFO 32 (H7-sized), Rx FIFO 3", 32, 3, 0, 0, NULL, 0};
    replay_whole(&v);
}

static void test_e2e_g4_fifo(void)
{
    static const variant_t v = {"G4: Tx FIFO 3, Rx FIFO 3, loop re-polls", 3, 3, 0, 1, NULL, 0};
    replay_whole(&v);
}

static void test_e2e_g4_queue(void)
{
    static const variant_t v = {"G4: Tx queue 3, Rx FIFO 3, loop re-polls", 3, 3, 1, 1, NULL, 0};
    replay_whole(&v);
}

static void test_e2e_bus_off(void)
{
    /* In the listen window, at the ANNOUNCE_ACK / SCHEMA_READ tick (after its frames
     * reached the ring: they survive the restart), during configuration, right after
     * START, while running. */
    static const uint32_t at[] = {150000, 313000, 316000, 320000, 330000, 340000};
    static const variant_t v = {"bus-off at 6 ticks", 32, 3, 0, 0, at, sizeof at / sizeof at[0]};
    replay_whole(&v);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s conformance/boot-io-board-fd.txt\n", argv[0]);
        return 2;
    }
    if (load_transcript(argv[1], &tr) != 0) {
        return 2;
    }
    printf("fcan STM32 FDCAN glue with the node (fake HAL, FDCAN_DLC_BYTES_12 = 0x%08lX; "
           "%s: %lu events)\n",
           (unsigned long)FDCAN_DLC_BYTES_12, argv[1], (unsigned long)tr.n_ev);
    run_test("tx: every length, std/ext, Classical/FD/BRS", test_tx_every_length);
    run_test("tx: illegal frames dropped and counted", test_tx_illegal_dropped);
    run_test("tx: full FIFO / queue refuses", test_tx_full_refuses);
    run_test("tx: full at the ANNOUNCE, the node retries", test_tx_full_node_retries);
    run_test("bus-off: error-status cases, failed restart retried", test_bus_off_cases);
    run_test("bus-off: the node's frames kept until the restart", test_bus_off_node_frames_kept);
    run_test("e2e: boot-io-board-fd through the glue", test_e2e_large_fifo);
    run_test("e2e: G4-sized Tx FIFO", test_e2e_g4_fifo);
    run_test("e2e: G4-sized Tx queue", test_e2e_g4_queue);
    run_test("e2e: bus-offs in the middle", test_e2e_bus_off);
    free(tr.ev);
    printf("%s: %d tests, %d failed checks\n", check_failures ? "FAIL" : "PASS", check_tests,
           check_failures);
    return check_failures ? 1 : 0;
}
