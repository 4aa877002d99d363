/*
 * fcan_stm32_fdcan.h: an fcan node on an STM32 FDCAN peripheral (STM32G4, STM32H7 and the
 * other FDCAN parts) through ST's HAL (stm32xxxx_hal_fdcan.h). C99.
 *
 * What it does, in the order a frame travels:
 *
 *   receive   HAL_FDCAN_IRQHandler -> your HAL_FDCAN_RxFifo0Callback ->
 *             fcan_stm32_fdcan_on_rx_fifo0(): drains the Rx FIFO 0 with
 *             HAL_FDCAN_GetRxMessage into a small ring (frame + the time it arrived);
 *             main loop: fcan_stm32_fdcan_ingest(): the ring into fcan_node_ingest().
 *             The node may not be called from an interrupt that can preempt
 *             fcan_node_poll (fcan.h: FCAN_ERR_REENTRANT), hence the ring.
 *   transmit  fcan_node_poll -> fcan_stm32_fdcan_transmit() (the node's fcan_transmit_fn,
 *             user = the context) -> HAL_FDCAN_AddMessageToTxFifoQ; "full" makes the node
 *             keep the frame and offer it again at a later poll.
 *   bus-off   your HAL_FDCAN_ErrorStatusCallback -> fcan_stm32_fdcan_on_error_status():
 *             counts it; the next fcan_stm32_fdcan_ingest() (main loop) restarts the
 *             peripheral with HAL_FDCAN_Stop + HAL_FDCAN_Start (see the .c for why there
 *             and not in the interrupt, and the reference-manual behaviour relied on).
 *
 * The board's code (CubeMX names; README.md has the whole recipe):
 *
 *   static fcan_stm32_fdcan_t can;
 *   void HAL_FDCAN_RxFifo0Callback(FDCAN_HandleTypeDef *h, uint32_t its)
 *   { fcan_stm32_fdcan_on_rx_fifo0(&can, h, its, micros()); }
 *   void HAL_FDCAN_ErrorStatusCallback(FDCAN_HandleTypeDef *h, uint32_t its)
 *   { fcan_stm32_fdcan_on_error_status(&can, h, its); }
 *   ...after MX_FDCAN1_Init():
 *   fcan_stm32_fdcan_init(&can, &hfdcan1);  HAL_FDCAN_Start(&hfdcan1);
 *   config.transmit = fcan_stm32_fdcan_transmit;  config.user = &can;
 *   ...main loop:
 *   fcan_stm32_fdcan_ingest(&can, node);  fcan_node_poll(node, micros());
 *
 * The HAL header: FCAN_STM32_HAL_HEADER names it (default "main.h", which a CubeMX
 * project has and which includes stm32g4xx_hal.h / stm32h7xx_hal.h); the HAL must be
 * built with HAL_FDCAN_MODULE_ENABLED.
 *
 * Data length codes: only the HAL's FDCAN_DLC_BYTES_* macros are used, never their
 * numbers. The G4 HAL defines them as the 4-bit DLC (FDCAN_DLC_BYTES_12 = 0x9); the H7
 * HAL before v1.11.3 (March 2024) defined them shifted left by 16 (0x00090000), and its
 * HAL_FDCAN_GetRxMessage returned DataLength in that form too. Both work unchanged
 * (tests/run.sh runs the tests against both encodings).
 *
 * Written against ST's published HAL API and checked on the host against a fake of it
 * (fake/); never run on real hardware (README.md).
 */
#ifndef FCAN_STM32_FDCAN_H
#define FCAN_STM32_FDCAN_H

#include <stdint.h>

#ifndef FCAN_STM32_HAL_HEADER
#define FCAN_STM32_HAL_HEADER "main.h"
#endif
#include FCAN_STM32_HAL_HEADER

