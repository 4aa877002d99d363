/*
 * fcan_stm32_fdcan.c: see fcan_stm32_fdcan.h.
 *
 * HAL functions used (the whole dependency on ST's HAL, as declared in
 * stm32g4xx_hal_fdcan.h / stm32h7xx_hal_fdcan.h): HAL_FDCAN_ActivateNotification,
 * HAL_FDCAN_GetRxFifoFillLevel, HAL_FDCAN_GetRxMessage, HAL_FDCAN_GetTxFifoFreeLevel,
 * HAL_FDCAN_AddMessageToTxFifoQ, HAL_FDCAN_GetProtocolStatus, HAL_FDCAN_Stop,
 * HAL_FDCAN_Start; the handle's Init.TxFifoQueueMode.
 *
 * ---- Memory ordering of the receive ring ---------------------------------------------
 *
 * One producer, the FDCAN interrupt (fcan_stm32_fdcan_on_rx_fifo0), and one consumer, the
 * main loop (fcan_stm32_fdcan_ingest), on the same core. The producer fills slot
 * rx_head % N and then stores rx_head + 1; the consumer reads rx_head, uses slot
 * rx_tail % N and then stores rx_tail + 1. Each index has one writer.
 *
 * What this relies on, and why C99 `volatile` plus a compiler barrier is enough:
 *
 * - Single core (Cortex-M0+/M3/M4/M7/M33). A core observes its own loads and stores in
 *   program order, and an exception preempting the loop is taken between two of the
 *   loop's instructions; so the hardware cannot make the interrupt see rx_head + 1
 *   before the slot's bytes, nor the loop see them in the other order. No DMB is needed
 *   (Cortex-M7 included: its store buffer and D-cache are coherent with the core's own
 *   later loads; Arm's application note AN321 on Cortex-M memory barriers says barriers
 *   are not needed for this on one core, cited from memory). It would NOT hold if producer and consumer ran on different cores
 *   (the STM32H745/H747 Cortex-M4 and M7): keep the FDCAN interrupt and the loop that
 *   calls ingest on one core.
 * - Aligned 32-bit loads and stores are single-copy atomic on Armv6-M/Armv7-M/Armv8-M,
 *   so an index is never read half-written.
 * - The compiler: `volatile` orders the index accesses among themselves but not against
 *   the plain accesses to the slot, which it may move across them. FCAN_STM32_BARRIER()
 *   (an empty asm with a "memory" clobber) stops that: the producer's slot stores stay
 *   before its rx_head store, the consumer's slot loads stay after its rx_head load and
 *   before its rx_tail store.
 *
 * With C11 one would write the same with atomic_load_explicit(memory_order_acquire) /
 * atomic_store_explicit(memory_order_release) on the indices; the file stays C99 as the
 * rest of fcan's C is.
 *
 * ---- Bus-off ------------------------------------------------------------------------
 *
 * What the hardware does (RM0440 "STM32G4 reference manual", FDCAN chapter, section
 * "Operating modes" > "Software initialization", and the FDCAN_CCCR.INIT and
 * FDCAN_PSR.BO bit descriptions; RM0433 for the H7 says the same of its FDCAN, which is
 * the same Bosch M_CAN core): going bus-off sets CCCR.INIT by itself and stops all bus
 * activity; the controller stays bus-off until software clears CCCR.INIT, after which it
 * waits for 129 occurrences of bus idle (129 x 11 recessive bits) and is error-active
 * again with its error counters reset. The section titles and that wording are from
 * memory, not re-read for this; the behaviour is the Bosch M_CAN's (TI's MCAN
 * documentation describes the same 129 x 11 bits), and an ST moderator's answer on the
 * ST community ("STM32G431 FDCAN get into bus off status", 2024) recovers the same way:
 * PSR.BO set -> clear CCCR.INIT.
 *
 * What ST's HAL documents and does (stm32g4xx_hal_fdcan.c, read for this): HAL_FDCAN_Start
 * ("Start the FDCAN module") requires the handle's state READY and clears CCCR.INIT;
 * HAL_FDCAN_Stop ("Stop the FDCAN module and enable access to configuration registers")
 * requires BUSY (the state after Start, which a bus-off does not change), sets INIT (a
 * bus-off already did, so it does not wait), sets CCCR.CCE and makes the state READY.
 * The HAL has no bus-off function of its own, and the state machine refuses Start while
 * BUSY, so the recovery through the public HAL is Stop then Start; clearing INIT behind
 * the HAL's back would work for the hardware too but leaves nothing the tests' fake can
 * check and needs the CMSIS register names. Side effect (RM: setting CCE resets the Tx
 * FIFO/queue status and pending requests and the Rx FIFO status; from memory): frames
 * still in the controller at the restart are discarded. fcan's protocol has its own
 * retries; the node's frames refused meanwhile (see transmit) are not lost.
 *
 * Why the restart runs in the main loop (the next fcan_stm32_fdcan_ingest) and not in the
 * interrupt: HAL_FDCAN_Stop/Start would then preempt HAL_FDCAN_AddMessageToTxFifoQ,
 * which the loop may be in the middle of (Tx FIFO put index read, element written, TXBAR
 * not yet set); Stop resets the Tx FIFO under it. In the loop the two never overlap.
 * Until the restart, transmit refuses (the node keeps its frames), so nothing is queued
 * into a controller that is about to be reset.
 */
