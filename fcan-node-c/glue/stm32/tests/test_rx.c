/*
 * The glue's receive side, seen from the node: this program defines fcan_node_ingest
 * itself (no libfcan_node.a), so every frame the glue hands the node is recorded exactly
 * as the node would get it. Frames are put on the wire of the fake HAL
 * (fake/stm32_hal_fdcan_fake.c) and arrive through its interrupt handler and the
 * board's callbacks, as on a CubeMX board.
 *
 *   every CAN FD length (0..8, 12, 16, 20, 24, 32, 48, 64), standard and extended ids,
 *   Classical / FD / FD+BRS; Classical DLC 9..15 (8 bytes); a DataLength that is no DLC
 *   code and remote frames dropped and counted; the ring: overflow drops the newest and
 *   counts, the frames kept are intact and in order, an interrupt preempting the node
 *   while it reads a slot never changes that slot; FCAN_ERR_REENTRANT keeps the frame;
 *   frames for another FDCAN handle ignored; init activates the notifications.
 *
 * tests/run.sh builds and runs it.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fcan_stm32_fdcan.h"

#include "check.h"

static FDCAN_GlobalTypeDef inst;
static FDCAN_HandleTypeDef hfdcan1;
static FDCAN_GlobalTypeDef inst2;
static FDCAN_HandleTypeDef hfdcan2;
static fcan_stm32_fdcan_t can;
static uint32_t now_us;

/* The board's callbacks, as a CubeMX project writes them. */
void HAL_FDCAN_RxFifo0Callback(FDCAN_HandleTypeDef *hfdcan, uint32_t RxFifo0ITs)
{
    fcan_stm32_fdcan_on_rx_fifo0(&can, hfdcan, RxFifo0ITs, now_us);
}

void HAL_FDCAN_ErrorStatusCallback(FDCAN_HandleTypeDef *hfdcan, uint32_t ErrorStatusITs)
{
    fcan_stm32_fdcan_on_error_status(&can, hfdcan, ErrorStatusITs);
}

/* ---- the node, replaced ---------------------------------------------------------- */

#define GOT_MAX 4096u
static fcan_frame_t got[GOT_MAX];
static uint32_t got_t[GOT_MAX];
static uint32_t n_got;
static int32_t ingest_answer = FCAN_OK;
/* Runs inside fcan_node_ingest: an interrupt preempting the node mid-frame. */
static void (*during_ingest)(void);
static uint32_t slot_changed_under_node;

int32_t fcan_node_ingest(fcan_node_t *node, const fcan_frame_t *frame, uint32_t t)
{
    fcan_frame_t before;
    (void)node;
    if (ingest_answer == FCAN_ERR_REENTRANT) {
        return FCAN_ERR_REENTRANT;
    }
    before = *frame;
    if (during_ingest != NULL) {
        during_ingest();
    }
    if (memcmp(&before, frame, sizeof before) != 0) {
        slot_changed_under_node++;
    }
    if (n_got < GOT_MAX) {
        got[n_got] = *frame;
        got_t[n_got] = t;
        n_got++;
    }
    return ingest_answer;
}

static int node_storage;
#define NODE ((fcan_node_t *)(void *)&node_storage)

/* ---- helpers ---------------------------------------------------------------------- */

static void setup(uint32_t rx_fifo)
{
    fake_fdcan_init(&hfdcan1, &inst);
    fake_fdcan_init(&hfdcan2, &inst2);
    fake_fdcan_set_rx_size(&inst, rx_fifo);
    CHECK_EQ(fcan_stm32_fdcan_init(&can, &hfdcan1), 0);
    CHECK_EQ(HAL_FDCAN_Start(&hfdcan1), HAL_OK);
    CHECK_EQ(HAL_FDCAN_Start(&hfdcan2), HAL_OK);
    n_got = 0;
    ingest_answer = FCAN_OK;
    during_ingest = NULL;
    slot_changed_under_node = 0;
    now_us = 1000;
}

static fcan_stm32_fdcan_counters_t counters(void)
{
    fcan_stm32_fdcan_counters_t c;
    memset(&c, 0xEE, sizeof c);
    CHECK_EQ(fcan_stm32_fdcan_counters(&can, &c), 0);
    return c;
}

