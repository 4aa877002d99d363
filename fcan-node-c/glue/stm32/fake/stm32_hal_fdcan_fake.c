/*
 * stm32_hal_fdcan_fake.c: see stm32_hal_fdcan_fake.h. Each HAL function checks the
 * handle's state as the HAL does (Start needs READY, Stop / AddMessage / GetRxMessage
 * need BUSY, ActivateNotification READY or BUSY, ConfigGlobalFilter READY), sets the
 * same ErrorCode bits on refusal, and records what the real driver's assert_param
 * (USE_FULL_ASSERT) would reject, plus frames the glue must never build (a Classical
 * frame with a DLC above 8 or with BRS), as `misuse`.
 *
 * Not modelled: bit timing, filters (every frame reaches the Rx FIFO 0), the Tx queue's
 * priority order (the bus always takes the oldest pending frame), the bus-off recovery's
 * 129 x 11 recessive bits (Start after a bus-off leaves it at once and raises the
 * "bus-off status changed" flag, as the hardware does when recovery completes).
 */
#include "stm32_hal_fdcan_fake.h"

#include <string.h>

static const uint8_t dlc_to_bytes[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64};

#define DLC_FIELD ((uint32_t)0xFU << FAKE_HAL_DLC_SHIFT)

uint32_t fake_fdcan_dlc_of_len(uint32_t len)
{
    uint32_t dlc;
    for (dlc = 0; dlc < 16u; dlc++) {
        if (dlc_to_bytes[dlc] == len) {
            return dlc;
        }
    }
    return 0xFFu;
}

uint32_t fake_fdcan_hal_code(uint32_t dlc)
{
    return (dlc & 0xFu) << FAKE_HAL_DLC_SHIFT;
}

static void misuse(FDCAN_GlobalTypeDef *inst, const char *what)
{
    inst->misuse++;
    inst->misuse_what = what;
}

void fake_fdcan_init(FDCAN_HandleTypeDef *h, FDCAN_GlobalTypeDef *inst)
{
    memset(inst, 0, sizeof *inst);
    memset(h, 0, sizeof *h);
    inst->init = 1u;
    inst->rx_size = 3u;
    inst->tx_size = 3u;
    inst->tx_free_level_override = -1;
    h->Instance = inst;
    h->Init.FrameFormat = FDCAN_FRAME_FD_BRS;
    h->Init.TxFifoQueueMode = FDCAN_TX_FIFO_OPERATION;
    h->State = HAL_FDCAN_STATE_READY;
    h->ErrorCode = HAL_FDCAN_ERROR_NONE;
}

void fake_fdcan_set_rx_size(FDCAN_GlobalTypeDef *inst, uint32_t n)
{
    if (n == 0u || n > FAKE_FDCAN_MAX_ELEMENTS || inst->rx_fill != 0u) {
        misuse(inst, "fake_fdcan_set_rx_size");
        return;
    }
    inst->rx_size = n;
    inst->rx_get = 0;
}

void fake_fdcan_set_tx_size(FDCAN_GlobalTypeDef *inst, uint32_t n)
{
    if (n == 0u || n > FAKE_FDCAN_MAX_ELEMENTS || inst->tx_fill != 0u) {
        misuse(inst, "fake_fdcan_set_tx_size");
        return;
    }
    inst->tx_size = n;
    inst->tx_get = 0;
}

/* ---- HAL ----------------------------------------------------------------------- */

HAL_StatusTypeDef HAL_FDCAN_ConfigGlobalFilter(FDCAN_HandleTypeDef *hfdcan,
                                               uint32_t NonMatchingStd, uint32_t NonMatchingExt,
                                               uint32_t RejectRemoteStd,
                                               uint32_t RejectRemoteExt)
{
    if (hfdcan->State != HAL_FDCAN_STATE_READY) {
        hfdcan->ErrorCode |= HAL_FDCAN_ERROR_NOT_READY;
        return HAL_ERROR;
    }
    if (NonMatchingStd > FDCAN_REJECT || NonMatchingExt > FDCAN_REJECT ||
        RejectRemoteStd > FDCAN_REJECT_REMOTE || RejectRemoteExt > FDCAN_REJECT_REMOTE) {
        misuse(hfdcan->Instance, "HAL_FDCAN_ConfigGlobalFilter: argument");
    }
    hfdcan->Instance->global_filter[0] = NonMatchingStd;
    hfdcan->Instance->global_filter[1] = NonMatchingExt;
    hfdcan->Instance->global_filter[2] = RejectRemoteStd;
    hfdcan->Instance->global_filter[3] = RejectRemoteExt;
    return HAL_OK;
}