#include "fcan_stm32_fdcan.h"

#include <stddef.h>

#ifndef FCAN_STM32_BARRIER
#if defined(__GNUC__) || defined(__clang__)
/* gcc, clang, arm-none-eabi-gcc, Arm Compiler 6 (armclang): a compiler-only barrier. */
#define FCAN_STM32_BARRIER() __asm__ __volatile__("" ::: "memory")
#else
#error "fcan_stm32_fdcan.c: define FCAN_STM32_BARRIER() as your compiler's compiler barrier"
#endif
#endif

/* The ring size must be a power of two (index & mask) and at least 2. */
typedef char fcan_stm32_fdcan_ring_size_is_a_power_of_two
    [((FCAN_STM32_FDCAN_RX_RING & (FCAN_STM32_FDCAN_RX_RING - 1u)) == 0u &&
      FCAN_STM32_FDCAN_RX_RING >= 2u) ? 1 : -1];

#define RING_MASK ((uint32_t)FCAN_STM32_FDCAN_RX_RING - 1u)

#define STD_ID_MAX 0x7FFu
#define EXT_ID_MAX 0x1FFFFFFFu

/* ---- data length codes: the HAL's macros only ----------------------------------- */

/* The HAL code for `len` bytes, or 0 with *ok = 0 when `len` is not a CAN FD length. */
static uint32_t dlc_from_len(uint8_t len, int *ok)
{
    *ok = 1;
    switch (len) {
    case 0: return FDCAN_DLC_BYTES_0;
    case 1: return FDCAN_DLC_BYTES_1;
    case 2: return FDCAN_DLC_BYTES_2;
    case 3: return FDCAN_DLC_BYTES_3;
    case 4: return FDCAN_DLC_BYTES_4;
    case 5: return FDCAN_DLC_BYTES_5;
    case 6: return FDCAN_DLC_BYTES_6;
    case 7: return FDCAN_DLC_BYTES_7;
    case 8: return FDCAN_DLC_BYTES_8;
    case 12: return FDCAN_DLC_BYTES_12;
    case 16: return FDCAN_DLC_BYTES_16;
    case 20: return FDCAN_DLC_BYTES_20;
    case 24: return FDCAN_DLC_BYTES_24;
    case 32: return FDCAN_DLC_BYTES_32;
    case 48: return FDCAN_DLC_BYTES_48;
    case 64: return FDCAN_DLC_BYTES_64;
    default: *ok = 0; return 0u;
    }
}