static void pattern(uint8_t *data, uint32_t len, uint32_t seed)
{
    uint32_t i;
    for (i = 0; i < len; i++) {
        data[i] = (uint8_t)(seed * 31u + i * 7u + 1u);
    }
}

/* A frame whose first data bytes carry `seq`, for ordering checks (8 bytes, FD+BRS). */
static int send_seq(uint32_t seq)
{
    uint8_t d[8];
    memset(d, 0, sizeof d);
    d[0] = (uint8_t)seq;
    d[1] = (uint8_t)(seq >> 8);
    d[2] = (uint8_t)(seq >> 16);
    d[3] = 0xA5;
    return fake_fdcan_receive_frame(&inst, 0x100u + (seq & 0xFFu), 0, 1, 1, d, 8);
}

static uint32_t seq_of(const fcan_frame_t *f)
{
    return (uint32_t)f->data[0] | ((uint32_t)f->data[1] << 8) | ((uint32_t)f->data[2] << 16);
}

static const uint8_t fd_lengths[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64};

/* ---- tests -------------------------------------------------------------------------- */

static void test_init_activates_notifications(void)
{
    fcan_stm32_fdcan_t other;
    setup(3);
    CHECK_EQ(inst.IE, FDCAN_IT_RX_FIFO0_NEW_MESSAGE | FDCAN_IT_BUS_OFF);
    CHECK_EQ(fcan_stm32_fdcan_init(NULL, &hfdcan1), -1);
    CHECK_EQ(fcan_stm32_fdcan_init(&other, NULL), -1);
    /* A handle HAL_FDCAN_Init never ran on (state RESET): the HAL refuses. */
    hfdcan2.State = HAL_FDCAN_STATE_RESET;
    CHECK_EQ(fcan_stm32_fdcan_init(&other, &hfdcan2), -1);
    CHECK_EQ(fcan_stm32_fdcan_ingest(NULL, NODE), FCAN_ERR_ARG);
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, NULL), FCAN_ERR_ARG);
    CHECK_EQ(fcan_stm32_fdcan_counters(NULL, NULL), -1);
}

/* Every length, both id kinds, every format: what reaches the node. */
static void test_rx_every_length(void)
{
    static const uint32_t std_ids[] = {0x000u, 0x123u, 0x7FFu};
    static const uint32_t ext_ids[] = {0x00000000u, 0x1ABCDE12u, 0x1FFFFFFFu};
    uint32_t expected = 0;
    int format, ext;
    size_t li, ii;

    setup(3);
    for (format = 0; format < 3; format++) { /* Classical, FD, FD+BRS */
        int fd = format > 0, brs = format == 2;
        for (ext = 0; ext < 2; ext++) {
            for (li = 0; li < sizeof fd_lengths; li++) {
                uint32_t len = fd_lengths[li];
                if (!fd && len > 8u) {
                    continue;
                }
                for (ii = 0; ii < 3; ii++) {
                    uint32_t id = ext ? ext_ids[ii] : std_ids[ii];
                    uint8_t data[64];
                    uint8_t flags = (uint8_t)((ext ? FCAN_FRAME_EXTENDED : 0) |
                                              (fd ? FCAN_FRAME_FD : 0) |
                                              (brs ? FCAN_FRAME_BRS : 0));
                    int32_t n;
                    pattern(data, len, len + ii);
                    now_us += 17;
                    n_got = 0;
                    CHECK_EQ(fake_fdcan_receive_frame(&inst, id, ext, fd, brs, data, len), 0);
                    HAL_FDCAN_IRQHandler(&hfdcan1);
                    n = fcan_stm32_fdcan_ingest(&can, NODE);
                    CHECK_EQ(n, 1);
                    CHECK_EQ(n_got, 1);
                    CHECK_EQ(got[0].id, id);
                    CHECK_EQ(got[0].flags, flags);
                    CHECK_EQ(got[0].len, len);
                    CHECK(memcmp(got[0].data, data, len) == 0);
                    CHECK_EQ(got[0].reserved[0], 0);
                    CHECK_EQ(got[0].reserved[1], 0);
                    CHECK_EQ(got_t[0], now_us);
                    expected++;
                }
            }
        }
    }
    CHECK_EQ(counters().rx_frames, expected);
    CHECK_EQ(expected, 3u * 2u * (9u + 16u + 16u));
    CHECK_EQ(counters().rx_bad_length, 0);
    CHECK_EQ(inst.misuse, 0);
}