HAL_StatusTypeDef HAL_FDCAN_Start(FDCAN_HandleTypeDef *hfdcan)
{
    FDCAN_GlobalTypeDef *inst = hfdcan->Instance;
    if (hfdcan->State != HAL_FDCAN_STATE_READY) {
        hfdcan->ErrorCode |= HAL_FDCAN_ERROR_NOT_READY;
        return HAL_ERROR;
    }
    hfdcan->State = HAL_FDCAN_STATE_BUSY;
    inst->init = 0; /* CLEAR_BIT(CCCR, INIT) */
    hfdcan->ErrorCode = HAL_FDCAN_ERROR_NONE;
    inst->starts++;
    if (inst->bus_off) {
        /* Recovery (instant here): PSR.BO cleared, IR.BO "status changed" raised. */
        inst->bus_off = 0;
        inst->IR |= FDCAN_FLAG_BUS_OFF;
    }
    return HAL_OK;
}

HAL_StatusTypeDef HAL_FDCAN_Stop(FDCAN_HandleTypeDef *hfdcan)
{
    FDCAN_GlobalTypeDef *inst = hfdcan->Instance;
    if (hfdcan->State != HAL_FDCAN_STATE_BUSY) {
        hfdcan->ErrorCode |= HAL_FDCAN_ERROR_NOT_STARTED;
        return HAL_ERROR;
    }
    inst->init = 1u; /* SET_BIT(CCCR, INIT); then CCE: the FIFOs' status is reset */
    inst->tx_discarded += inst->tx_fill;
    inst->tx_fill = 0;
    inst->tx_get = 0;
    inst->rx_discarded += inst->rx_fill;
    inst->rx_fill = 0;
    inst->rx_get = 0;
    hfdcan->LatestTxFifoQRequest = 0;
    hfdcan->State = HAL_FDCAN_STATE_READY;
    inst->stops++;
    return HAL_OK;
}

/* What assert_param checks in the HAL's AddMessageToTxFifoQ, and what the glue must not
 * send. Returns the 4-bit DLC, or 0xFF. */