#include "fcan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Received frames the ring holds between the interrupt and the main loop: a power of two,
 * at least 2; 76 bytes each (a frame and its time). Size it for the frames that can
 * arrive between two calls of fcan_stm32_fdcan_ingest: a saturated bus brings roughly 4
 * to 10 frames per millisecond (bit rates and lengths decide), so 16 covers about 2 ms
 * of loop latency. Frames that find it full are dropped and counted (rx_ring_full); the
 * ring is never overwritten. */
#ifndef FCAN_STM32_FDCAN_RX_RING
#define FCAN_STM32_FDCAN_RX_RING 16u
#endif

/* One received frame and the node clock (µs) when the interrupt took it. */
typedef struct {
    fcan_frame_t frame;
    uint32_t t_us;
} fcan_stm32_fdcan_rx_slot_t;

/*
 * The glue's state for one FDCAN peripheral: one per node. Put it in a `static` and
 * read it only through the functions below.
 *
 * Concurrency: the ring is single-producer (the FDCAN interrupt) single-consumer (the
 * main loop). `rx_head` and the counters marked (isr) are written only by the interrupt,
 * `rx_tail` and the others only by the loop; every field is a naturally aligned 32-bit
 * word, which Cortex-M reads and writes in one access. See fcan_stm32_fdcan.c for the
 * memory ordering this relies on (single core).
 */
typedef struct {
    FDCAN_HandleTypeDef *hfdcan;
    fcan_stm32_fdcan_rx_slot_t rx_ring[FCAN_STM32_FDCAN_RX_RING];
    /* Free-running indices (unsigned wrap-around): slots rx_tail .. rx_head-1 are full. */
    volatile uint32_t rx_head; /* (isr) */
    volatile uint32_t rx_tail; /* (loop) */
    /* (isr) counters */
    volatile uint32_t rx_frames;
    volatile uint32_t rx_ring_full;
    volatile uint32_t rx_bad_length;
    volatile uint32_t rx_remote;
    volatile uint32_t bus_off;
    /* (loop) counters and state */
    uint32_t rx_node_refused;
    uint32_t tx_frames;
    uint32_t tx_refused;
    uint32_t tx_bad_frame;
    uint32_t restarts;
    uint32_t restart_failed;
    uint32_t bus_off_handled; /* bus_off as of the last successful restart */
} fcan_stm32_fdcan_t;

/* The glue's counters (fcan_stm32_fdcan_counters). Each is exact; read while the
 * interrupt runs, the set is not one snapshot (a frame may be counted in rx_frames and
 * not yet ingested). */
typedef struct {
    /* Frames taken from the Rx FIFO 0 into the ring. */
    uint32_t rx_frames;
    /* Frames drained from the Rx FIFO 0 and dropped: the ring was full. */
    uint32_t rx_ring_full;
    /* Frames dropped: DataLength not one of the HAL's FDCAN_DLC_BYTES_* codes. */
    uint32_t rx_bad_length;
    /* Remote frames dropped (fcan has none; the global filter can reject them). */
    uint32_t rx_remote;
    /* Frames fcan_node_ingest refused (FCAN_ERR_FRAME); they are consumed. */
    uint32_t rx_node_refused;
    /* Frames HAL_FDCAN_AddMessageToTxFifoQ took. */
    uint32_t tx_frames;
    /* Transmit refusals (Tx FIFO/queue full, a HAL error, or a bus-off not yet
     * recovered): the node kept the frame and offers it again at a later poll. */
    uint32_t tx_refused;
    /* Frames dropped on transmit: a length or identifier not legal for the frame's kind
     * (the node never hands one; counted rather than wedging the node's queue). */
    uint32_t tx_bad_frame;
    /* Times the controller went bus-off (PSR.BO set when the bus-off status changed). */
    uint32_t bus_off;
    /* Restarts done (HAL_FDCAN_Stop + HAL_FDCAN_Start both HAL_OK). */
    uint32_t restarts;
    /* Restart attempts that failed (tried again at the next ingest). */
    uint32_t restart_failed;
} fcan_stm32_fdcan_counters_t;