/* Classical DLC 9..15 carry 8 bytes (ISO 11898-1); the HAL copies up to 64 regardless. */
static void test_rx_classic_dlc_above_8(void)
{
    uint32_t dlc;
    setup(8);
    for (dlc = 9; dlc <= 15; dlc++) {
        fake_fdcan_element_t e;
        memset(&e, 0, sizeof e);
        e.id = 0x321;
        e.dlc = dlc;
        pattern(e.data, 64, dlc);
        CHECK_EQ(fake_fdcan_receive(&inst, &e), 0);
    }
    HAL_FDCAN_IRQHandler(&hfdcan1);
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, NODE), 7);
    for (dlc = 9; dlc <= 15; dlc++) {
        uint8_t want[64];
        const fcan_frame_t *f = &got[dlc - 9];
        pattern(want, 64, dlc);
        CHECK_EQ(f->len, 8);
        CHECK_EQ(f->flags, 0);
        CHECK(memcmp(f->data, want, 8) == 0);
    }
}

/* A DataLength that is no FDCAN_DLC_BYTES_* code, and remote frames: dropped, counted,
 * the frames around them delivered. */
static void test_rx_bad_length_and_remote_dropped(void)
{
    fake_fdcan_element_t e;
    fcan_stm32_fdcan_counters_t c;
    setup(8);
    CHECK_EQ(send_seq(1), 0);
    memset(&e, 0, sizeof e);
    e.id = 0x55;
    e.fdf = 1;
    e.dlc = 16; /* no such code */
    CHECK_EQ(fake_fdcan_receive(&inst, &e), 0);
    CHECK_EQ(send_seq(2), 0);
    memset(&e, 0, sizeof e);
    e.id = 0x56;
    e.rtr = 1;
    e.dlc = 4;
    CHECK_EQ(fake_fdcan_receive(&inst, &e), 0);
    e.xtd = 1;
    e.id = 0x1000;
    CHECK_EQ(fake_fdcan_receive(&inst, &e), 0);
    CHECK_EQ(send_seq(3), 0);
    HAL_FDCAN_IRQHandler(&hfdcan1);
    CHECK_EQ(fake_fdcan_tx_pending(&inst), 0);
    CHECK_EQ(inst.rx_fill, 0); /* drained, dropped ones included */
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, NODE), 3);
    CHECK_EQ(seq_of(&got[0]), 1);
    CHECK_EQ(seq_of(&got[1]), 2);
    CHECK_EQ(seq_of(&got[2]), 3);
    c = counters();
    CHECK_EQ(c.rx_frames, 3);
    CHECK_EQ(c.rx_bad_length, 1);
    CHECK_EQ(c.rx_remote, 2);
    CHECK_EQ(c.rx_ring_full, 0);
}

/* More frames than the ring holds: the newest dropped and counted, the kept ones exact
 * and in order; then the ring works on (wrapping its indices many times). */