static uint32_t check_tx_header(FDCAN_HandleTypeDef *hfdcan, const FDCAN_TxHeaderTypeDef *h)
{
    FDCAN_GlobalTypeDef *inst = hfdcan->Instance;
    uint32_t dlc = 0xFFu;

    if (h->IdType != FDCAN_STANDARD_ID && h->IdType != FDCAN_EXTENDED_ID) {
        misuse(inst, "AddMessage: IdType");
    } else if (h->Identifier > (h->IdType == FDCAN_STANDARD_ID ? 0x7FFu : 0x1FFFFFFFu)) {
        misuse(inst, "AddMessage: Identifier out of range");
    }
    if (h->TxFrameType != FDCAN_DATA_FRAME && h->TxFrameType != FDCAN_REMOTE_FRAME) {
        misuse(inst, "AddMessage: TxFrameType");
    } else if (h->TxFrameType == FDCAN_REMOTE_FRAME) {
        misuse(inst, "AddMessage: a remote frame (fcan sends none)");
    }
    if ((h->DataLength & ~DLC_FIELD) != 0u) {
        misuse(inst, "AddMessage: DataLength is not an FDCAN_DLC_BYTES_* code");
    } else {
        dlc = h->DataLength >> FAKE_HAL_DLC_SHIFT;
    }
    if (h->ErrorStateIndicator != FDCAN_ESI_ACTIVE &&
        h->ErrorStateIndicator != FDCAN_ESI_PASSIVE) {
        misuse(inst, "AddMessage: ErrorStateIndicator");
    } else if (h->ErrorStateIndicator != FDCAN_ESI_ACTIVE) {
        misuse(inst, "AddMessage: ESI passive");
    }
    if (h->BitRateSwitch != FDCAN_BRS_OFF && h->BitRateSwitch != FDCAN_BRS_ON) {
        misuse(inst, "AddMessage: BitRateSwitch");
    }
    if (h->FDFormat != FDCAN_CLASSIC_CAN && h->FDFormat != FDCAN_FD_CAN) {
        misuse(inst, "AddMessage: FDFormat");
    }
    if (h->TxEventFifoControl != FDCAN_NO_TX_EVENTS &&
        h->TxEventFifoControl != FDCAN_STORE_TX_EVENTS) {
        misuse(inst, "AddMessage: TxEventFifoControl");
    }
    if (h->MessageMarker > 0xFFu) {
        misuse(inst, "AddMessage: MessageMarker");
    }
    if (h->FDFormat == FDCAN_CLASSIC_CAN && dlc != 0xFFu && dlc > 8u) {
        misuse(inst, "AddMessage: a Classical frame with DLC > 8");
    }
    if (h->FDFormat == FDCAN_CLASSIC_CAN && h->BitRateSwitch == FDCAN_BRS_ON) {
        misuse(inst, "AddMessage: BRS on a Classical frame");
    }
    if (h->FDFormat == FDCAN_FD_CAN && hfdcan->Init.FrameFormat == FDCAN_FRAME_CLASSIC) {
        misuse(inst, "AddMessage: FD frame on a controller initialised Classical");
    }
    if (h->BitRateSwitch == FDCAN_BRS_ON && hfdcan->Init.FrameFormat != FDCAN_FRAME_FD_BRS) {
        misuse(inst, "AddMessage: BRS on a controller initialised without BRS");
    }
    return dlc;
}

HAL_StatusTypeDef HAL_FDCAN_AddMessageToTxFifoQ(FDCAN_HandleTypeDef *hfdcan,
                                                FAKE_HAL_CONST FDCAN_TxHeaderTypeDef *pTxHeader,
                                                FAKE_HAL_CONST uint8_t *pTxData)
{
    FDCAN_GlobalTypeDef *inst = hfdcan->Instance;
    fake_fdcan_tx_t *slot;
    uint32_t dlc;

    inst->calls_add_message++;
    dlc = check_tx_header(hfdcan, pTxHeader);
    if (hfdcan->State != HAL_FDCAN_STATE_BUSY) {
        hfdcan->ErrorCode |= HAL_FDCAN_ERROR_NOT_STARTED;
        return HAL_ERROR;
    }
    if (inst->tx_fill == inst->tx_size) { /* TXFQS.TFQF */
        hfdcan->ErrorCode |= HAL_FDCAN_ERROR_FIFO_FULL;
        return HAL_ERROR;
    }
    slot = &inst->tx[(inst->tx_get + inst->tx_fill) % inst->tx_size];
    memset(slot, 0, sizeof *slot);
    slot->header = *pTxHeader;
    if (dlc != 0xFFu) {
        memcpy(slot->data, pTxData, dlc_to_bytes[dlc]);
    }
    inst->tx_fill++;
    hfdcan->LatestTxFifoQRequest = 1u;
    inst->tx_accepted++;
    return HAL_OK;
}