/* Bytes for the HAL code `code`, or -1 when it is none of the FDCAN_DLC_BYTES_*. */
static int len_from_dlc(uint32_t code)
{
    switch (code) {
    case FDCAN_DLC_BYTES_0: return 0;
    case FDCAN_DLC_BYTES_1: return 1;
    case FDCAN_DLC_BYTES_2: return 2;
    case FDCAN_DLC_BYTES_3: return 3;
    case FDCAN_DLC_BYTES_4: return 4;
    case FDCAN_DLC_BYTES_5: return 5;
    case FDCAN_DLC_BYTES_6: return 6;
    case FDCAN_DLC_BYTES_7: return 7;
    case FDCAN_DLC_BYTES_8: return 8;
    case FDCAN_DLC_BYTES_12: return 12;
    case FDCAN_DLC_BYTES_16: return 16;
    case FDCAN_DLC_BYTES_20: return 20;
    case FDCAN_DLC_BYTES_24: return 24;
    case FDCAN_DLC_BYTES_32: return 32;
    case FDCAN_DLC_BYTES_48: return 48;
    case FDCAN_DLC_BYTES_64: return 64;
    default: return -1;
    }
}

/* ---- init ---------------------------------------------------------------------- */

int32_t fcan_stm32_fdcan_init(fcan_stm32_fdcan_t *ctx, FDCAN_HandleTypeDef *hfdcan)
{
    if (ctx == NULL || hfdcan == NULL) {
        return -1;
    }
    ctx->hfdcan = hfdcan;
    /* The slots need no clearing: only rx_tail .. rx_head-1 are ever read. */
    ctx->rx_head = 0;
    ctx->rx_tail = 0;
    ctx->rx_frames = 0;
    ctx->rx_ring_full = 0;
    ctx->rx_bad_length = 0;
    ctx->rx_remote = 0;
    ctx->bus_off = 0;
    ctx->rx_node_refused = 0;
    ctx->tx_frames = 0;
    ctx->tx_refused = 0;
    ctx->tx_bad_frame = 0;
    ctx->restarts = 0;
    ctx->restart_failed = 0;
    ctx->bus_off_handled = 0;
    /* BufferIndexes (third argument) only matters for the Tx complete / abort
     * interrupts, which the glue does not use. */
    if (HAL_FDCAN_ActivateNotification(hfdcan,
                                       FDCAN_IT_RX_FIFO0_NEW_MESSAGE | FDCAN_IT_BUS_OFF,
                                       0u) != HAL_OK) {
        return -1;
    }
    return 0;
}

/* ---- receive (interrupt) -------------------------------------------------------- */

/* Fills `f` (whose data the HAL already wrote) from the HAL's header. 0 when the frame
 * is to be dropped (counted). */
static int frame_from_rx_header(fcan_stm32_fdcan_t *ctx, const FDCAN_RxHeaderTypeDef *h,
                                fcan_frame_t *f)
{
    int len;
    uint8_t flags = 0;

    if (h->RxFrameType != FDCAN_DATA_FRAME) {
        ctx->rx_remote++;
        return 0;
    }
    len = len_from_dlc(h->DataLength);
    if (len < 0) {
        ctx->rx_bad_length++;
        return 0;
    }
    if (h->IdType == FDCAN_EXTENDED_ID) {
        flags |= FCAN_FRAME_EXTENDED;
        f->id = h->Identifier & EXT_ID_MAX;
    } else {
        f->id = h->Identifier & STD_ID_MAX;
    }
    if (h->FDFormat == FDCAN_FD_CAN) {
        flags |= FCAN_FRAME_FD;
        if (h->BitRateSwitch == FDCAN_BRS_ON) {
            flags |= FCAN_FRAME_BRS;
        }
    } else if (len > 8) {
        /* A Classical frame's DLC 9..15 means 8 data bytes (ISO 11898-1). */
        len = 8;
    }
    f->len = (uint8_t)len;
    f->flags = flags;
    f->reserved[0] = 0;
    f->reserved[1] = 0;
    return 1;
}