static void test_ring_overflow_drops_and_counts(void)
{
    const uint32_t ring = FCAN_STM32_FDCAN_RX_RING;
    uint32_t seq = 0, next_expected = 0, dropped = 0, i, round;
    fcan_stm32_fdcan_counters_t c;

    setup(64);
    /* 40 frames in one interrupt: ring (16) kept, 24 dropped. */
    for (i = 0; i < 40; i++) {
        CHECK_EQ(send_seq(seq++), 0);
    }
    HAL_FDCAN_IRQHandler(&hfdcan1);
    CHECK_EQ(inst.rx_fill, 0);
    c = counters();
    CHECK_EQ(c.rx_frames, ring);
    CHECK_EQ(c.rx_ring_full, 40u - ring);
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, NODE), ring);
    for (i = 0; i < ring; i++) {
        CHECK_EQ(seq_of(&got[i]), i);
        CHECK_EQ(got[i].id, 0x100u + i);
        CHECK_EQ(got[i].data[3], 0xA5);
    }
    /* Many rounds of varying load: each frame is either delivered in order or counted as
     * dropped; the ring's free-running indices wrap the slots hundreds of times. */
    next_expected = seq;
    dropped = c.rx_ring_full;
    for (round = 0; round < 500; round++) {
        uint32_t burst = (round * 7u) % 27u;
        uint32_t first = seq;
        n_got = 0;
        for (i = 0; i < burst; i++) {
            CHECK_EQ(send_seq(seq++), 0);
            /* Even rounds: an interrupt per frame; odd: the FIFO drained at the end. */
            if (round % 2u == 0u || inst.rx_fill == inst.rx_size) {
                HAL_FDCAN_IRQHandler(&hfdcan1);
            }
            if (round % 3u == 0u && i == 5u) {
                (void)fcan_stm32_fdcan_ingest(&can, NODE); /* the loop runs mid-burst */
            }
        }
        HAL_FDCAN_IRQHandler(&hfdcan1);
        (void)fcan_stm32_fdcan_ingest(&can, NODE);
        for (i = 0; i < n_got; i++) {
            uint32_t s = seq_of(&got[i]);
            CHECK(s >= next_expected && s < first + burst);
            dropped += s - next_expected; /* skipped ones must have been counted */
            next_expected = s + 1u;
        }
        dropped += (first + burst) - next_expected;
        next_expected = first + burst;
    }
    c = counters();
    CHECK_EQ(c.rx_ring_full, dropped);
    CHECK_EQ(c.rx_frames + c.rx_ring_full, seq);
    CHECK_EQ(c.rx_bad_length, 0);
    CHECK(c.rx_ring_full > 0u);
    CHECK_EQ(can.rx_head - can.rx_tail, 0);
    CHECK(can.rx_head > 20u * ring);
}

/* The interrupt preempts the node while it reads a slot (fcan_node_ingest reads the ring
 * in place): that slot never changes, frames that find the ring full are dropped, and
 * one ingest call takes only the frames there when it began. */
static uint32_t preempt_seq;
static uint32_t preempt_burst;
static void preempting_interrupt(void)
{
    uint32_t i;
    for (i = 0; i < preempt_burst; i++) {
        CHECK_EQ(send_seq(preempt_seq++), 0);
    }
    HAL_FDCAN_IRQHandler(&hfdcan1);
    during_ingest = NULL; /* once per ingest call */
}

static void test_ring_preempted_never_corrupts(void)
{
    const uint32_t ring = FCAN_STM32_FDCAN_RX_RING;
    uint32_t fill, i;

    for (fill = 1; fill <= ring; fill++) {
        fcan_stm32_fdcan_counters_t c;
        int32_t n;
        setup(64);
        preempt_seq = 0;
        for (i = 0; i < fill; i++) {
            CHECK_EQ(send_seq(preempt_seq++), 0);
        }
        HAL_FDCAN_IRQHandler(&hfdcan1);
        /* During the first frame the ring holds `fill` (its slot included): of 5 new
         * frames, ring - fill fit. */
        preempt_burst = 5;
        during_ingest = preempting_interrupt;
        n = fcan_stm32_fdcan_ingest(&can, NODE);
        CHECK_EQ(n, fill);
        CHECK_EQ(slot_changed_under_node, 0);
        c = counters();
        CHECK_EQ(c.rx_ring_full, fill + 5u > ring ? fill + 5u - ring : 0u);
        /* The rest come at the next call, in order after the first ones. */
        n = fcan_stm32_fdcan_ingest(&can, NODE);
        CHECK_EQ((uint32_t)n, 5u - c.rx_ring_full);
        for (i = 0; i < n_got; i++) {
            CHECK_EQ(seq_of(&got[i]), i);
        }
        CHECK_EQ(n_got, fill + 5u - c.rx_ring_full);
    }
    /* Preempted at every call, bursts of 1..21 frames, the ring cycling and
     * overflowing. */
    setup(64);
    preempt_seq = 0;
    CHECK_EQ(send_seq(preempt_seq++), 0);
    HAL_FDCAN_IRQHandler(&hfdcan1);
    for (i = 0; i < 150; i++) {
        preempt_burst = 1u + (i * 5u) % 21u;
        during_ingest = preempting_interrupt;
        (void)fcan_stm32_fdcan_ingest(&can, NODE);
    }
    during_ingest = NULL;
    (void)fcan_stm32_fdcan_ingest(&can, NODE);
    CHECK_EQ(slot_changed_under_node, 0);
    CHECK_EQ(n_got + counters().rx_ring_full, preempt_seq);
    CHECK(counters().rx_ring_full > 0u);
    /* Each interrupt drops the newest of its burst: what arrives is increasing, with the
     * gaps counted above. */
    for (i = 1; i < n_got; i++) {
        CHECK(seq_of(&got[i]) > seq_of(&got[i - 1]));
        CHECK_EQ(got[i].id, 0x100u + (seq_of(&got[i]) & 0xFFu));
        CHECK_EQ(got[i].data[3], 0xA5);
    }
}