HAL_StatusTypeDef HAL_FDCAN_GetRxMessage(FDCAN_HandleTypeDef *hfdcan, uint32_t RxLocation,
                                         FDCAN_RxHeaderTypeDef *pRxHeader, uint8_t *pRxData)
{
    FDCAN_GlobalTypeDef *inst = hfdcan->Instance;
    const fake_fdcan_element_t *e;

    if (hfdcan->State != HAL_FDCAN_STATE_BUSY) {
        hfdcan->ErrorCode |= HAL_FDCAN_ERROR_NOT_STARTED;
        return HAL_ERROR;
    }
    if (RxLocation != FDCAN_RX_FIFO0) {
        misuse(inst, "GetRxMessage: only the Rx FIFO 0 is modelled");
        hfdcan->ErrorCode |= HAL_FDCAN_ERROR_FIFO_EMPTY;
        return HAL_ERROR;
    }
    if (inst->rx_fill == 0u) {
        hfdcan->ErrorCode |= HAL_FDCAN_ERROR_FIFO_EMPTY;
        return HAL_ERROR;
    }
    e = &inst->rx[inst->rx_get];
    pRxHeader->IdType = e->xtd ? FDCAN_EXTENDED_ID : FDCAN_STANDARD_ID;
    pRxHeader->Identifier = e->id;
    pRxHeader->RxFrameType = e->rtr ? FDCAN_REMOTE_FRAME : FDCAN_DATA_FRAME;
    pRxHeader->ErrorStateIndicator = e->esi ? FDCAN_ESI_PASSIVE : FDCAN_ESI_ACTIVE;
    pRxHeader->RxTimestamp = 0;
    /* A `dlc` above 15 (tests only) gives a DataLength that is no FDCAN_DLC_BYTES_* code,
     * as a HAL built with the other DLC encoding than its header would. */
    pRxHeader->DataLength = e->dlc < 16u ? fake_fdcan_hal_code(e->dlc)
                                         : (uint32_t)e->dlc << FAKE_HAL_DLC_SHIFT;
    pRxHeader->BitRateSwitch = e->brs ? FDCAN_BRS_ON : FDCAN_BRS_OFF;
    pRxHeader->FDFormat = e->fdf ? FDCAN_FD_CAN : FDCAN_CLASSIC_CAN;
    pRxHeader->FilterIndex = 0;
    pRxHeader->IsFilterMatchingFrame = 1;
    /* As the HAL: DLCtoBytes[DLC] bytes, whatever the format (64 for a Classical DLC 15). */
    if (e->dlc < 16u) {
        memcpy(pRxData, e->data, dlc_to_bytes[e->dlc]);
    }
    inst->rx_get = (inst->rx_get + 1u) % inst->rx_size;
    inst->rx_fill--;
    return HAL_OK;
}

HAL_StatusTypeDef HAL_FDCAN_GetProtocolStatus(FAKE_HAL_CONST FDCAN_HandleTypeDef *hfdcan,
                                              FDCAN_ProtocolStatusTypeDef *ProtocolStatus)
{
    memset(ProtocolStatus, 0, sizeof *ProtocolStatus);
    ProtocolStatus->LastErrorCode = 7u; /* "no change" */
    ProtocolStatus->DataLastErrorCode = 7u;
    ProtocolStatus->BusOff = hfdcan->Instance->bus_off;
    ProtocolStatus->ErrorPassive = hfdcan->Instance->bus_off;
    ProtocolStatus->Warning = hfdcan->Instance->bus_off;
    return HAL_OK;
}

uint32_t HAL_FDCAN_GetRxFifoFillLevel(FAKE_HAL_CONST FDCAN_HandleTypeDef *hfdcan,
                                      uint32_t RxFifo)
{
    return RxFifo == FDCAN_RX_FIFO0 ? hfdcan->Instance->rx_fill : 0u;
}

uint32_t HAL_FDCAN_GetTxFifoFreeLevel(FAKE_HAL_CONST FDCAN_HandleTypeDef *hfdcan)
{
    const FDCAN_GlobalTypeDef *inst = hfdcan->Instance;
    if (inst->tx_free_level_override >= 0) {
        return (uint32_t)inst->tx_free_level_override;
    }
    if (hfdcan->Init.TxFifoQueueMode == FDCAN_TX_QUEUE_OPERATION) {
        return 0u; /* TXFQS.TFFL reads 0 in queue mode */
    }
    return inst->tx_size - inst->tx_fill;
}