void fcan_stm32_fdcan_on_rx_fifo0(fcan_stm32_fdcan_t *ctx, FDCAN_HandleTypeDef *hfdcan,
                                  uint32_t RxFifo0ITs, uint32_t now_us)
{
    /* Where a frame goes when the ring is full: it must still leave the Rx FIFO. */
    fcan_stm32_fdcan_rx_slot_t overflow;
    FDCAN_RxHeaderTypeDef header;
    uint32_t level;
    uint32_t head;

    (void)RxFifo0ITs;
    if (ctx == NULL || hfdcan == NULL || hfdcan != ctx->hfdcan) {
        return;
    }
    /* Bounded: the frames there now. Later ones raise the interrupt again. */
    level = HAL_FDCAN_GetRxFifoFillLevel(hfdcan, FDCAN_RX_FIFO0);
    head = ctx->rx_head;
    while (level > 0u) {
        /* rx_tail cannot move while this interrupt runs (the loop is preempted). */
        int full = (uint32_t)(head - ctx->rx_tail) >= (uint32_t)FCAN_STM32_FDCAN_RX_RING;
        fcan_stm32_fdcan_rx_slot_t *slot = full ? &overflow : &ctx->rx_ring[head & RING_MASK];

        level--;
        /* The HAL copies the payload (up to 64 bytes, whatever the DLC) into data[64]. */
        if (HAL_FDCAN_GetRxMessage(hfdcan, FDCAN_RX_FIFO0, &header, slot->frame.data) !=
            HAL_OK) {
            break; /* empty after all, or the peripheral is stopped */
        }
        if (full) {
            ctx->rx_ring_full++;
            continue;
        }
        if (!frame_from_rx_header(ctx, &header, &slot->frame)) {
            continue; /* slot not published: the next frame reuses it */
        }
        slot->t_us = now_us;
        ctx->rx_frames++;
        /* The slot's bytes before the index that publishes them. */
        FCAN_STM32_BARRIER();
        head++;
        ctx->rx_head = head;
    }
}

/* ---- bus-off ------------------------------------------------------------------- */

void fcan_stm32_fdcan_on_error_status(fcan_stm32_fdcan_t *ctx, FDCAN_HandleTypeDef *hfdcan,
                                      uint32_t ErrorStatusITs)
{
    FDCAN_ProtocolStatusTypeDef ps;

    if (ctx == NULL || hfdcan == NULL || hfdcan != ctx->hfdcan) {
        return;
    }
    /* The HAL passes IR & IE of the error-status group: FDCAN_FLAG_BUS_OFF (IR.BO, "bus-off
     * status changed") is the same bit as FDCAN_IT_BUS_OFF (IE.BOE) that init enabled. It
     * is raised on entering bus-off and again on leaving it: PSR.BO tells which. */
    if ((ErrorStatusITs & FDCAN_FLAG_BUS_OFF) == 0u) {
        return;
    }
    /* (Reading PSR also resets its last-error-code fields, as any PSR read does.) */
    if (HAL_FDCAN_GetProtocolStatus(hfdcan, &ps) != HAL_OK || ps.BusOff == 0u) {
        return;
    }
    ctx->bus_off++;
}

/* A bus-off the loop has not restarted the peripheral for yet. */
static int restart_pending(const fcan_stm32_fdcan_t *ctx)
{
    return ctx->bus_off != ctx->bus_off_handled;
}

/* Main loop: Stop (BUSY -> READY; INIT is already set) then Start (clears INIT: the
 * controller leaves bus-off after 129 x 11 recessive bits). Stop failing because the
 * handle is already READY (an earlier Start failed) is fine: Start follows. */
static void restart_if_bus_off(fcan_stm32_fdcan_t *ctx)
{
    uint32_t seen = ctx->bus_off;
    if (seen == ctx->bus_off_handled) {
        return;
    }
    (void)HAL_FDCAN_Stop(ctx->hfdcan);
    if (HAL_FDCAN_Start(ctx->hfdcan) == HAL_OK) {
        ctx->bus_off_handled = seen;
        ctx->restarts++;
    } else {
        ctx->restart_failed++;
    }
}

/* ---- ingest (main loop) --------------------------------------------------------- */

int32_t fcan_stm32_fdcan_ingest(fcan_stm32_fdcan_t *ctx, fcan_node_t *node)
{
    uint32_t tail;
    uint32_t head;
    int32_t n = 0;

    if (ctx == NULL || node == NULL || ctx->hfdcan == NULL) {
        return FCAN_ERR_ARG;
    }
    restart_if_bus_off(ctx);
    tail = ctx->rx_tail;
    head = ctx->rx_head; /* the frames there now: bounded even if more keep arriving */
    /* The slots' bytes after the index that published them. */
    FCAN_STM32_BARRIER();
    while (tail != head) {
        const fcan_stm32_fdcan_rx_slot_t *slot = &ctx->rx_ring[tail & RING_MASK];
        /* The node reads the slot in place: the interrupt does not write it until
         * rx_tail moves past it. */
        int32_t rc = fcan_node_ingest(node, &slot->frame, slot->t_us);
        if (rc == FCAN_ERR_REENTRANT || rc == FCAN_ERR_ARG) {
            return rc; /* not taken: the frame stays for the next call */
        }
        if (rc != FCAN_OK) {
            ctx->rx_node_refused++;
        }
        /* Done with the slot before handing it back to the interrupt. */
        FCAN_STM32_BARRIER();
        tail++;
        ctx->rx_tail = tail;
        n++;
    }
    return n;
}