/* fcan_node_ingest refusing FCAN_ERR_REENTRANT: the frame stays, delivered later once;
 * FCAN_ERR_FRAME: consumed and counted. */
static void test_ingest_refusals(void)
{
    setup(3);
    CHECK_EQ(send_seq(7), 0);
    CHECK_EQ(send_seq(8), 0);
    HAL_FDCAN_IRQHandler(&hfdcan1);
    ingest_answer = FCAN_ERR_REENTRANT;
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, NODE), FCAN_ERR_REENTRANT);
    CHECK_EQ(n_got, 0);
    ingest_answer = FCAN_ERR_FRAME;
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, NODE), 2);
    CHECK_EQ(n_got, 2);
    CHECK_EQ(seq_of(&got[0]), 7);
    CHECK_EQ(seq_of(&got[1]), 8);
    CHECK_EQ(counters().rx_node_refused, 2);
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, NODE), 0);
}

/* The callback of another FDCAN handle is ignored: its FIFO is not touched. */
static void test_other_handle_ignored(void)
{
    setup(3);
    CHECK_EQ(fake_fdcan_receive_frame(&inst2, 0x10, 0, 0, 0, NULL, 0), 0);
    fcan_stm32_fdcan_on_rx_fifo0(&can, &hfdcan2, FDCAN_IT_RX_FIFO0_NEW_MESSAGE, now_us);
    CHECK_EQ(inst2.rx_fill, 1);
    fake_fdcan_enter_bus_off(&inst2);
    fcan_stm32_fdcan_on_error_status(&can, &hfdcan2, FDCAN_FLAG_BUS_OFF);
    CHECK_EQ(fcan_stm32_fdcan_ingest(&can, NODE), 0);
    CHECK_EQ(counters().rx_frames, 0);
    CHECK_EQ(counters().bus_off, 0);
}

int main(void)
{
    printf("fcan STM32 FDCAN glue, receive side (fake HAL, FDCAN_DLC_BYTES_12 = 0x%08lX, "
           "ring %u)\n",
           (unsigned long)FDCAN_DLC_BYTES_12, (unsigned)FCAN_STM32_FDCAN_RX_RING);
    run_test("init activates RX_FIFO0_NEW_MESSAGE and BUS_OFF", test_init_activates_notifications);
    run_test("rx: every length, std/ext, Classical/FD/BRS", test_rx_every_length);
    run_test("rx: Classical DLC 9..15 is 8 bytes", test_rx_classic_dlc_above_8);
    run_test("rx: bad DataLength and remote frames dropped, counted",
             test_rx_bad_length_and_remote_dropped);
    run_test("ring: overflow drops the newest and counts", test_ring_overflow_drops_and_counts);
    run_test("ring: preempted while the node reads, never corrupts",
             test_ring_preempted_never_corrupts);
    run_test("ingest: REENTRANT keeps the frame, FRAME consumes it", test_ingest_refusals);
    run_test("another FDCAN handle is ignored", test_other_handle_ignored);
    printf("%s: %d tests, %d failed checks\n", check_failures ? "FAIL" : "PASS", check_tests,
           check_failures);
    return check_failures ? 1 : 0;
}