HAL_StatusTypeDef HAL_FDCAN_ActivateNotification(FDCAN_HandleTypeDef *hfdcan,
                                                 uint32_t ActiveITs, uint32_t BufferIndexes)
{
    (void)BufferIndexes;
    if (hfdcan->State != HAL_FDCAN_STATE_READY && hfdcan->State != HAL_FDCAN_STATE_BUSY) {
        hfdcan->ErrorCode |= HAL_FDCAN_ERROR_NOT_INITIALIZED;
        return HAL_ERROR;
    }
    hfdcan->Instance->IE |= ActiveITs;
    return HAL_OK;
}

#define RX_FIFO0_MASK \
    (FDCAN_FLAG_RX_FIFO0_NEW_MESSAGE | FDCAN_FLAG_RX_FIFO0_FULL | FDCAN_FLAG_RX_FIFO0_MESSAGE_LOST)
#define ERROR_STATUS_MASK (FDCAN_FLAG_ERROR_PASSIVE | FDCAN_FLAG_ERROR_WARNING | FDCAN_FLAG_BUS_OFF)

void HAL_FDCAN_IRQHandler(FDCAN_HandleTypeDef *hfdcan)
{
    FDCAN_GlobalTypeDef *inst = hfdcan->Instance;
    uint32_t rx0 = inst->IR & RX_FIFO0_MASK & inst->IE;
    uint32_t status = inst->IR & ERROR_STATUS_MASK & inst->IE;

    if (rx0 != 0u) {
        inst->IR &= ~rx0;
        HAL_FDCAN_RxFifo0Callback(hfdcan, rx0);
    }
    if (status != 0u) {
        inst->IR &= ~status;
        HAL_FDCAN_ErrorStatusCallback(hfdcan, status);
    }
}

/* ---- test controls --------------------------------------------------------------- */

int fake_fdcan_receive(FDCAN_GlobalTypeDef *inst, const fake_fdcan_element_t *e)
{
    if (inst->init) {
        return -1; /* not on the bus */
    }
    if (inst->rx_fill == inst->rx_size) {
        inst->rx_lost++;
        inst->IR |= FDCAN_FLAG_RX_FIFO0_MESSAGE_LOST;
        return -1;
    }
    inst->rx[(inst->rx_get + inst->rx_fill) % inst->rx_size] = *e;
    inst->rx_fill++;
    inst->IR |= FDCAN_FLAG_RX_FIFO0_NEW_MESSAGE;
    if (inst->rx_fill == inst->rx_size) {
        inst->IR |= FDCAN_FLAG_RX_FIFO0_FULL;
    }
    return 0;
}

int fake_fdcan_receive_frame(FDCAN_GlobalTypeDef *inst, uint32_t id, int extended, int fd,
                             int brs, const uint8_t *data, uint32_t len)
{
    fake_fdcan_element_t e;
    uint32_t dlc = fake_fdcan_dlc_of_len(len);
    if (dlc == 0xFFu || (!fd && len > 8u)) {
        misuse(inst, "fake_fdcan_receive_frame: length");
        return -1;
    }
    memset(&e, 0, sizeof e);
    e.id = id;
    e.xtd = extended ? 1u : 0u;
    e.fdf = fd ? 1u : 0u;
    e.brs = (fd && brs) ? 1u : 0u;
    e.dlc = dlc;
    if (len > 0u) {
        memcpy(e.data, data, len);
    }
    return fake_fdcan_receive(inst, &e);
}

int fake_fdcan_bus_take(FDCAN_GlobalTypeDef *inst, fake_fdcan_tx_t *out)
{
    if (inst->init || inst->tx_fill == 0u) {
        return 0;
    }
    *out = inst->tx[inst->tx_get];
    inst->tx_get = (inst->tx_get + 1u) % inst->tx_size;
    inst->tx_fill--;
    return 1;
}

uint32_t fake_fdcan_tx_pending(const FDCAN_GlobalTypeDef *inst)
{
    return inst->tx_fill;
}

void fake_fdcan_enter_bus_off(FDCAN_GlobalTypeDef *inst)
{
    inst->bus_off = 1u;
    inst->init = 1u;
    inst->IR |= FDCAN_FLAG_BUS_OFF;
}