/* ---- transmit (main loop, inside fcan_node_poll) -------------------------------- */

int32_t fcan_stm32_fdcan_transmit(void *user, const fcan_frame_t *frame)
{
    fcan_stm32_fdcan_t *ctx = (fcan_stm32_fdcan_t *)user;
    FDCAN_TxHeaderTypeDef header;
    int extended;
    int fd;
    int ok;
    uint32_t code;

    if (ctx == NULL || ctx->hfdcan == NULL || frame == NULL) {
        return 1;
    }
    extended = (frame->flags & FCAN_FRAME_EXTENDED) != 0;
    fd = (frame->flags & FCAN_FRAME_FD) != 0;
    code = dlc_from_len(frame->len, &ok);
    if (!ok || (!fd && frame->len > 8u) ||
        frame->id > (extended ? EXT_ID_MAX : STD_ID_MAX)) {
        ctx->tx_bad_frame++;
        return 0; /* dropped: offering it again would never succeed */
    }
    if (restart_pending(ctx)) {
        ctx->tx_refused++;
        return 1;
    }
    /* In FIFO mode the free level says "full" without the HAL flagging an error; in
     * queue mode the M_CAN reads it as 0 always (TXFQS.TFFL), so only the HAL call can
     * tell (it checks TXFQS.TFQF). */
    if (ctx->hfdcan->Init.TxFifoQueueMode == FDCAN_TX_FIFO_OPERATION &&
        HAL_FDCAN_GetTxFifoFreeLevel(ctx->hfdcan) == 0u) {
        ctx->tx_refused++;
        return 1;
    }
    header.Identifier = frame->id;
    header.IdType = extended ? FDCAN_EXTENDED_ID : FDCAN_STANDARD_ID;
    header.TxFrameType = FDCAN_DATA_FRAME;
    header.DataLength = code;
    header.ErrorStateIndicator = FDCAN_ESI_ACTIVE;
    header.BitRateSwitch = (fd && (frame->flags & FCAN_FRAME_BRS) != 0) ? FDCAN_BRS_ON
                                                                        : FDCAN_BRS_OFF;
    header.FDFormat = fd ? FDCAN_FD_CAN : FDCAN_CLASSIC_CAN;
    header.TxEventFifoControl = FDCAN_NO_TX_EVENTS;
    header.MessageMarker = 0u;
    /* The cast: HAL releases before 2023 declare the data `uint8_t *` (since then
     * `const uint8_t *`); the HAL only reads it. */
    if (HAL_FDCAN_AddMessageToTxFifoQ(ctx->hfdcan, &header, (uint8_t *)frame->data) !=
        HAL_OK) {
        ctx->tx_refused++;
        return 1;
    }
    ctx->tx_frames++;
    return 0;
}

int32_t fcan_stm32_fdcan_counters(const fcan_stm32_fdcan_t *ctx,
                                  fcan_stm32_fdcan_counters_t *out)
{
    if (ctx == NULL || out == NULL) {
        return -1;
    }
    out->rx_frames = ctx->rx_frames;
    out->rx_ring_full = ctx->rx_ring_full;
    out->rx_bad_length = ctx->rx_bad_length;
    out->rx_remote = ctx->rx_remote;
    out->rx_node_refused = ctx->rx_node_refused;
    out->tx_frames = ctx->tx_frames;
    out->tx_refused = ctx->tx_refused;
    out->tx_bad_frame = ctx->tx_bad_frame;
    out->bus_off = ctx->bus_off;
    out->restarts = ctx->restarts;
    out->restart_failed = ctx->restart_failed;
    return 0;
}