/*
 * Sets up `ctx` for the peripheral `hfdcan` (initialised by MX_FDCANx_Init, that is
 * HAL_FDCAN_Init) and activates the two notifications the glue needs,
 * FDCAN_IT_RX_FIFO0_NEW_MESSAGE and FDCAN_IT_BUS_OFF (HAL_FDCAN_ActivateNotification).
 * Configures nothing else: bit timing, frame format, filters and HAL_FDCAN_Start stay the
 * project's (README.md says what they must be). Call it before HAL_FDCAN_Start and
 * before the node exists. Returns 0, or -1 (NULL argument, or the HAL refused: the
 * handle is not initialised).
 */
int32_t fcan_stm32_fdcan_init(fcan_stm32_fdcan_t *ctx, FDCAN_HandleTypeDef *hfdcan);

/*
 * From HAL_FDCAN_RxFifo0Callback (interrupt context): drains the Rx FIFO 0 (as many
 * frames as it held on entry) into the ring, each stamped `now_us` (the node clock).
 * A call for another FDCAN handle is ignored, so one callback can serve several
 * peripherals. `RxFifo0ITs` is the HAL's argument; every Rx FIFO 0 event drains.
 */
void fcan_stm32_fdcan_on_rx_fifo0(fcan_stm32_fdcan_t *ctx, FDCAN_HandleTypeDef *hfdcan,
                                  uint32_t RxFifo0ITs, uint32_t now_us);

/*
 * From HAL_FDCAN_ErrorStatusCallback (interrupt context): when the bus-off status changed
 * (FDCAN_FLAG_BUS_OFF in `ErrorStatusITs`) and the controller is now bus-off
 * (HAL_FDCAN_GetProtocolStatus: BusOff), counts it and asks the main loop to restart
 * the peripheral (the next fcan_stm32_fdcan_ingest does). Leaving bus-off, and the
 * error-warning / error-passive changes, are ignored.
 */
void fcan_stm32_fdcan_on_error_status(fcan_stm32_fdcan_t *ctx, FDCAN_HandleTypeDef *hfdcan,
                                      uint32_t ErrorStatusITs);

/*
 * From the main loop, before fcan_node_poll: restarts the peripheral if it went
 * bus-off, then hands the ring's frames (those there on entry) to fcan_node_ingest with
 * their arrival times. Returns the frames handed over, or a negative FCAN_ERR_*
 * (FCAN_ERR_ARG for NULL; FCAN_ERR_REENTRANT when called from inside a node callback,
 * the frame then stays in the ring). Never from an interrupt.
 */
int32_t fcan_stm32_fdcan_ingest(fcan_stm32_fdcan_t *ctx, fcan_node_t *node);

/*
 * The node's transmit callback (fcan_transmit_fn; `user` is the context): builds an
 * FDCAN_TxHeaderTypeDef (IdType, DataLength code, FDFormat and BitRateSwitch from the
 * frame, a data frame, ErrorStateIndicator active, no Tx event, MessageMarker 0) and
 * calls HAL_FDCAN_AddMessageToTxFifoQ. Returns 0 when the HAL took the frame, 1 when it
 * cannot now (Tx FIFO full: HAL_FDCAN_GetTxFifoFreeLevel 0 in FIFO mode, or the HAL
 * call failed; or a bus-off the loop has not restarted yet): the node keeps the frame
 * and offers it again. Main loop only (it runs inside fcan_node_poll).
 */
int32_t fcan_stm32_fdcan_transmit(void *user, const fcan_frame_t *frame);

/* Copies the counters to `*out`. Returns 0, or -1 for NULL. */
int32_t fcan_stm32_fdcan_counters(const fcan_stm32_fdcan_t *ctx,
                                  fcan_stm32_fdcan_counters_t *out);

#ifdef __cplusplus
}
#endif

#endif /* FCAN_STM32_FDCAN_H */
